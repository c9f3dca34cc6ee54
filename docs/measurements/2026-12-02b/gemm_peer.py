"""What torch (cuBLAS) launches at the GEMM shapes past 128 rows where the op trails it: kernel
name, grid and block from the profiler's trace, beside the op's rule choice and both times."""
import json, os, sys, tempfile, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench

SHAPES = [(1228, 3504, 5280), (1083, 4936, 7152), (275, 7176, 6528), (650, 3744, 8056), (639, 7280, 6608),
          (2896, 3128, 4080), (4096, 4096, 4096)]


def kernels_of(fn):
    from torch.profiler import profile, ProfilerActivity
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn(); torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    p.export_chrome_trace(path)
    ev = json.load(open(path))["traceEvents"]
    os.unlink(path)
    return [(e["name"][:150], e.get("args", {}).get("grid"), e.get("args", {}).get("block"),
             e.get("args", {}).get("registers per thread"), e.get("args", {}).get("shared memory"), round(e["dur"], 1))
            for e in ev if e.get("cat") == "kernel"]


if __name__ == "__main__":
    dt = "float16"
    choices = {(M, N, K, dt): rule.choose(M, N, K, dt) for M, N, K in SHAPES}
    bench.prebuild_rule(choices)
    for M, N, K in SHAPES:
        c = choices[(M, N, K, dt)]
        a, b = bench._inputs(M, N, K, dt)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        gr.gemm_relu(a, b, out=out); torch.cuda.synchronize()
        cmp = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt])
        ours = timing.median_ms(lambda: gr.gemm_relu(a, b, out=out))
        mm = timing.median_ms(lambda: a @ b)
        tr = timing.median_ms(lambda: torch.relu(a @ b))
        print(f"\n{M}x{N}x{K} {dt}: rule {c.label} ({'ok' if cmp.ok else 'WRONG'}): {ours * 1e3:.1f} us; torch a@b {mm * 1e3:.1f} us, "
              f"relu(a@b) {tr * 1e3:.1f} us; op/torch(relu) {tr / ours:.2f}x; {2 * M * N * K / mm / 1e9:.0f} TFLOP/s cuBLAS, "
              f"{2 * M * N * K / ours / 1e9:.0f} ours", flush=True)
        for k in kernels_of(lambda: a @ b):
            print("  torch:", k, flush=True)
        for k in kernels_of(lambda: gr.gemm_relu(a, b, out=out)):
            print("  ours: ", k, flush=True)
