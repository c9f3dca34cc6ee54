"""Lesson 01's mutation targets (``python -m tilelang_tutorial mutants tiles``): the kernels of the
notebook's kernel cells, each checked as the notebook checks it (against its reference in the
emulator, on a small ragged shape), and the exercise solutions, each through its checker.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
import torch

from ... import checks, eager
from ...mutants import Target, compare_run, exercise_target
from .row_sum import row_sum_program, row_sum_reference
from .scale_copy import scale_copy_eager, scale_copy_program, scale_copy_reference

#: The notebook's values: alpha = 0.5; a ragged shape with more row tiles (64) than column tiles (128),
#: so swapped grid extents leave tiles unwritten, and one ragged for the 16-row,
#: 256-column row-sum tiles (smaller than the notebook's, for the emulator).
ALPHA = 0.5
SCALE_SHAPE = (200, 136)
ROW_SUM_SHAPE = (100, 1000)


def _check_scale_copy(factory):
    M, N = SCALE_SHAPE
    x = checks.random_tensor((M, N), torch.float16, "cpu")
    y = checks.poisoned((M, N), torch.float16, "cpu")
    return compare_run(factory(N), [x, y], scale_copy_reference(x, ALPHA), tolerance=checks.TOLERANCE["float16"],
                       output=1, scalars=(ALPHA,))


def _check_scale_copy_eager(jit_function):
    M, N = SCALE_SHAPE
    x = checks.random_tensor((M, N), torch.float16, "cpu")
    y = checks.poisoned((M, N), torch.float16, "cpu")
    eager.run(jit_function, x, y, ALPHA)
    cmp = checks.compare(y, scale_copy_reference(x, ALPHA), tolerance=checks.TOLERANCE["float16"])
    return cmp.ok, str(cmp)


def _check_row_sum(factory):
    M, N = ROW_SUM_SHAPE
    x = checks.random_tensor((M, N), torch.float16, "cpu")
    s = checks.poisoned((M,), torch.float32, "cpu")
    return compare_run(factory(N), [x, s], row_sum_reference(x), tolerance=1e-5)


def targets():
    from . import exercise_cases

    kernels = [
        Target("scale_copy_program", scale_copy_program, _check_scale_copy, params={"alpha": ALPHA}),
        Target("scale_copy_eager", scale_copy_eager, _check_scale_copy_eager, params={"alpha": ALPHA}),
        Target("row_sum_program", row_sum_program, _check_row_sum),
    ]
    return kernels + [exercise_target(ex) for ex in exercise_cases() if callable(ex.solution)]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
}
