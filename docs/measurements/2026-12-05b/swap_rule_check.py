"""Out-of-sample check of the swap-or-rule choice that ``swap_model.py`` fitted: on shapes drawn afresh
(past 128 rows, as ``swap_ab_random.py`` draws them), the op's rule against the choice the model
makes between the rule's pick and the swapped kernel, each checked on a poisoned output and timed
against torch in the same run. Written 2026-12-05 without a device left to run it.

    python3 swap_rule_check.py [SEED|fresh] [COUNT] [Rc,BW,c0]

``Rc,BW,c0``: the model's constants for the card it runs on (default: the H100 fit of 2026-12-05,
6.5 TFLOP/s per SM, 6.5 TB/s, 8 us); on an H200 fit them first from its own ``swap_ab_random.py`` logs
(``swap_model.py`` reads every ``swap_ab_random_*.log`` beside it).
"""
import math, random, sys, time

from tilelang_tutorial import checks, runtime, timing
from swap_ab import build_swap, stages_for
from swap_ab_random import draw, threads_for
from swap_model import predict, summary, swap_candidates

H100_FIT = (6.5, 6.5, 8)


def model_choice(M, N, K, dtype, p):
    """(block_N, width) of the swapped tile the model prefers to the rule's pick, or None"""
    from tilelang_tutorial.lessons.gemm import rule

    ch = rule.choose(M, N, K, dtype)
    rule_t = predict(M, N, K, ch.config.block_M, ch.config.block_N, ch.split, p)
    cands = swap_candidates(M, N)
    if not cands:
        return None
    c = min(cands, key=lambda k: predict(M, N, K, k[1], k[0], 1, p))
    return c if predict(M, N, K, c[1], c[0], 1, p) < rule_t else None


def job(j):
    N, K, dt, bn, w = j
    build_swap(N, K, dt, bn, w, 64, stages_for(bn, w), threads_for(bn))


if __name__ == "__main__":
    import torch
    from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench

    t0 = time.time()
    seed = (int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "fresh"
            else random.SystemRandom().randrange(2 ** 31))
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 48
    p = tuple(float(x) for x in sys.argv[3].split(",")) if len(sys.argv) > 3 else H100_FIT
    shapes = draw(seed, count)
    picks = {s: model_choice(*s, p) for s in shapes}
    print(f"seed {seed}, {count} shapes, model {p}: the swapped kernel at {sum(v is not None for v in picks.values())}",
          flush=True)
    jobs = sorted({(N, K, dt, *c) for (M, N, K, dt), c in picks.items() if c})
    got = runtime.precompile(jobs, "swap_rule_check:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in sorted(bad):
        print("compile failed", j, repr(got[j])[:300])
    bench.prebuild_rule({s: rule.choose(*s) for s in shapes})
    print(f"compiled in {time.time() - t0:.0f} s", flush=True)

    def checked_ms(f, out, ref, dt):
        oks = []
        for _ in range(2):
            out.copy_(checks.poisoned(tuple(out.shape), out.dtype, "cuda"))
            f(); torch.cuda.synchronize()
            oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
        ms = timing.median_ms(f)
        return ms, all(oks)

    old, new = [], []
    for M, N, K, dt in shapes:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        ms, ok = checked_ms(lambda: gr.gemm_relu(a, b, out=out), out, ref, dt)
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {ms * 1e3:.1f} us {tt / ms:.2f}x {'ok' if ok else 'WRONG'}"
        t = ms
        c = picks[(M, N, K, dt)]
        if c and (N, K, dt, *c) not in bad:
            k = build_swap(N, K, dt, c[0], c[1], 64, stages_for(*c), threads_for(c[0]))
            sms, sok = checked_ms(lambda: k(a, b, out), out, ref, dt)
            line += f"; model: swap {c[0]}x{c[1]} {sms * 1e3:.1f} us {tt / sms:.2f}x {'ok' if sok else 'WRONG'}"
            t = sms if sok else math.inf
        print(line, flush=True)
        old.append(tt / ms)
        new.append(tt / t)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"\nthe rule:        {summary(old)}\nrule or swapped: {summary(new)}")
    print(f"swap_rule_check: {time.time() - t0:.0f} s")
