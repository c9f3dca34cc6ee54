"""Lesson 02's mutation targets (``python -m tilelang_tutorial mutants gemm``): notebook 02's GEMM +
ReLU kernel, checked as the notebook checks it (against the fp32 reference in the emulator, on a
ragged shape), and the exercise solutions written as factories, each through its checker.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
import torch

from ... import checks
from ...mutants import Target, compare_run, exercise_target
from .kernel import gemm_relu_program, gemm_relu_reference

#: Ragged in M, N and K for the 128 x 128 x 64 tiles, with more row tiles (3) than column tiles (2)
#: so that swapped grid extents leave tiles unwritten.
GEMM_SHAPE = (300, 136, 200)


def _check_gemm_relu(factory):
    """Notebook 02's check of its kernel cell (every element within fp16 rounding, as its
    ``torch.testing.assert_close`` asks), with the output poisoned, for both ways the kernel can
    store C (straight from registers, and through shared memory)."""
    M, N, K = GEMM_SHAPE
    a = checks.random_tensor((M, K), torch.float16, "cpu")
    b = checks.random_tensor((K, N), torch.float16, "cpu")
    expected = gemm_relu_reference(a, b)
    lines = []
    for store_via_shared in (False, True):
        c = checks.poisoned((M, N), torch.float16, "cpu")
        passed, line = compare_run(factory(M, N, K, store_via_shared=store_via_shared), [a, b, c], expected,
                                   tolerance=checks.TOLERANCE["float16"])
        if passed:
            try:
                torch.testing.assert_close(c.float(), expected, rtol=2e-3, atol=2e-3)
            except AssertionError as err:
                passed, line = False, str(err).splitlines()[0]
        lines.append(f"store_via_shared={store_via_shared}: {line}")
        if not passed:
            return False, "; ".join(lines)
    return True, "; ".join(lines)


def targets():
    from . import exercise_cases

    kernels = [Target("gemm_relu_program", gemm_relu_program, _check_gemm_relu, input_dtype="in_dtype")]
    return kernels + [exercise_target(ex) for ex in exercise_cases() if callable(ex.solution)]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    "gemm_relu_program: mask L24: swizzle_panel > 0 -> swizzle_panel >= 0":
        "the swizzle only reorders which block computes which C tile: every tile's values are the same",
    "gemm_relu_program: constant L24: 0 -> 1":
        "the swizzle only reorders which block computes which C tile: every tile's values are the same",
}
