source .devrun/env.sh
timeout 300 python3 -m tilelang_tutorial bench gemm_rates gemm > logs/bench_d.log 2>&1
echo "exit $?" >> logs/bench_d.log
grep -v "INFO\|^  compile" logs/bench_d.log | tail -75
timeout 260 python3 -m pytest -q -m gpu --maxfail=15 -p no:cacheprovider tests tilelang_tutorial/lessons > logs/pytest_gpu.log 2>&1
tail -25 logs/pytest_gpu.log
tar czf $OUT/d.tgz results logs tilelang_tutorial/lessons/rmsnorm/width_table.json
