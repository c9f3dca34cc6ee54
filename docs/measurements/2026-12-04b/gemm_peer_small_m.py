"""Prepared on 2026-12-04 without a device (none was lent that session).

Goal 2's remaining misses, two questions for one device call:

1. What does torch (cuBLAS) launch where the op is still behind it? Kernel name, grid, block,
   registers and shared memory from the profiler's trace, beside the op's rule pick and both times,
   at the small-M shapes that sit at the 0.90 line (78 and 113 rows at 4096 x 4096 in bf16, 0.89 and
   0.90 in the last gemm_rule record) and at the few-block shapes past 128 rows that read 0.70-0.84.
   (2026-12-02b/gemm_peer.py asked it only for shapes past 128 rows, at 1000-2900 rows.)
2. Do wider tiles of B, with K split to keep about one block per SM, stream B faster at small M?
   The rule's small-M tiles are 32-64 wide: each TMA box of B is 64-128 bytes per row of K. The
   candidates: 128 x 128 and 64 x 256 and 128 x 256 tiles, K split 2-8, the reduction fused into
   the GEMM kernel with its column test (2026-12-04/gemm_fused_probe.py, guard_cols=True) and the
   op's two-kernel pair, against the rule's pick. Prediction (to test): within 5 % of the rule's pick,
   because at 4096 x 4096 both torch and the op take about 20 us for 33 MB of B, which the last
   records put at a fixed ~10 us plus B at ~3.4 TB/s at every width -- the width of the box is
   not what limits it. If a wider tile wins by more, the small-M rule should take it.

do_bench medians with the L2 flushed; every kernel checked on a poisoned output on three calls and
after timing (the fused kernel's counters must reset themselves).

    python3 gemm_peer_small_m.py               # on the GPU (the runner: probe:docs/measurements/2026-12-04b/gemm_peer_small_m.py)
    python3 gemm_peer_small_m.py --compile     # anywhere: compile every candidate for sm_90a, print what failed
    python3 gemm_peer_small_m.py --resources   # anywhere: also registers and spills per kernel (ptxas -v)
"""
import math, sys, time
here = __file__.rsplit("/", 1)[0] or "."
for d in ("", "/../2026-12-04", "/../2026-12-02b", "/../2026-12-03"):
    sys.path.insert(0, here + d)
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench, split_k
import gemm_fused_probe as fp

fp.TILES["narrow_wide"] = rule.CANDIDATES["narrow_wide"]          # 64 x 256 x 64, 3 stages, 128 threads

#: (M, N, K, dtype): the small-M shapes at the 0.90 line, then the few-block misses past 128 rows
SMALL = [(78, 4096, 4096, "bfloat16"), (113, 4096, 4096, "bfloat16"), (128, 4096, 4096, "float16"),
         (78, 2048, 8192, "bfloat16"), (80, 2048, 8192, "float16"), (80, 8192, 8192, "float16")]
FEW = [(260, 1280, 7800, "float16"), (781, 1464, 4144, "bfloat16"), (637, 3616, 7856, "float16"),
       (356, 7176, 5272, "float16"), (275, 7176, 6528, "float16"), (650, 3744, 8056, "float16")]
WIDE = ("m128n128k128t256", "narrow_wide", "tuned")
SPLITS = (1, 2, 4, 8)


