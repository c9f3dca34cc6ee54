source .devrun/env.sh
timeout 560 python3 -m tilelang_tutorial bench rmsnorm_widths rmsnorm > logs/bench_c.log 2>&1
echo "exit $?" >> logs/bench_c.log
grep -v "INFO\|^  compile\|^C=" logs/bench_c.log | tail -70
tar czf $OUT/c.tgz results logs tilelang_tutorial/lessons/rmsnorm/width_table.json
