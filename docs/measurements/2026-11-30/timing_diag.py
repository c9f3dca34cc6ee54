"""Why the recorded small-M RMSNorm latencies (11-92 us) disagreed with an independent timing
(~10 us): time the same call several ways on the GPU, with and without the per-call host work the
op did then (runtime.require_gpu -> mode(): device name, capability, env, PATH walk for nvcc)."""
import os, shutil, statistics, time, json
import torch
import tilelang_tutorial
from tilelang_tutorial import checks, timing
from tilelang_tutorial.lessons.rmsnorm import kernel as rs
from triton.testing import do_bench

def old_mode_overhead():
    # what tilelang_tutorial.runtime.mode() did per op call at 8a79ed7 (require_gpu)
    torch.cuda.is_available(); torch.cuda.get_device_name()
    os.environ.get("TILELANG_TUTORIAL_ARCH", ""); torch.cuda.is_available(); torch.cuda.get_device_capability()
    torch.cuda.get_device_capability()

def host_us(fn, n=2000):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    dt = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize(); return dt

out = {}
flush = torch.empty(256 << 18, dtype=torch.int32, device="cuda")
out["flush_memset_us"] = do_bench(lambda: flush.zero_(), return_mode="median") * 1e3
out["old_mode_overhead_host_us"] = host_us(old_mode_overhead)
for C in (160, 256, 512, 1024):
    x = checks.random_tensor((2048, C), torch.float16, "cuda"); g = checks.random_tensor((C,), torch.float16, "cuda")
    y = torch.empty_like(x)
    op = lambda: rs.rmsnorm_silu(x, g, 1e-5, out=y)
    old_op = lambda: (old_mode_overhead(), rs.rmsnorm_silu(x, g, 1e-5, out=y))
    k = rs.build_rmsnorm_silu(C, "float16")
    raw = lambda: k(x, g, y, 1e-5)
    row = {}
    for name, fn in (("op", op), ("op_plus_old_mode_check", old_op), ("raw_kernel", raw),
                     ("eager", lambda: torch.nn.functional.silu(torch.nn.functional.rms_norm(x, (C,), g, 1e-5)))):
        fn(); torch.cuda.synchronize()
        row[name] = {"do_bench_flush_us": do_bench(fn, return_mode="median") * 1e3,
                     "host_issue_us": host_us(fn, 500)}
        t = timing.measure(fn, regime="call")
        row[name]["back_to_back_us"] = t.ms * 1e3
        row[name]["wall_clock_us"] = t.check_ms * 1e3
    out[C] = row
    print(C, json.dumps(row, indent=None), flush=True)
print(json.dumps(out, indent=1))
os.makedirs("logs", exist_ok=True)
json.dump(out, open("logs/timing_diag.json", "w"), indent=1)
