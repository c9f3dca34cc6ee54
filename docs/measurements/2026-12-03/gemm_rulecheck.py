"""The few-block rule of 2026-12-03 against the one before it, at shapes where their picks differ
(three of each kind of change, drawn from 20,000 random shapes of gemm_rule's distribution):
the old pick (FEW_BLOCK_TILES without the tuned tile, no gain margin) and the new, each through
the op's kernels, against torch relu(a @ b); do_bench medians with the L2 flushed, every output
checked on a poisoned buffer.

    python3 gemm_rulecheck.py
"""
import math, sys, time
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench, split_k

SHAPES = [(781, 1464, 4144, "bfloat16"),
          (272, 3464, 6208, "float16"), (231, 5528, 6864, "bfloat16"), (225, 4680, 6848, "float16"),
          (297, 1928, 7176, "bfloat16"), (448, 1512, 7792, "float16"), (515, 1352, 6592, "float16"),
          (153, 3336, 6432, "bfloat16"), (188, 3696, 6504, "bfloat16"), (139, 3848, 4424, "bfloat16")]


def picks(M, N, K, dt):
    new = rule.choose(M, N, K, dt)
    keep = rule.FEW_BLOCK_TILES, rule.FEW_BLOCKS_GAIN
    rule.FEW_BLOCK_TILES, rule.FEW_BLOCKS_GAIN = ("m128n128k128t256", "narrow"), 0.0
    try:
        old = rule.choose(M, N, K, dt)
    finally:
        rule.FEW_BLOCK_TILES, rule.FEW_BLOCKS_GAIN = keep
    return old, new


def job(j):
    N, K, cfg, s, dt = j
    gr.build_for(N, K, cfg, s, dt)


def runner(a, b, out, cfg, s):
    N, K = b.shape[1], b.shape[0]
    dt = str(a.dtype).replace("torch.", "")
    if s == 1:
        k = gr.build_gemm_relu(N, K, config=cfg, dtype=dt)
        return lambda: k(a, b, out)
    return lambda: split_k.gemm_relu_split_k(a, b, s, cfg, out)


if __name__ == "__main__":
    t0 = time.time()
    chosen = {s: picks(*s) for s in SHAPES}
    jobs = [(N, K, c.config, c.split, dt) for (M, N, K, dt), p in chosen.items() for c in p]
    got = runtime.precompile(jobs, "gemm_rulecheck:job")
    print(f"precompiled {sum(e is None for e in got.values())} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    for (M, N, K, dt), (old, new) in chosen.items():
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        line = f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us"
        for tag, c in (("old", old), ("new", new)):
            out = checks.poisoned((M, N), a.dtype, "cuda")
            f = runner(a, b, out, c.config, c.split); f(); torch.cuda.synchronize()
            ok = checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok
            ms = timing.median_ms(f)
            blocks = math.ceil(M / c.config.block_M) * math.ceil(N / c.config.block_N) * c.split
            line += f"; {tag} {c.label} ({blocks} blocks) {ms * 1e3:.1f} us {tt / ms:.2f}x {'ok' if ok else 'WRONG'}"
        print(line, flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"gemm_rulecheck: {time.time() - t0:.0f} s")
