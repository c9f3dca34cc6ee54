"""Past 128 rows, where the waves pick leaves much of its last wave empty: is a better tile there?

Why. The lowest random figure of the last gemm_rule record is 1322 x 6472 x 7288 fp16 at 0.797x
torch: the rule's 256 x 160 tile makes 246 blocks, two waves on 132 SMs, and its last row of tiles
holds 42 of 256 rows, so 79 % of the tiles' work is rows and columns of C. A 192-row tile (three
consumer warpgroups of 64 rows, 384 threads) of 192 columns makes 238 blocks at 88 %; the rule has
no 192-row tile. The rule's rates were measured at four full waves; at two they were never checked.

What it does. The two lowest random shapes of that record, then shapes drawn afresh past 128 rows
(M log-uniform 129..8192, N and K multiples of 8 in 512..8192, as the benchmark draws) until
``COUNT`` of them have a waves pick (not swapped, not split) of more than one wave that fills at
most 88 % of its waves.
At each: torch, then every tile of ``rule.LARGE_M_TILES`` and three 192-row tiles, each checked on
a poisoned C against the fp32 reference and timed (do_bench median, L2 flushed), with the rule's
predicted time (waves x tile time at the tile's rate). Prediction (to test): the 192 x 192 tile is
the fastest at 1322 x 6472 x 7288 (about 0.9x torch), and the fill of the waves orders the tiles
better than the rule's rates do at two or three waves.

    python3 two_waves.py [SEED|fresh] [COUNT]      # on the GPU
    python3 two_waves.py rates                     # on the GPU: every tile's rate as the rule's were measured
    python3 two_waves.py --shapes                  # anywhere: the shapes a seed draws and the rule's picks
    python3 two_waves.py at MxNxK:dtype ...        # on the GPU: every tile at these shapes only
"""
import math, random, sys, time

from tilelang_tutorial.lessons.gemm import rule

sys.path.insert(0, (__file__.rsplit("/", 1)[0] if "/" in __file__ else ".") + "/../2026-12-05b")
from swap_ab import checked_ms, shape_inputs     # noqa: E402  (the check-then-time of swap_fixed.log)

FIXED = [(1322, 6472, 7288, "float16"), (565, 1976, 6920, "bfloat16")]


def tall192(block_N, num_stages):
    return rule.GemmConfig(block_M=192, block_N=block_N, block_K=64, num_stages=num_stages, threads=384,
                           policy="FullRow", swizzle_panel=8, swizzle_order="row", store_via_shared=True)


#: (name, config or None for the tuned one, rate the rule uses or None)
TILES = [(n, c, r) for n, c, r in rule.LARGE_M_TILES if n != "narrow"] + [
    ("m192n128", tall192(128, 5), None), ("m192n160", tall192(160, 4), None), ("m192n192", tall192(192, 4), None)]


def config_of(cfg, dt):
    return cfg or rule.TUNED_CONFIGS[dt]


def fill(M, N, cfg):
    blocks = rule._blocks(M, N, cfg)
    return M * N / (math.ceil(blocks / rule.SM_COUNT) * rule.SM_COUNT * cfg.block_M * cfg.block_N)


def predicted_us(M, N, K, cfg, rate):
    if rate is None:
        return None
    return math.ceil(rule._blocks(M, N, cfg) / rule.SM_COUNT) * 2.0 * cfg.block_M * cfg.block_N * K / (rate * 1e12 / rule.SM_COUNT) * 1e6


def draw(seed, count):
    rng, out = random.Random(seed), []
    while len(out) < count:
        M = int(round(2 ** rng.uniform(math.log2(129), 13)))
        N, K, dt = 8 * rng.randint(64, 1024), 8 * rng.randint(64, 1024), rng.choice(("float16", "bfloat16"))
        c = rule.choose(M, N, K, dt, "sm_90a")
        blocks = rule._blocks(M, N, c.config)
        if c.last_rows == "filled" and c.split == 1 and blocks > rule.SM_COUNT and fill(M, N, c.config) <= 0.88:
            out.append((M, N, K, dt))
    return out


def choice(name, cfg):
    return rule.GemmChoice(name, cfg, 1, None, "probe")


