"""Where does the swapped GEMM (``swap_ab.py``) beat the op's rule? Random shapes past 128 rows.

``swap_ab.py`` measured it at twelve fixed shapes (H100, 2026-12-05): ahead of the rule at six
(275 x 7176 x 6528 0.70x -> 0.88x torch, 781 x 1464 x 4144 1.05x -> 1.27x), behind at four, and
every candidate of more than one wave far behind. A rule fitted to twelve shapes would be fitted to
them; this probe draws shapes (M 129..1536 log-uniform, N and K 1024..8192 in steps of 8, fp16 or
bf16) and times, at each, the rule's pick and the swapped kernel on every tile that fits one wave
(128 or 64 columns of N per block, M split into 1-6 equal tiles 32-256 wide), so that a rule can be
read off shapes it was not tuned on and then checked on others drawn afresh.

    python3 swap_ab_random.py [SEED|fresh] [COUNT]
"""
import math, random, sys, time

from tilelang_tutorial import checks, runtime, timing
from swap_ab import build_swap, checked_ms, stages_for

SM_COUNT = 132


def swap_candidates(M, N, max_count=5):
    """(block_N, width, blocks): one wave, M split into equal tiles 32..256 wide (multiples of 16);
    the candidates with the most blocks first (max_count None: all of them)"""
    out = set()
    for bn in (128, 64):
        for parts in range(1, 9):
            w = -(-(-(-M // parts)) // 16) * 16
            if not 32 <= w <= 256:
                continue
            blocks = -(-M // w) * -(-N // bn)          # the grid: the tiles M needs at this width
            if 24 <= blocks <= SM_COUNT:
                out.add((bn, w, blocks))
    return sorted(out, key=lambda c: -c[2])[:max_count]


def draw(seed, count):
    rng = random.Random(seed)
    shapes = []
    for _ in range(count):
        M = int(round(math.exp(rng.uniform(math.log(129), math.log(1536)))))
        N = rng.randrange(1024, 8193, 8)
        K = rng.randrange(1024, 8193, 8)
        shapes.append((M, N, K, rng.choice(("float16", "bfloat16"))))
    return shapes


def threads_for(bn):
    return 256 if bn == 128 else 128


def seed_and_count(args, default_count):
    """``[SEED|fresh] [COUNT]`` from the command line: a fresh seed unless one is given"""
    seed = (int(args[0]) if args and args[0] != "fresh" else random.SystemRandom().randrange(2 ** 31))
    return seed, int(args[1]) if len(args) > 1 else default_count


def job(j):
    N, K, dt, bn, w = j
    build_swap(N, K, dt, bn, w, 64, stages_for(bn, w), threads_for(bn))


if __name__ == "__main__":
    import torch
    from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench

    t0 = time.time()
    seed, count = seed_and_count(sys.argv[1:], 36)
    shapes = draw(seed, count)
    print(f"seed {seed}, {count} shapes", flush=True)
    jobs = sorted({(N, K, dt, bn, w) for M, N, K, dt in shapes for bn, w, _ in swap_candidates(M, N)})
    got = runtime.precompile(jobs, "swap_ab_random:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in sorted(bad):
        print("compile failed", j, repr(got[j])[:300])
    choices = {s: rule.choose(*s) for s in shapes}
    bench.prebuild_rule(choices)
    print(f"compiled {len(jobs)} swapped kernels and the rule's picks in {time.time() - t0:.0f} s", flush=True)

    rows = []
    for M, N, K, dt in shapes:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        ch = choices[(M, N, K, dt)]
        ms, ok = checked_ms(lambda: gr.gemm_relu(a, b, out=out), out, ref, dt)
        c = ch.config
        rblocks = math.ceil(M / c.block_M) * math.ceil(N / c.block_N) * ch.split
        print(f"\n{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {ch.label} {rblocks} blocks "
              f"{ms * 1e3:.1f} us {tt / ms:.2f}x {ok}", flush=True)
        best = None
        for bn, w, blocks in swap_candidates(M, N):
            if (N, K, dt, bn, w) in bad:
                continue
            k = build_swap(N, K, dt, bn, w, 64, stages_for(bn, w), threads_for(bn))
            sms, sok = checked_ms(lambda: k(a, b, out), out, ref, dt)
            print(f"   swap {bn}x{w} s{stages_for(bn, w)} {blocks:>4} blocks {sms * 1e3:7.1f} us {tt / sms:5.2f}x {sok}",
                  flush=True)
            if sok == "ok" and (best is None or sms < best[0]):
                best = (sms, bn, w, blocks)
        rows.append((M, N, K, dt, tt, ms, ch.label, rblocks, best))
        del a, b, out, ref
        torch.cuda.empty_cache()

    print("\nM N K dtype | torch us | rule x, blocks | best swap x (tile, blocks) | swap / rule time")
    for M, N, K, dt, tt, ms, label, rblocks, best in rows:
        s = (f"{best[0] * 1e3:.1f} us {tt / best[0]:.2f}x ({best[1]}x{best[2]}, {best[3]})" if best else "-")
        print(f"{M} {N} {K} {dt} | {tt * 1e3:.1f} | {tt / ms:.2f}x, {rblocks} | {s} | "
              f"{(best[0] / ms if best else float('nan')):.2f}")
    print(f"swap_ab_random: {time.time() - t0:.0f} s")
