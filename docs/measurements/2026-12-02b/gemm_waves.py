"""Wave-fitted tiles past 128 rows: notebook 02's kernel (256 threads, FullRow, TMA-stored C) with
tiles of widths other than 128 and 256 (and 256 rows), as cuBLAS's nvjet kernels use (256x144,
192x112, 128x144, 128x168, 288x128 at the shapes where the op trails it), against the op's rule
and torch relu(a @ b). do_bench medians, L2 flushed; every kernel checked on a poisoned output.

    python3 gemm_waves.py [SEED]
"""
import math, random, sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench
from tilelang_tutorial.lessons.gemm.configs import GemmConfig

SMEM = 220 * 1024
SM = 132


def tile(bm, bn, bk=64):
    stage = (bm * bk + bk * bn) * 2
    stages = min(6, SMEM // stage)
    return GemmConfig(block_M=bm, block_N=bn, block_K=bk, num_stages=stages, threads=256, policy="FullRow",
                      swizzle_panel=8, swizzle_order="row", store_via_shared=True)


TILES = [tile(128, n) for n in (128, 144, 160, 176, 192, 208, 224, 240, 256)] + \
        [tile(256, n) for n in (96, 112, 128, 144, 160, 176, 192)]
FIXED = [(1228, 3504, 5280, "float16"), (1083, 4936, 7152, "float16"), (275, 7176, 6528, "bfloat16"),
         (650, 3744, 8056, "float16"), (639, 7280, 6608, "bfloat16"), (2896, 3128, 4080, "float16"),
         (858, 4944, 1008, "bfloat16"), (183, 1248, 5024, "float16"), (228, 2336, 5672, "float16")]


def waves_area(M, N, c):
    t = math.ceil(M / c.block_M) * math.ceil(N / c.block_N)
    return math.ceil(t / SM) * c.block_M * c.block_N


def picks(M, N):
    ranked = sorted(TILES, key=lambda c: (waves_area(M, N, c), -c.block_M * c.block_N))
    return list(dict.fromkeys(ranked[:6] + [TILES[0], TILES[8]]))


def job(j):
    N, K, i, dt = j
    gr.build_gemm_relu(N, K, config=TILES[i], dtype=dt)


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else random.SystemRandom().randrange(2**31)
    rnd = [s for s in bench.random_shapes(40, seed=seed) if s[0] > 128][:12]
    shapes = FIXED + rnd
    rate_shapes = [(c.block_M * 24, c.block_N * 22, 4096, "float16", i) for i, c in enumerate(TILES)]
    jobs = {(N, K, TILES.index(c), dt) for M, N, K, dt in shapes for c in picks(M, N)}
    jobs |= {(N, K, i, dt) for M, N, K, dt, i in rate_shapes}
    t0 = time.time()
    got = runtime.precompile(sorted(jobs), "gemm_waves:job")
    bad = {j: e for j, e in got.items() if e is not None}
    print(f"seed {seed}: precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s; failed: "
          f"{[(TILES[j[2]].name, str(e)[:120]) for j, e in list(bad.items())[:4]]}", flush=True)
    choices = {s: rule.choose(*s) for s in shapes}
    bench.prebuild_rule(choices)
    print("\n# rates: 4 full waves (24 x 22 tiles), K = 4096, fp16")
    for M, N, K, dt, i in rate_shapes:
        c = TILES[i]
        if (N, K, i, dt) in bad:
            continue
        k = gr.build_gemm_relu(N, K, config=c, dtype=dt)
        a, b = bench._inputs(M, N, K, dt)
        out = checks.poisoned((M, N), a.dtype, "cuda"); k(a, b, out); torch.cuda.synchronize()
        ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
        ms = timing.median_ms(lambda: k(a, b, out))
        print(f"rate {c.name:<40} {M}x{N}x{K}: {2 * M * N * K / ms / 1e9:6.0f} TFLOP/s {'ok' if ok else 'WRONG'}", flush=True)
        del a, b, out
    print("\n# shapes")
    for M, N, K, dt in shapes:
        a, b = bench._inputs(M, N, K, dt)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        gr.gemm_relu(a, b, out=out); torch.cuda.synchronize()
        ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        tr = timing.median_ms(lambda: gr.gemm_relu(a, b, out=out))
        print(f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {choices[(M, N, K, dt)].label} {tr * 1e3:.1f} us "
              f"{tt / tr:.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        for c in picks(M, N):
            if (N, K, TILES.index(c), dt) in bad:
                continue
            k = gr.build_gemm_relu(N, K, config=c, dtype=dt)
            out = checks.poisoned((M, N), a.dtype, "cuda"); k(a, b, out); torch.cuda.synchronize()
            ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
            ms = timing.median_ms(lambda: k(a, b, out))
            nt = math.ceil(M / c.block_M) * math.ceil(N / c.block_N)
            print(f"   {c.name:<40} {nt:>4} tiles {nt / SM:5.2f} waves {ms * 1e3:7.1f} us {tt / ms:5.2f}x "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
        del a, b, out
        torch.cuda.empty_cache()