def rates():
    """Every tile of TILES at four full waves (24 x 22 tiles, K = 4096, fp16), the shapes the rule's
    rates were measured at (docs/measurements/2026-12-02b/gemm_waves.log): the rate the rule would
    use for a 192-row tile, beside the rates it uses, measured again in the same run."""
    import torch
    from tilelang_tutorial.lessons.gemm import bench

    shapes = {n: (config_of(c, "float16").block_M * 24, config_of(c, "float16").block_N * 22, 4096) for n, c, _ in TILES}
    bench.prebuild_rule({(n, N, K, "float16"): choice(n, config_of(c, "float16"))
                         for (n, c, _), (M, N, K) in zip(TILES, shapes.values())})
    print(f"{torch.cuda.get_device_name(0)}; rates at 4 full waves (24 x 22 tiles), K = 4096, fp16", flush=True)
    for n, c, rate in TILES:
        cfg = config_of(c, "float16")
        M, N, K = shapes[n]
        a, b, ref, out, tt = shape_inputs(M, N, K, "float16")
        ms, ok = checked_ms(bench.direct_call(choice(n, cfg), N, K, "float16", a, b, out), out, ref, "float16")
        print(f"rate {n:18s} {cfg.name:40s} {M}x{N}x{K}: {2 * M * N * K / ms / 1e9:6.0f} TFLOP/s "
              f"(the rule uses {'-' if rate is None else f'{rate:.0f}'}; torch {2 * M * N * K / tt / 1e9:.0f}) {ok}",
              flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    if sys.argv[1:2] == ["rates"]:
        rates()
        sys.exit(0)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if args[:1] == ["at"]:          # named shapes, e.g. 3092x3976x7496:bfloat16
        shapes = [(*map(int, a.split(":")[0].split("x")), a.split(":")[1]) for a in args[1:]]
        print(f"{len(shapes)} shapes named on the command line")
    else:
        seed = int(args[0]) if args and args[0] != "fresh" else random.SystemRandom().randrange(2 ** 31)
        count = int(args[1]) if len(args) > 1 else 8
        shapes = FIXED + draw(seed, count)
        print(f"seed {seed}: {len(FIXED)} fixed shapes, {count} drawn where the waves pick fills <= 88 % of its waves")
    if "--shapes" in sys.argv:
        for s in shapes:
            c = rule.choose(*s, "sm_90a")
            print(s, c.label, rule._blocks(s[0], s[1], c.config), "blocks, fill", round(fill(s[0], s[1], c.config), 2), "|",
                  " ".join(f"{n}:{fill(s[0], s[1], config_of(cfg, s[3])):.2f}" for n, cfg, _ in TILES))
        sys.exit(0)
    import torch
    from tilelang_tutorial.lessons.gemm import bench

    t0 = time.time()
    # prebuild_rule's keys are only unpacked for N, K and dtype: one key per (shape, tile)
    jobs = {(i, N, K, dt): choice(n, config_of(cfg, dt)) for i, (n, cfg, _) in enumerate(TILES) for (_, N, K, dt) in shapes}
    bench.prebuild_rule(jobs)
    print(f"{torch.cuda.get_device_name(0)}; compiled {len(jobs)} kernels in {time.time() - t0:.0f} s", flush=True)
    for s in shapes:
        M, N, K, dt = s
        pick = rule.choose(*s)
        a, b, ref, out, tt = shape_inputs(M, N, K, dt)
        print(f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; the rule's pick {pick.label}", flush=True)
        for n, cfg, rate in TILES:
            cfg = config_of(cfg, dt)
            ms, ok = checked_ms(bench.direct_call(choice(n, cfg), N, K, dt, a, b, out), out, ref, dt)
            p = predicted_us(M, N, K, cfg, rate)
            mark = " <- pick" if cfg == pick.config else ""
            print(f"   {n:18s} {cfg.name:40s} blocks {rule._blocks(M, N, cfg):5d} fill {fill(M, N, cfg):.2f} "
                  f"predicted {'-' if p is None else f'{p:.1f}'} us, measured {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}{mark}",
                  flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"two_waves: {time.time() - t0:.0f} s")
