"""Lesson 03's mutation targets (``python -m tilelang_tutorial mutants layouts``): the notebook's
transpose kernel, checked as the notebook checks it (by the same function, exactly, against ``A.T``
in the emulator, on both of :data:`tilelang_tutorial.checks.RAGGED_SHAPES`), and the exercise
solutions written as factories, each through its checker. (The notebook's GEMM kernel cells are
read for their layouts, never run: no numeric check to mutate against.)

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
from ...mutants import Target, exercise_target, result_check
from .exercises import check_transpose
from .programs import transpose_program


def targets():
    from . import exercise_cases

    kernels = [Target("transpose_program", transpose_program, result_check(check_transpose))]
    return kernels + [exercise_target(ex) for ex in exercise_cases()]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
}
