"""Few-block shapes past 128 rows (the rule's waves pick makes fewer than 100 blocks, K >= 4096):
every tile of the few-block candidates *and the tuned 128 x 256 tile* with K split 1-4 (each
slice at least 1024 deep), at most one wave of 132 blocks (plus the pick), against the rule and
torch relu(a @ b); do_bench medians with the L2 flushed, every kernel checked on a poisoned
output. Also prints which candidate "the most blocks within one wave, fewer splits on a tie"
takes with the tuned tile added to the set. Reuses 2026-12-02b/gemm_splits.py's runner.

    python3 gemm_fewblocks.py [SEED]
"""
import math, random, sys, time
here = __file__.rsplit("/", 1)[0]
sys.path.insert(0, here); sys.path.insert(0, here + "/../2026-12-02b")
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench
import gemm_splits as gs

FIXED = [(260, 1280, 7800, "float16"), (781, 1464, 4144, "bfloat16"), (183, 1248, 5024, "float16"),
         (228, 2336, 5672, "float16"), (356, 7176, 5272, "float16")]


def few_block(M, N, K, dt):
    if M <= 128 or K < rule.SPLIT_MIN_K:
        return False
    best = None
    for name, cfg, rate in rule.LARGE_M_TILES:
        cfg = cfg or rule.TUNED_CONFIGS[dt]
        blocks = rule._blocks(M, N, cfg)
        t = math.ceil(blocks / rule.SM_COUNT) * (2.0 * cfg.block_M * cfg.block_N * K) / rate
        if best is None or t < best[0] - 1e-12:
            best = (t, blocks)
    return best[1] < rule.FEW_BLOCKS


def cands(M, N, K, dt):
    pick = rule.choose(M, N, K, dt)
    out = []
    for n in gs.TILES:
        for s in (1, 2, 3, 4):
            if s > 1 and K // s < 1024:
                continue
            c = gs.TILES[n]
            blocks = math.ceil(M / c.block_M) * math.ceil(N / c.block_N) * s
            if blocks <= rule.SM_COUNT:
                out.append((n, s, blocks))
    return pick, out


def job(j):
    N, K, n, s, dt = j
    gr.build_for(N, K, gs.TILES[n], s, dt)


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    rnd = []
    while len(rnd) < 5:
        s = (rng.randint(129, 1024), 8 * rng.randint(64, 1024), 8 * rng.randint(512, 1024), ("float16", "bfloat16")[len(rnd) % 2])
        if few_block(*s):
            rnd.append(s)
    shapes = FIXED + rnd
    jobs = [(N, K, n, s, dt) for M, N, K, dt in shapes for n, s, _ in cands(M, N, K, dt)[1]]
    t0 = time.time()
    got = runtime.precompile(jobs, "gemm_fewblocks:job")
    bad = {j for j, e in got.items() if e is not None}
    print(f"seed {seed}: precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    choices = {s: rule.choose(*s) for s in shapes}
    bench.prebuild_rule(choices)
    for M, N, K, dt in shapes:
        pick, cs = cands(M, N, K, dt)
        a, b = bench._inputs(M, N, K, dt)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        gr.gemm_relu(a, b, out=out); torch.cuda.synchronize()
        ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        tr = timing.median_ms(lambda: gr.gemm_relu(a, b, out=out))
        maxb = max(cs, key=lambda c: (c[2], -c[1])) if cs else None
        print(f"\n{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {pick.label} split {pick.split} {tr * 1e3:.1f} us "
              f"{tt / tr:.2f}x {'ok' if ok else 'WRONG'}; most blocks with tuned: {maxb}", flush=True)
        for n, s, blocks in cs:
            if (N, K, n, s, dt) in bad:
                continue
            out = checks.poisoned((M, N), a.dtype, "cuda")
            f = gs.runner(a, b, out, n, s); f(); torch.cuda.synchronize()
            ok = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt]).ok
            ms = timing.median_ms(f)
            print(f"   {n:<18} k{s} {blocks:>5} blocks {ms * 1e3:7.1f} us {tt / ms:5.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        del a, b, out
        torch.cuda.empty_cache()
    print(f"gemm_fewblocks: {time.time() - t0:.0f} s")