def cands(M, N, K):
    """(tile, split, blocks): the wide tiles with K split so that 64-160 blocks stream B, each slice
    of K at least 512 deep"""
    out = []
    for n in WIDE:
        c = fp.TILES[n]
        for s in SPLITS:
            blocks = math.ceil(M / c.block_M) * math.ceil(N / c.block_N) * s
            if (s == 1 or K // s >= 512) and 64 <= blocks <= 160:
                out.append((n, s, blocks))
    return out


def kinds(s):
    return ("fused+cols", "pair") if s > 1 else ("plain",)


def job(j):
    N, K, n, s, dt, kind = j
    if kind == "plain":
        gr.build_for(N, K, fp.TILES[n], 1, dt)
    elif kind == "pair":
        split_k.build_split_k(N, K, s, fp.TILES[n], dt)
    else:
        fp.build_fused(N, K, s, n, dt, 0, True)


def runner(a, b, out, n, s, kind):
    import torch

    M, K = a.shape
    N = b.shape[1]
    dt = str(a.dtype).replace("torch.", "")
    c = fp.TILES[n]
    if kind == "plain":
        k = gr.build_gemm_relu(N, K, config=c, dtype=dt)
        return lambda: k(a, b, out)
    w = torch.empty((s, M, N), dtype=torch.float32, device=a.device)
    if kind == "pair":
        partial, reduce = (runtime.launcher(k) for k in split_k.build_split_k(N, K, s, c, dt))
        return lambda: (partial(a, b, w), reduce(w, out))
    k = fp.build_fused(N, K, s, n, dt, 0, True)
    counters = torch.zeros(math.ceil(M / c.block_M) * math.ceil(N / c.block_N), dtype=torch.int32, device=a.device)
    return lambda: k(a, b, out, w, counters)


def checked_ms(f, out, ref, dt):
    import torch

    oks = []
    for _ in range(3):
        out.copy_(checks.poisoned(tuple(out.shape), out.dtype, "cuda"))
        f(); torch.cuda.synchronize()
        oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
    ms = timing.median_ms(f)
    out.copy_(checks.poisoned(tuple(out.shape), out.dtype, "cuda"))
    f(); torch.cuda.synchronize()
    oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
    return ms, ("ok" if all(oks) else "WRONG " + str(oks))


if __name__ == "__main__":
    t0 = time.time()
    jobs = [(N, K, n, s, dt, kind) for M, N, K, dt in SMALL for n, s, _ in cands(M, N, K) for kind in kinds(s)]
    got = runtime.precompile(jobs, "gemm_peer_small_m:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in sorted(bad):
        print("compile failed", j, repr(got[j])[:300])
    print(f"precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    if "--resources" in sys.argv:
        from tilelang_tutorial import inspector

        for N, K, n, s, dt, kind in sorted(set(jobs) - bad):
            if kind == "plain":
                ks = list(gr.build_for(N, K, fp.TILES[n], 1, dt))
            elif kind == "pair":
                ks = list(split_k.build_split_k(N, K, s, fp.TILES[n], dt))
            else:
                ks = [fp.build_fused(N, K, s, n, dt, 0, True)]
            use = [u for k in ks for u in inspector.resource_usage(k).values()]
            print(f"{N}x{K} {dt:<8} {n:<17} k{s} {kind:<10} " + "; ".join(
                f"{u.get('registers', '?')} registers, {u.get('spill_stores', 0)}/{u.get('spill_loads', 0)} bytes spilled"
                for u in use), flush=True)
    if "--compile" in sys.argv or "--resources" in sys.argv:
        sys.exit(1 if bad else 0)

    import torch
    from gemm_peer import kernels_of

    choices = {s: rule.choose(*s) for s in SMALL + FEW}
    bench.prebuild_rule(choices)
    for M, N, K, dt in SMALL + FEW:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        mm = timing.median_ms(lambda: a @ b)
        ms, ok = checked_ms(lambda: gr.gemm_relu(a, b, out=out), out, ref, dt)
        print(f"\n{M}x{N}x{K} {dt}: torch relu(a@b) {tt * 1e3:.1f} us (a@b {mm * 1e3:.1f}); "
              f"rule {choices[(M, N, K, dt)].label} {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}", flush=True)
        for k in kernels_of(lambda: a @ b):
            print("   torch:", k, flush=True)
        if (M, N, K, dt) in SMALL:
            for n, s, blocks in cands(M, N, K):
                for kind in kinds(s):
                    if (N, K, n, s, dt, kind) in bad:
                        continue
                    ms, ok = checked_ms(runner(a, b, out, n, s, kind), out, ref, dt)
                    print(f"   {kind:<10} {n:<17} k{s} {blocks:>4} blocks {ms * 1e3:7.1f} us {tt / ms:5.2f}x {ok}", flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"gemm_peer_small_m: {time.time() - t0:.0f} s")
