"""65-128 rows on a narrow B (N 2048-3072): would splitting K beat two rows of 64 x 32 tiles?

Why. Goal 2's one small-M shape below 0.90x torch in the last gemm_rule record is 80 x 2048 x 8192
fp16: 24.5 us against torch's 21.7 (0.89x; 0.94x the record before). For 65-128 rows and N / 64 < 50
the rule takes two rows of 64 x 32 x 256 tiles, the second clamped to end at row M: 128 blocks at
N = 2048, but each block of the first row streams all 8192 columns of K for 64 rows of A and 32 of
B (1.5 MB per block), so A is read 64 times over. At M <= 64 the same N and K run 64 x 64 x 128
tiles with K split 4 (21.5 us at 64 x 2048 x 8192, 1.04x).

(Run first on an H100, small_m_narrow_n_h100.log; the rule now splits K where N > 2112 and K >=
4096, so at those shapes its pick is one of the candidates and two rows of 64 x 32 tiles, clamped,
are timed as a fifth.)

What it does. At M in {65, 80, 96, 112, 128}, N in {2048, 2560, 3072}, K in {4096, 8192} (fp16; the
80-row shapes in bf16 too): torch, the rule's pick, and four candidates of K split 2-4 (64 x 64 x
128 with K split 2; 128 x 64 x 64 with K split 2, 3 or 4; rows past M zero-filled by TMA), each
checked on a poisoned C against the fp32 reference and timed (do_bench median, L2 flushed), with
its block count. Prediction (to test): at N = 2048 and K = 8192 the 128 x 64 tile with K split 4
(128 blocks, 0.6 MB each) beats the pick by 10-15 % and reaches >= 0.95x torch; at K = 4096 the
reduction's fixed cost (about 3 us) makes it a tie.

    python3 small_m_narrow_n.py            # on the GPU
    python3 small_m_narrow_n.py --shapes   # anywhere: the shapes and the candidates' blocks
"""
import sys, time

from tilelang_tutorial.lessons.gemm import rule

sys.path.insert(0, (__file__.rsplit("/", 1)[0] if "/" in __file__ else ".") + "/../2026-12-05b")
from swap_ab import checked_ms, shape_inputs     # noqa: E402  (the check-then-time of swap_fixed.log)

SHAPES = [(M, N, K, "float16") for M in (65, 80, 96, 112, 128) for N in (2048, 2560, 3072) for K in (4096, 8192)] + [
    (80, N, K, "bfloat16") for N in (2048, 3072) for K in (4096, 8192)]
T = rule.SMALL_M_TILES
CANDIDATES = [("m64n64k128s4/k2", T["m64n64k128s4"], 2), ("m128n64k64s6/k2", T["m128n64k64s6"], 2),
              ("m128n64k64s6/k3", T["m128n64k64s6"], 3), ("m128n64k64s6/k4", T["m128n64k64s6"], 4)]


def choice(name, cfg, split):
    return rule.GemmChoice(name, cfg, split, None, "probe")


if __name__ == "__main__":
    if "--shapes" in sys.argv:
        for s in SHAPES:
            c = rule.choose(*s, "sm_90a")
            print(s, c.label, rule._blocks(s[0], s[1], c.config, c.split), "|",
                  " ".join(f"{n}:{rule._blocks(s[0], s[1], cfg, k)}" for n, cfg, k in CANDIDATES))
        sys.exit(0)
    import torch
    from tilelang_tutorial.lessons.gemm import bench

    t0 = time.time()
    picks = {s: rule.choose(*s) for s in SHAPES}
    jobs = dict(picks)
    jobs.update({(i, N, K, dt): choice(n, cfg, k) for i, (n, cfg, k) in enumerate(CANDIDATES) for (_, N, K, dt) in SHAPES})
    # the pick before the narrow split (two rows of 64 x 32, the second clamped), timed beside it
    jobs.update({(-1, N, K, dt): rule.GemmChoice("m64n32k256s4", T["m64n32k256s4"], 1, None, "probe", last_rows="clamped")
                 for (_, N, K, dt) in SHAPES})
    bench.prebuild_rule(jobs)
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.0f} s", flush=True)
    for s in SHAPES:
        M, N, K, dt = s
        a, b, ref, out, tt = shape_inputs(M, N, K, dt)
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us"
        before = rule.GemmChoice("m64n32k256s4", T["m64n32k256s4"], 1, None, "probe", last_rows="clamped")
        for n, c in ([("pick " + picks[s].label, picks[s])] + [(n, choice(n, cfg, k)) for n, cfg, k in CANDIDATES]
                     + [("m64n32k256s4-clamped", before)]):
            ms, ok = checked_ms(bench.direct_call(c, N, K, dt, a, b, out), out, ref, dt)
            line += f"; {n} {rule._blocks(M, N, c.config, c.split)} blocks {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}"
        print(line, flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"small_m_narrow_n: {time.time() - t0:.0f} s")
