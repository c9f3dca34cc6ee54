"""Lesson 05's mutation targets (``python -m tilelang_tutorial mutants rmsnorm``): the kernels of
notebooks 05 and 05b, each checked as the notebooks check it (``run_and_check``: fresh random rows,
the output poisoned, against the fp32 reference in the emulator with the dtype's tolerance, at the
default eps), and the exercise solutions written as factories, each through its checker.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
import torch

from ... import checks
from ...mutants import Target, compare_run, exercise_target
from .kernel import DEFAULT_EPS, naive_rmsnorm_silu_program, rmsnorm_silu_program, rmsnorm_silu_reference
from .two_pass import two_pass_rmsnorm_silu_program
from .warp_segments import WarpSegmentConfig, warp_segment_rmsnorm_silu_program

#: Rows not a multiple of any row block; C = 96 (a partial row group) for the one-pass kernels.
ROWS = 37
C_NARROW = 96
#: The two-pass kernel at a width with several chunks; the warp-segment kernel on notebook 05b's
#: smallest case.
C_TWO_PASS = 640
SEGMENT_CASE = (3136, "float16", WarpSegmentConfig(warps=3, rows_per_block=2, min_blocks=6))


def run_and_check(program, C, dtype="float16", rows=ROWS, eps=DEFAULT_EPS):
    """The notebooks' ``run_and_check``: kernel(X, Gamma, Y, eps) against the reference."""
    torch_dtype = getattr(torch, dtype)
    x = checks.random_tensor((rows, C), torch_dtype, "cpu")
    gamma = checks.random_tensor((C,), torch_dtype, "cpu")
    y = checks.poisoned((rows, C), torch_dtype, "cpu")
    return compare_run(program, [x, gamma, y], rmsnorm_silu_reference(x, gamma, eps),
                       tolerance=checks.TOLERANCE[dtype], output=2, scalars=(eps,))


def targets():
    from . import exercise_cases

    eps = {"eps": DEFAULT_EPS}
    kernels = [
        Target("naive_rmsnorm_silu_program", naive_rmsnorm_silu_program,
               lambda f: run_and_check(f(C_NARROW), C_NARROW), params=eps),
        Target("rmsnorm_silu_program", rmsnorm_silu_program, lambda f: run_and_check(f(C_NARROW), C_NARROW),
               params=eps),
        Target("two_pass_rmsnorm_silu_program", two_pass_rmsnorm_silu_program,
               lambda f: run_and_check(f(C_TWO_PASS), C_TWO_PASS), params=eps),
        Target("warp_segment_rmsnorm_silu_program", warp_segment_rmsnorm_silu_program,
               lambda f: run_and_check(f(*SEGMENT_CASE), SEGMENT_CASE[0], SEGMENT_CASE[1]), params=eps),
    ]
    return kernels + [exercise_target(ex, params=eps) for ex in exercise_cases() if callable(ex.solution)]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
}
