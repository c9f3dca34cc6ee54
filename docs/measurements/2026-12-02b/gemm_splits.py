"""Splitting K past 128 rows where the tiles make few blocks: each of the rule's M > 128 tiles
(and the 64 x 64 x 128 small-M tile) with K split 1-4, through the op's split-K pair (fp32 partials
in a workspace, then one reduce + ReLU kernel), against the rule and torch relu(a @ b).
do_bench medians, L2 flushed; every kernel checked on a poisoned output.

    python3 gemm_splits.py [SEED]
"""
import math, random, sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench, split_k

TILES = {n: (c or gr.tuned_config("float16")) for n, c, _ in rule.LARGE_M_TILES if n in ("tuned", "m128n128k128t256", "narrow", "m256n128")}
TILES["m64n64k128s4"] = rule.SMALL_M_TILES["m64n64k128s4"]
FIXED = [(183, 1248, 5024, "float16"), (228, 2336, 5672, "float16"), (275, 7176, 6528, "bfloat16"),
         (650, 3744, 8056, "float16"), (520, 4872, 5304, "bfloat16"), (1511, 1576, 5552, "bfloat16"),
         (2896, 3128, 4080, "float16"), (5686, 712, 5600, "bfloat16")]


def cands(M, N, K):
    return [(n, s) for n in TILES for s in (1, 2, 3, 4) if s == 1 or K // s >= 1024]


def job(j):
    N, K, n, s, dt = j
    gr.build_for(N, K, TILES[n], s, dt)


def runner(a, b, out, n, s):
    N, K = b.shape[1], b.shape[0]
    dt = str(a.dtype).replace("torch.", "")
    if s == 1:
        k = gr.build_gemm_relu(N, K, config=TILES[n], dtype=dt)
        return lambda: k(a, b, out)
    return lambda: split_k.gemm_relu_split_k(a, b, s, TILES[n], out)


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    rnd = [(rng.randint(129, 1024), 8 * rng.randint(64, 1024), 8 * rng.randint(256, 1024), ("float16", "bfloat16")[i % 2])
           for i in range(3)]
    shapes = FIXED + rnd
    jobs = [(N, K, n, s, dt) for M, N, K, dt in shapes for n, s in cands(M, N, K)]
    t0 = time.time()
    got = runtime.precompile(jobs, "gemm_splits:job")
    bad = {j for j, e in got.items() if e is not None}
    print(f"seed {seed}: precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    choices = {s: rule.choose(*s) for s in shapes}
    bench.prebuild_rule(choices)
    for M, N, K, dt in shapes:
        a, b = bench._inputs(M, N, K, dt)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        gr.gemm_relu(a, b, out=out); torch.cuda.synchronize()
        ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        tr = timing.median_ms(lambda: gr.gemm_relu(a, b, out=out))
        print(f"\n{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {choices[(M, N, K, dt)].label} {tr * 1e3:.1f} us "
              f"{tt / tr:.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        for n, s in cands(M, N, K):
            if (N, K, n, s, dt) in bad:
                continue
            c = TILES[n]
            out = checks.poisoned((M, N), a.dtype, "cuda")
            f = runner(a, b, out, n, s); f(); torch.cuda.synchronize()
            ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
            ms = timing.median_ms(f)
            blocks = math.ceil(M / c.block_M) * math.ceil(N / c.block_N) * s
            print(f"   {n:<18} k{s} {blocks:>5} blocks {ms * 1e3:7.1f} us {tt / ms:5.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        del a, b, out
        torch.cuda.empty_cache()
