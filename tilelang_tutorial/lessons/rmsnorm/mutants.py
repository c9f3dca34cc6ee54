"""Lesson 05's mutation targets (``python -m tilelang_tutorial mutants rmsnorm``): the kernels of
notebooks 05 and 05b, each through the check the notebooks run on it (:func:`.exercises.check_rmsnorm_silu`:
ordinary rows, rows whose squares overflow fp16 and rows at and near zero, eps drawn at random,
the output poisoned, against the fp32 reference in the emulator) at the cases the notebooks check,
and the exercise solutions written as factories, each through its checker.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
from ... import runtime
from ...mutants import Target, exercise_target, verdict
from .exercises import check_rmsnorm_silu
from .kernel import DEFAULT_EPS, RMSNormSiLUConfig, naive_rmsnorm_silu_program, rmsnorm_silu_program
from .two_pass import two_pass_rmsnorm_silu_program
from .warp_segments import WarpSegmentConfig, warp_segment_rmsnorm_silu_program

#: (C, dtype, the factory's further arguments, rows) each kernel is checked at, as the notebooks
#: check it: 05's naive kernel at the width where inference fails; 05's annotated kernel at an
#: unpadded width in each precision, at the padded C = 800, and with exercise 1's answer (a
#: configuration without the fast sigmoid, as its checker builds it); 05b's two-pass kernel at a
#: width of several chunks, and its warp segments on their smallest case.
CASES = {
    "naive_rmsnorm_silu_program": [(96, "float16", (), 333)],
    "rmsnorm_silu_program": [(96, "float16", (), 333), (640, "bfloat16", (), 333), (800, "float16", (), 333),
                             (640, "float16", (RMSNormSiLUConfig(group=16, threads=256),), 333)],
    "two_pass_rmsnorm_silu_program": [(640, "float16", (), 333)],
    "warp_segment_rmsnorm_silu_program": [(3136, "float16", (WarpSegmentConfig(warps=3, rows_per_block=2, min_blocks=6),), 37)],
}


def kernel_check(cases):
    """The notebooks' check of a kernel factory at each of ``cases``: (passed, the first failure)."""
    def check(factory):
        detail = ""
        for C, dtype, extra, rows in cases:
            kernel = runtime.compile_kernel(factory(C, dtype, *extra))
            passed, detail = verdict(check_rmsnorm_silu(kernel, C, dtype, rows=rows, verbose=False))
            if not passed:
                return False, detail
        return True, detail

    return check


def targets():
    from . import exercise_cases

    eps = {"eps": DEFAULT_EPS}
    factories = (naive_rmsnorm_silu_program, rmsnorm_silu_program, two_pass_rmsnorm_silu_program,
                 warp_segment_rmsnorm_silu_program)
    kernels = [Target(f.__name__, f, kernel_check(CASES[f.__name__]), params=eps) for f in factories]
    return kernels + [exercise_target(ex, params=eps) for ex in exercise_cases()]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    "05 config: off_by_one L0: .rows_per_thread -> .rows_per_thread = 2":
        "a right answer too: the exercise asks for group and threads (graded by the rule); two rows a thread "
        "group only makes the block's tile taller, and the checker ran it against the reference",
    "05 config: flip L0: .fast_sigmoid -> .fast_sigmoid = True":
        "a right answer too: the exercise asks for group and threads; the fast sigmoid is a knob it leaves "
        "free, and the checker ran the kernel against the reference",
    "05 config: off_by_one L0: .min_blocks -> .min_blocks = 1":
        "a right answer too: the exercise asks for group and threads; min_blocks = 1 asks the compiler for "
        "the one block per SM every launch has anyway",
    "warp_segment_rmsnorm_silu_program: mask L34: w * L + j < C -> w * L + j <= C":
        "TileLang still guards the load of X by column < C (the generated CUDA keeps it, element by element now): "
        "column C is never read",
    "warp_segment_rmsnorm_silu_program: mask L34: bx * block_m + i < m -> bx * block_m + i <= m":
        "TileLang still guards the load of X by row < m (the generated CUDA keeps it beside the mutant's <= m)",
    "warp_segment_rmsnorm_silu_program: mask L50: w * L + j < C -> w * L + j <= C":
        "TileLang still guards the store of Y by column < C (the generated CUDA keeps it): column C is never written",
    "warp_segment_rmsnorm_silu_program: mask L50: bx * block_m + i < m -> bx * block_m + i <= m":
        "TileLang still guards the store of Y by row < m (the generated CUDA keeps it): row m is never written",
}
