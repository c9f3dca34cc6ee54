source .devrun/env.sh
timeout 400 python3 .devrun/rms_final.py > logs/bench_e.log 2>&1
echo "exit $?" >> logs/bench_e.log
grep -v "INFO\|^  compile" logs/bench_e.log | tail -30
tar czf $OUT/e.tgz results logs
