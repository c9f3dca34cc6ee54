"""Lesson 01's mutation targets (``python -m tilelang_tutorial mutants tiles``): the kernels of the
notebook's kernel cells, each through the check the notebook runs on it (:mod:`.exercises`'
``check_scale_copy`` and ``check_row_sum``: against the reference in the emulator, on ragged
shapes), and the exercise solutions, each through its checker.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
from ...mutants import Target, exercise_target, result_check
from .exercises import check_row_sum, check_scale_copy
from .row_sum import row_sum_program
from .scale_copy import scale_copy_eager, scale_copy_program

#: The value a reader might type in for the scale: the one notebook 01's first run passes.
TYPED_ALPHA = 0.5


def targets():
    from . import exercise_cases

    kernels = [
        Target("scale_copy_program", scale_copy_program, result_check(check_scale_copy),
               params={"alpha": TYPED_ALPHA}),
        Target("scale_copy_eager", scale_copy_eager, result_check(check_scale_copy), params={"alpha": TYPED_ALPHA}),
        Target("row_sum_program", row_sum_program, result_check(check_row_sum)),
    ]
    return kernels + [exercise_target(ex) for ex in exercise_cases() if callable(ex.solution)]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    'row_sum_program: narrow L9: "float32" -> dtype':
        "the tile holds the fp16 inputs exactly in either dtype; T.reduce_sum accumulates in part's fp32",
    '01 row max: narrow L7: "float32" -> dtype':
        "a max only selects: fp16 holds every input and -inf exactly, so the fp16 tile gives the same max",
    '01 row max: narrow L8: "float32" -> dtype':
        "a max only selects: each tile's max is one of the fp16 inputs (or -inf), exact in fp16",
    '01 row max: narrow L9: "float32" -> dtype':
        "a max only selects: the running max is one of the fp16 inputs (or -inf), exact in fp16 and in Out's fp32",
}
