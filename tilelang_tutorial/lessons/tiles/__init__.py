"""Lesson 01: the tile mental model (``notebooks/01_tile_mental_model.ipynb``).

Kernels: :mod:`.scale_copy` (a tiled copy-and-scale, as a factory and in eager mode) and
:mod:`.row_sum` (a row reduction); exercises :mod:`.exercises` (row max, tiled transpose);
benchmark suite ``tile`` and the notebook's figures for the reader's own program (:mod:`.bench`).
"""
from ... import results

NOTEBOOK = "01_tile_mental_model.ipynb"
SUITES = {"tile": "bench:run", "tile_host": "host_bench:run"}


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


def _host_measured(record):
    """What a ``tile_host`` record measured (:func:`.host_bench.measured`)."""
    from . import host_bench

    return host_bench.measured(record)


results.register_suite("tile_host", _host_measured)


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
                     WrongAnswer("zero-filled columns of the last tile win the max", wrong.row_max_unmasked,
                                 "last, partial tile"),
                     WrongAnswer("the running max starts at 0", wrong.row_max_starts_at_zero, "start value is 0"),
                     WrongAnswer("the tiles' maxima added up", wrong.row_max_adds_tile_maxima, "were added"),
                     WrongAnswer("the last tile's max replaces the running max", wrong.row_max_keeps_last_tile,
                                 "replaced the running max"),
                     WrongAnswer("the running max never set", wrong.row_max_never_started, "read before it was set"),
                     WrongAnswer("the running max starts at -1", wrong.row_max_starts_at_minus_one, "start value is -1,"),
                     WrongAnswer("the running max starts at -2", wrong.row_max_starts_at_minus_two, "start value is -2,"),
                     WrongAnswer("the running max starts at -1e4", wrong.row_max_starts_at_minus_1e4,
                                 "start value is -10000,"),
                     WrongAnswer("the last tile's missing columns hold -1e4", wrong.row_max_masked_with_minus_1e4,
                                 "were read as -10000 and won the max"),
                 )),
        Exercise("01 transpose", ex.check_transpose, transpose.transpose_program, starter=todo,
                 wrong_answers=(
                     WrongAnswer("shared tile read down its columns into a fragment", wrong.transpose_scattered,
                                 "hands each thread elements of one column"),
                     WrongAnswer("element by element, no tile", wrong.transpose_direct, "not loaded with 16-byte vectors"),
                     WrongAnswer("swapped tiles", wrong.transpose_swapped_blocks, "never written"),
                     WrongAnswer("a grid of N // block blocks", wrong.transpose_grid_drops_partial_tiles,
                                 "drops the last, partial tile"),
                     WrongAnswer("tiles moved but not transposed", wrong.transpose_tiles_not_transposed,
                                 "not transposed inside"),
                 )),
    ]


def flow_bugs():
    """Bugs a reader could type into this notebook's kernel cells (``tests/test_reader_flow.py``).
    The scale-copy kernels' checks, figure and inspector come before section 7 (the row sum, a
    separate kernel whose own check passes), so their bugs are followed up to there."""
    from .. import FlowBug

    row_sum_section = "## 7. A row reduction"
    return [
        FlowBug(NOTEBOOK, "scale_copy_program", "y_frag[i, j] = x_shared[i, j] * alpha",
                "y_frag[i, j] = x_shared[i, j]", what="scale dropped", until=row_sum_section),
        FlowBug(NOTEBOOK, "scale_copy_program", "T.copy(X[by * block_M, bx * block_N], x_shared)",
                "T.copy(X[bx * block_M, by * block_N], x_shared)", what="block indices swapped",
                until=row_sum_section),
        FlowBug(NOTEBOOK, "scale_copy_eager", "y_frag[i, j] = x_shared[i, j] * alpha",
                "y_frag[i, j] = x_shared[i, j] * alpha * 2", what="eager: scale doubled", until=row_sum_section),
        FlowBug(NOTEBOOK, "row_sum_program", "total[i] += part[i]", "total[i] = part[i]",
                what="row sum keeps only the last tile"),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import bench, exercises, row_sum, scale_copy  # noqa: E402,F401
