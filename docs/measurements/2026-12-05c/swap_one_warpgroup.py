"""Prepared for the next H200 session (not run): is the rule right to take a swapped tile of one
warpgroup (block_N = 64) over few blocks?

Why. The model behind ``rule.swapped_or`` was fitted on 193 swapped timings of which only 2 were
such tiles (under 66 blocks); both ran about 30 % slower than it predicts. At 183 x 1248 x 5024 the
rule takes one (96 wide, 40 blocks) and it measured 21.5 us against 17.2 for the pick without the
swap (``swap_fixed.log``); at 279 x 1304 x 3000 (63 blocks) it was still the faster, 18.8 against
20.2; in the check, 331 x 1072 x 2456 bf16 (51 blocks) 15.9 against 17.7.

What it does. Shapes drawn afresh past 128 rows until ``COUNT`` of them make the rule take such a
tile; at each, checked on a poisoned output and timed (do_bench medians, L2 flushed) in the same
run: torch, the op through the rule, the rule's pick without the swap, and the best swapped tile of
two warpgroups. Prediction (to test): the one-warpgroup tile loses to the pick without the swap at
about half of them, by 10-25 %, where its blocks are fewer than about 50.

    python3 swap_one_warpgroup.py [SEED|fresh] [COUNT]      # on the GPU
    python3 swap_one_warpgroup.py --shapes                  # anywhere: the shapes a seed draws, and the picks
"""
import math, random, sys, time

from tilelang_tutorial.lessons.gemm import rule

sys.path.insert(0, (__file__.rsplit("/", 1)[0] if "/" in __file__ else ".") + "/../2026-12-05b")
from swap_ab import checked_ms, shape_inputs     # noqa: E402  (the check-then-time of swap_fixed.log)


def one_warpgroup_pick(M, N, K, dt):
    c = rule.choose(M, N, K, dt, "sm_90a")
    return c.last_rows == "swapped" and c.config.block_N == 64 and rule._blocks(M, N, c.config) < 66


def draw(seed, count):
    rng, out = random.Random(seed), []
    while len(out) < count:
        M = int(round(math.exp(rng.uniform(math.log(129), math.log(700)))))
        N, K = rng.randrange(512, 3073, 8), rng.randrange(1024, 8193, 8)
        dt = rng.choice(("float16", "bfloat16"))
        if one_warpgroup_pick(M, N, K, dt):
            out.append((M, N, K, dt))
    return out


def two_warpgroup_choice(M, N, K):
    """the model's cheapest swapped tile of block_N = 128, as a rule choice (None: no such tile)"""
    tiles = [t for t in rule.swapped_tiles(M, N) if t[0] == 128]
    if not tiles:
        return None
    bn, w = min(tiles, key=lambda t: rule.SWAP_MODEL.predict_us(M, N, K, t[1], t[0]))
    return rule.GemmChoice(f"swap{bn}x{w}", rule.swapped_config(bn, w), 1, None, "two warpgroups", last_rows="swapped")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seed = int(args[0]) if args and args[0] != "fresh" else random.SystemRandom().randrange(2 ** 31)
    count = int(args[1]) if len(args) > 1 else 16
    shapes = draw(seed, count)
    print(f"seed {seed}, {count} shapes where the rule takes a swapped tile of one warpgroup over < 66 blocks")
    if "--shapes" in sys.argv:
        for s in shapes:
            c, w2 = rule.choose(*s, "sm_90a"), two_warpgroup_choice(*s[:3])
            print(s, c.label, rule._blocks(s[0], s[1], c.config), "blocks |", rule.measured_choice(*s, swap=False).label,
                  "|", w2.label if w2 else "-")
        sys.exit(0)
    import torch
    from tilelang_tutorial.lessons.gemm import bench

    t0 = time.time()
    picks = {s: rule.choose(*s) for s in shapes}
    plain = {s: rule.measured_choice(*s, swap=False) for s in shapes}
    wide = {s: two_warpgroup_choice(*s[:3]) for s in shapes}
    for choices in (picks, plain, {s: c for s, c in wide.items() if c}):
        bench.prebuild_rule(choices)
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.0f} s", flush=True)
    for s in shapes:
        M, N, K, dt = s
        a, b, ref, out, tt = shape_inputs(M, N, K, dt)
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us"
        for name, c in (("the rule", picks[s]), ("without the swap", plain[s]), ("two warpgroups", wide[s])):
            if c is None:
                continue
            ms, ok = checked_ms(bench.direct_call(c, N, K, dt, a, b, out), out, ref, dt)
            line += f"; {name} {c.label} {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}"
        print(line, flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"swap_one_warpgroup: {time.time() - t0:.0f} s")
