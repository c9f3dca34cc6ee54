"""Lesson 03's mutation targets (``python -m tilelang_tutorial mutants layouts``): the notebook's
transpose kernel, checked as the notebook checks it (exactly, against ``A.T`` in the emulator, on
its non-square ragged shape), and the exercise solutions written as factories, each through its
checker. (The notebook's GEMM kernel cells are read for their layouts, never run: no numeric check
to mutate against.)

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
import torch

from ... import checks
from ...mutants import Target, compare_run, exercise_target
from .programs import transpose_program

#: The notebook's shape: not square, ragged for the 64 x 64 tiles.
TRANSPOSE_SHAPE = (200, 136)


def _check_transpose(factory):
    M, N = TRANSPOSE_SHAPE
    a = checks.random_tensor((M, N), torch.float16, "cpu")
    b = checks.poisoned((N, M), torch.float16, "cpu")
    return compare_run(factory(M, N), [a, b], a.float().T, tolerance=0.0)


def targets():
    from . import exercise_cases

    kernels = [Target("transpose_program", transpose_program, _check_transpose)]
    return kernels + [exercise_target(ex) for ex in exercise_cases() if callable(ex.solution)]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
}
