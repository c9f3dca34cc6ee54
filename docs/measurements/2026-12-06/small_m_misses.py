"""65-128 rows where the 2026-12-06 gemm_rule record read below 0.90x torch: which tile and split wins?

Why. The record (results/gemm_rule.json, seed 476367249, bench_gemm_rule.log beside this file) has
these small-M misses on the H200: N = 2496, K = 2432 at 79-128 rows, two rows of 64 x 32 tiles (156
blocks, a second wave; K below the rule's split threshold), 0.82-0.86x; 73 x 7344 x 3512 bf16 and
100 x 6824 x 6200 fp16, 128 x 64 tiles in two boxes (115 and 107 blocks), 0.74x and 0.75x;
79 x 4096 x 4096 bf16, two rows of 64 x 64 tiles, 0.87x; 80 x 2048 x 8192 fp16, 0.85x, where
small_m_narrow_n.log has 128 x 64 tiles with K split 4 faster (not adopted: it changes a recorded
pick). With only 65-128 rows, every block of a 64- or 128-row tile reads its rows of A again:
A's bytes over all blocks can pass B's (73 x 7344 x 3512: 115 blocks x 73 rows of A, 59 MB, against
B's 52 MB), so wider tiles (fewer re-reads) with K split to keep the blocks may win.

What it does. At the fixed shapes above (and 80 x 2048 at K = 5120 and 6144, where the N = 2048
split's threshold lies), then ``COUNT`` shapes drawn afresh (M 65..128, N and K multiples of 64 in
2048..8192, fp16 or bf16): torch, the rule's pick, and each candidate below, checked on a poisoned C
against the fp32 reference and timed (do_bench median, L2 flushed), with its block count.
The swapped kernel (M on wgmma's width, 64 or 128 rows of N per block) is timed beside them.
Prediction (to test): at the two-box misses 128 x 128 tiles with K split 2 (114 and 108 blocks, half
of A's re-reads) beat the pick by >= 15 %; at N = 2496, K = 2432 the 128 x 64 tile split 3 (117
blocks) beats two rows of 64 x 32 tiles; at N = 2048 the split wins from K = 6144.

    python3 small_m_misses.py [SEED|fresh] [COUNT]   # on the GPU
    python3 small_m_misses.py --shapes [SEED]        # anywhere: the shapes and the candidates' blocks
"""
import math, random, sys, time

from tilelang_tutorial.lessons.gemm import rule

sys.path.insert(0, (__file__.rsplit("/", 1)[0] if "/" in __file__ else ".") + "/../2026-12-05b")
from swap_ab import checked_ms, shape_inputs     # noqa: E402  (the check-then-time of swap_fixed.log)

FIXED = [(80, 2496, 2432, "float16"), (128, 2496, 2432, "float16"), (79, 2496, 2432, "bfloat16"),
         (73, 7344, 3512, "bfloat16"), (100, 6824, 6200, "float16"), (79, 4096, 4096, "bfloat16"),
         (80, 2048, 8192, "float16"), (80, 2048, 6144, "float16"), (80, 2048, 5120, "float16")]
T = rule.SMALL_M_TILES
WIDE = dict((n, c) for n, c, _ in rule.LARGE_M_TILES)["m128n128k128t256"]
#: (name, tile, split, last_rows); splits whose slices would be shorter than 512 are skipped (the rule
#: keeps 1024, rule.SPLIT_MIN_SLICE: shorter slices were never measured, which this probe does)
CANDIDATES = [("m64n32k256s4-clamped", T["m64n32k256s4"], 1, "clamped"),
              ("m64n64k128s4-clamped", T["m64n64k128s4"], 1, "clamped"),
              ("m128n64k64s6-two-boxes", T["m128n64k64s6"], 1, "two boxes")] + [
              (f"m128n64k64s6/k{k}", T["m128n64k64s6"], k, "filled") for k in (2, 3, 4)] + [
              (f"m128n128k128t256/k{k}", WIDE, k, "filled") for k in (1, 2, 3, 4)]


def draw(seed, count):
    rng = random.Random(seed)
    return [(rng.randint(65, 128), 64 * rng.randint(32, 128), 64 * rng.randint(32, 128),
             rng.choice(("float16", "bfloat16"))) for _ in range(count)]


def candidates(M, N, K):
    """the fixed candidates (splits with slices of at least 512) and the swapped kernel (M on
    wgmma's width, rounded up to 16) with 64- and 128-row tiles of N"""
    width = 16 * math.ceil(M / 16)
    return [c for c in CANDIDATES if c[2] == 1 or K // c[2] >= 512] + [
        (f"swap{bn}x{width}", rule.swapped_config(bn, width), 1, "swapped") for bn in (64, 128)]


def choice(name, cfg, split, last_rows):
    return rule.GemmChoice(name, cfg, split, None, "probe", last_rows=last_rows)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seed = int(args[0]) if args and args[0] != "fresh" else random.SystemRandom().randrange(2 ** 31)
    count = int(args[1]) if len(args) > 1 else 6
    shapes = FIXED + draw(seed, count)
    print(f"seed {seed}: {len(FIXED)} fixed shapes, {count} drawn (M 65..128, N and K multiples of 64 in 2048..8192)")
    if "--shapes" in sys.argv:
        for s in shapes:
            c = rule.choose(*s, "sm_90a")
            print(s, c.label, rule._blocks(s[0], s[1], c.config, c.split), "|",
                  " ".join(f"{n}:{rule._blocks(s[0], s[1], cfg, k)}" for n, cfg, k, _ in candidates(*s[:3])))
        sys.exit(0)
    import torch
    from tilelang_tutorial.lessons.gemm import bench

    t0 = time.time()
    picks = {s: rule.choose(*s) for s in shapes}
    jobs = dict(picks)
    # keyed by the candidate's name (a clamped choice's contrast does not read M); the swapped ones by
    # their real shape, one batch per width of N (their contrast is the rule's pick at that M)
    jobs.update({(c[0], N, K, dt): choice(*c) for (M, N, K, dt) in shapes for c in candidates(M, N, K)
                 if c[3] != "swapped"})
    bench.prebuild_rule(jobs)
    for bn in (64, 128):
        bench.prebuild_rule({(M, N, K, dt): choice(*c) for (M, N, K, dt) in shapes for c in candidates(M, N, K)
                             if c[0].startswith(f"swap{bn}x")})
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.0f} s", flush=True)
    for s in shapes:
        M, N, K, dt = s
        a, b, ref, out, tt = shape_inputs(M, N, K, dt)
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us"
        for n, c in [("pick " + picks[s].label.replace(" ", "_"), picks[s])] + [(c[0], choice(*c)) for c in candidates(M, N, K)]:
            ms, ok = checked_ms(bench.direct_call(c, N, K, dt, a, b, out), out, ref, dt)
            line += f"; {n} {rule._blocks(M, N, c.config, c.split)} blocks {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}"
        print(line, flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"small_m_misses: {time.time() - t0:.0f} s")
