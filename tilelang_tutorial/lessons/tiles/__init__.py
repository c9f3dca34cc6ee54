"""Lesson 01: the tile mental model (``notebooks/01_tile_mental_model.ipynb``).

Kernels: :mod:`.scale_copy` (a tiled copy-and-scale) and :mod:`.row_sum` (a row reduction);
exercises :mod:`.exercises` (row max, tiled transpose); benchmark suite ``tile`` (:mod:`.bench`).
"""
from ... import results

NOTEBOOK = "01_tile_mental_model.ipynb"
SUITES = {"tile": "bench:run"}


def measured(record):
    """What a ``tile`` record measured: the program its configuration builds."""
    from .row_sum import row_sum_program
    from .scale_copy import scale_copy_program

    from . import row_sum, scale_copy

    factory = {"scale_copy": scale_copy_program, "row_sum": row_sum_program}[record["kernel"]]
    program = factory(record["shape"]["N"], dtype=record["dtype"], **record["config"])
    # records of the op (the call a user makes) also measured its Python code
    op = {"scale_copy": scale_copy.scale_copy, "row_sum": row_sum.row_sum}[record["kernel"]]
    return [program, op] if record.get("call") else [program]


results.register_suite("tile", measured)


def compile_cases():
    from .. import PORTABLE, CompileCase
    from .row_sum import build_row_sum
    from .scale_copy import build_scale_copy

    return [CompileCase("scale_copy", PORTABLE, lambda arch: build_scale_copy(4096, dtype="float16", arch=arch)),
            CompileCase("row_sum", PORTABLE, lambda arch: build_row_sum(4096, dtype="float16", arch=arch))]


def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from . import wrong_answers as wrong
    from .row_sum import row_sum_program
    from .solutions import row_max, transpose

    def todo(*args):
        raise NotImplementedError

    return [
        Exercise("01 row max", ex.check_row_max, row_max.row_max_program, starter=lambda N, dtype: None,
                 wrong_answers=(
                     WrongAnswer("a row sum", lambda N, dtype: row_sum_program(N, dtype=dtype), "T.reduce_max"),
                     WrongAnswer("zero-filled columns win the max", wrong.row_max_unmasked, "-inf"),
                 )),
        Exercise("01 transpose", ex.check_transpose, transpose.transpose_program, starter=todo,
                 wrong_answers=(
                     WrongAnswer("scattered stores", wrong.transpose_scattered, "one element at a time"),
                     WrongAnswer("swapped tiles", wrong.transpose_swapped_blocks, "never written"),
                 )),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import row_sum, scale_copy, exercises  # noqa: E402,F401
