# the last device call: the rmsnorm suite, bf16 at fewer widths (device time), then saved
import sys, time
from tilelang_tutorial import results, lessons
from tilelang_tutorial.lessons.rmsnorm import bench
full = bench.WIDTHS
bench.NAIVE_WIDTHS = (128, 192, 640)
orig_run = bench.run
fp16 = orig_run.__globals__
bench.DTYPES = ("float16",)
run1 = bench.run()
bench.WIDTHS = tuple(C for C in full if C % 128 == 0 or C > 1024)
bench.DTYPES = ("bfloat16",)
bench.LATENCY_WIDTHS = ()
bench.VAE_CASES = ()
orig_naive, orig_two = bench._naive_records, bench._two_pass_records
bench._naive_records = lambda ceiling: []
bench._two_pass_records = lambda ceiling, kernels: []
run2 = bench.run()
run2.records = [r for r in run2.records if r["kernel"] == "rmsnorm_silu"]
prov = dict(run1.provenance, command="python -m tilelang_tutorial bench rmsnorm (fp16 at every listed width; bf16 at the multiples of 128 and the large widths: device time)")
path = results.save("rmsnorm", run1.records + run2.records, provenance_info=prov, goals=run1.goals)
print("wrote", path, len(run1.records) + len(run2.records))
