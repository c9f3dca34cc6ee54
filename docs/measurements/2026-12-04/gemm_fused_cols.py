"""The fused split-K kernel of ``gemm_fused_probe.py`` with its read-back testing the column too
(``guard_cols=True``), against the measured fused kernel and the op's two-kernel pair, at the slow
cases of ``gemm_fused_probe.log`` (all with ``N % block_N != 0``) and controls (``N % block_N == 0``).
Hypothesis (``fused_resources.md``, CPU only): the column test lets ptxas predicate the loads of W
into separate registers, all in flight at once, instead of one branch per load.
do_bench medians, L2 flushed; every kernel checked on a poisoned output before and after timing.

    python3 gemm_fused_cols.py
"""
import math, sys, time
here = __file__.rsplit("/", 1)[0] or "."
sys.path.insert(0, here); sys.path.insert(0, here + "/../2026-12-02b"); sys.path.insert(0, here + "/../2026-12-03")
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, split_k
import gemm_fused_probe as fp

# (M, N, K, dtype, tile, split): the slow cases, then the controls
CASES = [(183, 1248, 5024, "float16", "narrow", 4), (183, 1248, 5024, "float16", "m64n64k128s4", 2),
         (228, 2336, 5672, "float16", "m128n128k128t256", 3), (781, 1464, 4144, "bfloat16", "tuned", 2),
         (637, 3616, 7856, "float16", "tuned", 2), (145, 960, 4480, "float16", "narrow", 3),
         (260, 1280, 7800, "float16", "m128n128k128t256", 3), (145, 960, 4480, "float16", "m64n64k128s4", 2),
         (64, 2048, 8192, "float16", "m64n64k128s4", 4)]
KINDS = ("fused", "fused+cols", "pair")


def job(j):
    N, K, n, s, dt, kind, a_rows = j
    if kind == "pair":
        split_k.build_split_k(N, K, s, fp.TILES[n], dt)
    else:
        fp.build_fused(N, K, s, n, dt, a_rows, kind == "fused+cols")


def runner(a, b, out, n, s, kind):
    M, K = a.shape
    N = b.shape[1]
    dt = str(a.dtype).replace("torch.", "")
    c = fp.TILES[n]
    w = torch.empty((s, M, N), dtype=torch.float32, device=a.device)
    if kind == "pair":
        partial, reduce = (runtime.launcher(k) for k in split_k.build_split_k(N, K, s, c, dt))
        return lambda: (partial(a, b, w), reduce(w, out))
    k = fp.build_fused(N, K, s, n, dt, fp.short(M, c), kind == "fused+cols")
    counters = torch.zeros(math.ceil(M / c.block_M) * math.ceil(N / c.block_N), dtype=torch.int32, device=a.device)
    return lambda: k(a, b, out, w, counters)


if __name__ == "__main__":
    t0 = time.time()
    jobs = [(N, K, n, s, dt, kind, fp.short(M, fp.TILES[n]) if kind != "pair" else 0)
            for M, N, K, dt, n, s in CASES for kind in KINDS]
    got = runtime.precompile(jobs, "gemm_fused_cols:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in bad:
        print("compile failed", j, repr(got[j])[:300])
    print(f"precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    for M, N, K, dt, n, s in CASES:
        a, b = fp.bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        print(f"\n{M}x{N}x{K} {dt} {n} k{s} (N % block_N = {N % fp.TILES[n].block_N}): torch {tt * 1e3:.1f} us", flush=True)
        for kind in KINDS:
            if (N, K, n, s, dt, kind, fp.short(M, fp.TILES[n]) if kind != "pair" else 0) in bad:
                continue
            out = checks.poisoned((M, N), a.dtype, "cuda")
            f = runner(a, b, out, n, s, kind)
            oks = []
            for call in range(3):
                out.copy_(checks.poisoned((M, N), a.dtype, "cuda"))
                f(); torch.cuda.synchronize()
                oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
            ms = timing.median_ms(f)
            out.copy_(checks.poisoned((M, N), a.dtype, "cuda"))
            f(); torch.cuda.synchronize()
            oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
            print(f"   {kind:<11} {ms * 1e3:7.1f} us {tt / ms:5.2f}x {'ok' if all(oks) else 'WRONG ' + str(oks)}", flush=True)
        del a, b, ref
        torch.cuda.empty_cache()
    print(f"gemm_fused_cols: {time.time() - t0:.0f} s")
