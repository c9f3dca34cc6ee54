"""The swapped kernel over few blocks and a long K: split K?

Why. The swapped kernel (C^T = B^T A^T, M on wgmma's width) is the rule's pick past 128 rows where
its time model says so, and for 65-128 rows over 2432 columns (branch ``rule-long-k``). Where it
makes few blocks, each block walks the whole of K alone: on an H100 (docs/measurements/2026-12-06b/
bench_gemm_rule_h100_b.log) 130 x 696 x 8168 bf16 ran 33 blocks of 48 x 64 at 0.71x torch and
245 x 1480 x 4840 bf16 48 blocks of 128 x 64 at 0.76x; on the H200 (results/gemm_rule.json,
2026-12-06) 692 x 760 x 3336 fp16, 60 blocks of 144 x 64, at 0.82x. In 4,000 shapes drawn as
gemm_rule draws them, the rule picks the swapped kernel with fewer than 100 blocks at 15 %, 7 % with
K >= 4096. The model prices one block's K steps by its FLOPs at 6.5 TFLOP/s per SM; 30.4 us for
33 blocks of 48 x 64 x 8168 is 1.7 TFLOP/s per SM, so a small tile's steps cost more than their
FLOPs (each step waits on its barrier, its loads and its wgmma in turn).

What it does. The swapped kernel with K split 2, 3 or 4 (``last_rows.swapped_partial_program``:
the same tile, its fp32 partial stored transposed, then split_k's reduction), at the shapes above
and then ``COUNT`` shapes drawn as gemm_rule draws its random set where the rule's pick is the
swapped kernel with fewer than 100 blocks: torch, the rule's pick, each split of it (slices of at
least 512, at most two waves of blocks) and the pick without the swap (``measured_choice(...,
swap=False)``), each checked on a poisoned C against the fp32 reference, then timed (do_bench
median, L2 flushed); where the pick holds 128 rows of N per block, the same width on 64 rows
(twice the blocks) too. Prediction (to test): below 66 blocks over K >= 4096 the split that fills one
wave is >= 1.3x faster than the pick; from 66 to 99 blocks a split of 2 (a second wave) gains
nothing.

    python3 swap_split.py [SEED|fresh] [COUNT]    # on the GPU
    python3 swap_split.py --shapes [SEED] [COUNT] # anywhere: the shapes and the candidates' blocks
"""
import random, sys, time

from tilelang_tutorial.lessons.gemm import bench, last_rows, rule

if not hasattr(last_rows, "swapped_partial_program"):
    # without it a split of a swapped tile would build split_k's plain partial kernel, not the swap
    sys.exit("swap_split.py needs last_rows.swapped_partial_program (branch rule-long-k, from 1d54fca)")

sys.path.insert(0, (__file__.rsplit("/", 1)[0] if "/" in __file__ else ".") + "/../2026-12-05b")
from swap_ab import checked_ms, shape_inputs     # noqa: E402  (the check-then-time of the earlier probes)

FIXED = [(130, 696, 8168, "bfloat16"), (245, 1480, 4840, "bfloat16"), (692, 760, 3336, "float16"),
         (348, 584, 7728, "float16"), (87, 4192, 4376, "float16"), (79, 3432, 3904, "bfloat16")]
FEW = 100


def swapped_few(M, N, K, dt):
    c = rule.choose(M, N, K, dt, "sm_90a")
    return c.last_rows == "swapped" and rule._blocks(M, N, c.config) < FEW


def draw(seed, count):
    """``count`` shapes of gemm_rule's random set (bench.random_shapes, drawn in batches from ``seed``)
    whose pick is the swapped kernel with fewer than FEW blocks"""
    out, rng = [], random.Random(seed)
    while len(out) < count:
        out += [s for s in bench.random_shapes(64, seed=rng.randrange(2 ** 31)) if swapped_few(*s)]
    return out[:count]


def candidates(M, N, K, dt):
    """(name, choice): the pick, its tile with K split 1-4 (slices >= 512, at most two waves; /k1 unsplit), a 128-row-of-N pick's tile
    on 64 rows of N (split 1 or 2), and the pick without the swap"""
    pick = rule.choose(M, N, K, dt, "sm_90a")
    blocks = rule._blocks(M, N, pick.config)
    out = [("pick " + pick.label.replace(" ", "_"), pick)]
    for s in (1, 2, 3, 4):
        if s == pick.split:
            continue
        if K // s >= 512 and blocks * s <= 2 * rule.SM_COUNT:
            out.append((f"{pick.name}" + (f"/k{s}" if s > 1 else "/k1"), rule.GemmChoice(pick.name, pick.config, s, None, "probe",
                                                              last_rows="swapped")))
    if pick.config.block_N == 128:          # the same width on 64 rows of N: twice the blocks, one warpgroup
        narrow = rule.swapped_config(64, pick.config.block_M)
        for s in (1, 2):
            if rule._blocks(M, N, narrow, s) <= 2 * rule.SM_COUNT and K // s >= 512:
                out.append((f"swap64x{narrow.block_M}" + (f"/k{s}" if s > 1 else ""),
                            rule.GemmChoice(f"swap64x{narrow.block_M}", narrow, s, None, "probe", last_rows="swapped")))
    plain = rule.measured_choice(M, N, K, dt, swap=False)
    out.append(("unswapped " + plain.label.replace(" ", "_"), plain))
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seed = int(args[0]) if args and args[0] != "fresh" else random.SystemRandom().randrange(2 ** 31)
    count = int(args[1]) if len(args) > 1 else 10
    shapes = FIXED + draw(seed, count)
    print(f"seed {seed}: {len(FIXED)} fixed shapes, {count} drawn (gemm_rule's random set, the pick swapped "
          f"with fewer than {FEW} blocks)")
    if "--shapes" in sys.argv:
        for s in shapes:
            print(s, " | ".join(f"{n} {rule._blocks(s[0], s[1], c.config, c.split)}" for n, c in candidates(*s)))
        sys.exit(0)
    import torch

    t0 = time.time()
    cands = {s: candidates(*s) for s in shapes}
    for i in range(max(map(len, cands.values()))):      # prebuild_rule keys on the shape: one batch per position
        bench.prebuild_rule({s: c[i][1] for s, c in cands.items() if i < len(c)})
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.0f} s", flush=True)
    for s in shapes:
        M, N, K, dt = s
        a, b, ref, out, tt = shape_inputs(M, N, K, dt)
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us"
        for n, c in candidates(*s):
            ms, ok = checked_ms(bench.direct_call(c, N, K, dt, a, b, out), out, ref, dt)
            line += f"; {n} {rule._blocks(M, N, c.config, c.split)} blocks {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}"
        print(line, flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"swap_split: {time.time() - t0:.0f} s")
