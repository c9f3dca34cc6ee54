"""Out-of-sample check of the choices that ``swap_model.py``'s model makes, on shapes drawn afresh
(past 128 rows, as ``swap_ab_random.py`` draws them), each checked on a poisoned output and timed
against torch in the same run:

* the op's rule;
* "rule or swapped": the model's choice between the rule's pick and the cheapest swapped tile;
* "model over all": the model's cheapest of every tile the rule weighs past 128 rows (its
  ``LARGE_M_TILES``, unsplit) and every swapped tile: a rule that is the model alone.

Written 2026-12-05 without a device left to run it.

    python3 swap_rule_check.py [SEED|fresh] [COUNT] [Rc,BW,c0]

``Rc,BW,c0``: the model's constants for the card it runs on (default: the H100 fit of 2026-12-05,
6.5 TFLOP/s per SM, 6.5 TB/s, 8 us); on an H200 fit them first from its own ``swap_ab_random.py`` logs
(``swap_model.py`` reads every ``swap_ab_random_*.log`` beside it).
"""
import math, sys, time

from tilelang_tutorial import checks, runtime, timing
from swap_ab import build_swap, checked_ms, stages_for
from swap_ab_random import draw, seed_and_count, threads_for
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


def tile_config(name, dtype):
    """the config of one of the rule's tiles past 128 rows (``rule.LARGE_M_TILES``; "tuned" per dtype)"""
    from tilelang_tutorial.lessons.gemm import rule
    from tilelang_tutorial.lessons.gemm.configs import TUNED_CONFIGS

    return dict((n, c) for n, c, _ in rule.LARGE_M_TILES)[name] or TUNED_CONFIGS[dtype]


def model_over_all(M, N, K, dtype, p):
    """("swap", (block_N, width)) or ("tile", name): the model's cheapest of the rule's tiles past 128
    rows and the swapped tiles"""
    from tilelang_tutorial.lessons.gemm import rule

    options = []
    for name, _, _ in rule.LARGE_M_TILES:
        c = tile_config(name, dtype)
        options.append((predict(M, N, K, c.block_M, c.block_N, 1, p), ("tile", name)))
    options += [(predict(M, N, K, w, bn, 1, p), ("swap", (bn, w))) for bn, w in swap_candidates(M, N)]
    return min(options)[1]


def job(j):
    if j[0] == "tile":
        _, N, K, dt, name = j
        from tilelang_tutorial.lessons.gemm import kernel as gr

        gr.build_gemm_relu(N, K, config=tile_config(name, dt), dtype=dt)
        return
    N, K, dt, bn, w = j
    build_swap(N, K, dt, bn, w, 64, stages_for(bn, w), threads_for(bn))


if __name__ == "__main__":
    import torch
    from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench

    t0 = time.time()
    seed, count = seed_and_count(sys.argv[1:3], 48)
    p = tuple(float(x) for x in sys.argv[3].split(",")) if len(sys.argv) > 3 else H100_FIT
    shapes = draw(seed, count)
    picks = {s: model_choice(*s, p) for s in shapes}
    alls = {s: model_over_all(*s, p) for s in shapes}
    print(f"seed {seed}, {count} shapes, model {p}: rule or swapped takes the swapped kernel at "
          f"{sum(v is not None for v in picks.values())}, the model over all at "
          f"{sum(v[0] == 'swap' for v in alls.values())}", flush=True)
    jobs = sorted({(N, K, dt, *c) for (M, N, K, dt), c in picks.items() if c}
                  | {(N, K, dt, *v[1]) for (M, N, K, dt), v in alls.items() if v[0] == "swap"})
    jobs += sorted({("tile", N, K, dt, v[1]) for (M, N, K, dt), v in alls.items() if v[0] == "tile"})
    got = runtime.precompile(jobs, "swap_rule_check:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in sorted(bad):
        print("compile failed", j, repr(got[j])[:300])
    bench.prebuild_rule({s: rule.choose(*s) for s in shapes})
    print(f"compiled in {time.time() - t0:.0f} s", flush=True)

    def swap_ms(N, K, dt, c, a, b, out, ref):
        if (N, K, dt, *c) in bad:
            return math.inf, "not built"
        k = build_swap(N, K, dt, c[0], c[1], 64, stages_for(*c), threads_for(c[0]))
        ms, ok = checked_ms(lambda: k(a, b, out), out, ref, dt)
        return (ms if ok == "ok" else math.inf), ok

    old, new, model_all = [], [], []
    for M, N, K, dt in shapes:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        ms, ok = checked_ms(lambda: gr.gemm_relu(a, b, out=out), out, ref, dt)
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {ms * 1e3:.1f} us {tt / ms:.2f}x {ok}"
        t = ms
        c = picks[(M, N, K, dt)]
        if c:
            t, how = swap_ms(N, K, dt, c, a, b, out, ref)
            line += f"; rule or swapped: swap {c[0]}x{c[1]} {t * 1e3:.1f} us {tt / t:.2f}x {how}"
        kind, what = alls[(M, N, K, dt)]
        if kind == "swap":
            t_all, how = (t, "the same") if what == c else swap_ms(N, K, dt, what, a, b, out, ref)
            line += f"; model over all: swap {what[0]}x{what[1]} {t_all * 1e3:.1f} us {tt / t_all:.2f}x {how}"
        else:
            cfg = tile_config(what, dt)
            t_all, ok_all = checked_ms(lambda: gr.gemm_relu(a, b, cfg, out=out), out, ref, dt)
            t_all = t_all if ok_all == "ok" else math.inf
            line += f"; model over all: {what} {t_all * 1e3:.1f} us {tt / t_all:.2f}x {ok_all}"
        print(line, flush=True)
        old.append(tt / ms)
        new.append(tt / t)
        model_all.append(tt / t_all)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"\nthe rule:        {summary(old)}\nrule or swapped: {summary(new)}\nmodel over all:  {summary(model_all)}")
    print(f"swap_rule_check: {time.time() - t0:.0f} s")
