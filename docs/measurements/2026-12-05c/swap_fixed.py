"""The rule with the swapped kernel at the fixed shapes where it changes what the op runs: shapes the
tests name (the sweeps' winners of 2026-12-01/02, timed before the swapped kernel existed) and the two
gemm_rule records of the last run whose pick changes. At each: torch, the op through the rule (the
swapped kernel) and the rule's pick without the swap (``rule.measured_choice(..., swap=False)``),
each checked on a poisoned output before and after timing (``timing.median_ms``: do_bench medians,
L2 flushed), all in the same run.

    python3 swap_fixed.py     # on the GPU
"""
import sys, time

sys.path.insert(0, (__file__.rsplit("/", 1)[0] if "/" in __file__ else ".") + "/../2026-12-05b")
# check twice on a poisoned output, time, check once more (it ran with a copy of this, the same code)
from swap_ab import checked_ms, shape_inputs  # noqa: E402

SHAPES = [(183, 1248, 5024, "float16"), (279, 1304, 3000, "float16"), (300, 4096, 4096, "float16"),
          (650, 3744, 8056, "float16"), (593, 3200, 6176, "bfloat16"), (781, 1464, 4144, "bfloat16"),
          (275, 7176, 6528, "float16"), (228, 2336, 5672, "float16")]


def direct(choice, N, K, dt, a, b, out):
    """the choice's kernel(s), called directly"""
    import torch
    from tilelang_tutorial.lessons.gemm import kernel as gr

    ks = gr.build_for(N, K, choice.config, choice.split, dt, choice.last_rows, choice.a_rows)
    if choice.split == 1:
        return lambda: ks[0](a, b, out)
    ws = torch.empty((choice.split, a.shape[0], N), dtype=torch.float32, device="cuda")
    return lambda: (ks[0](a, b, ws), ks[1](ws, out))


if __name__ == "__main__":
    import torch
    from tilelang_tutorial.lessons.gemm import bench, kernel as gr, rule

    t0 = time.time()
    picks = {s: rule.choose(*s) for s in SHAPES}
    plain = {s: rule.measured_choice(*s, swap=False) for s in SHAPES}
    bench.prebuild_rule(picks)
    bench.prebuild_rule(plain)
    print(f"{torch.cuda.get_device_name(0)}; compiled in {time.time() - t0:.0f} s", flush=True)
    for s in SHAPES:
        M, N, K, dt = s
        a, b, ref, out, tt = shape_inputs(M, N, K, dt)
        op, ok_op = checked_ms(lambda: gr.gemm_relu(a, b, out=out), out, ref, dt)
        un, ok_un = checked_ms(direct(plain[s], N, K, dt, a, b, out), out, ref, dt)
        print(f"{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; the rule {picks[s].label} {op * 1e3:.1f} us "
              f"{tt / op:.2f}x {ok_op}; without the swap {plain[s].label} {un * 1e3:.1f} us {tt / un:.2f}x {ok_un}",
              flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"swap_fixed: {time.time() - t0:.0f} s")
