source .devrun/env.sh
nvidia-smi > logs/nvidia-smi.txt 2>&1
timeout 90 python3 .devrun/timing_diag.py > logs/timing_diag.log 2>&1
timeout 450 python3 -m tilelang_tutorial bench mla mla_timeline tile > logs/bench_b.log 2>&1
echo "exit $?" >> logs/bench_b.log
grep -v "INFO\|^  compile" logs/bench_b.log | tail -60
tail -8 logs/timing_diag.log
tar czf $OUT/b.tgz results logs
