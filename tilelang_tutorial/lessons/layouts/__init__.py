"""Lesson 03: layouts — who owns what, where it lives, why swizzles exist
(``notebooks/03_layouts.ipynb``).

Small programs made to look at, and the transpose the reader repairs (:mod:`.programs`), the
picker's kernels (:mod:`.catalogue`), exercises on shared-memory banks (:mod:`.exercises`).
Everything runs without a GPU (the transpose runs in the emulator there).
"""
NOTEBOOK = "03_layouts.ipynb"
SUITES = {}


def compile_cases():
    return []


def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from . import wrong_answers as wrong
    from .solutions import conflict_table, transpose_layout

    return [
        Exercise("03 conflict table", ex.check_conflict_table, conflict_table.CONFLICT_TABLE,
                 starter=[[None, None], [None, None]],
                 wrong_answers=(
                     WrongAnswer("64-wide guess", wrong.CONFLICT_TABLE_FROM_64_WIDE, "fewer conflicts than you predicted"),
                     WrongAnswer("swizzle fixes column reads too", wrong.CONFLICT_TABLE_SWIZZLE_FIXES_ALL,
                                 "the swizzle only permutes 16-byte chunks"),
                 )),
        Exercise("03 conflict-free fp32 transpose", ex.check_transpose_layout, transpose_layout.conflict_free_transpose,
                 starter=ex._starter_transpose,
                 wrong_answers=(
                     WrongAnswer("no padding, no swizzle", wrong.TRANSPOSE_UNCHANGED, "a multiple of 128 B"),
                     WrongAnswer("section 6's fp16 pad of 2 carried over", wrong.TRANSPOSE_FP16_PAD,
                                 "shares the factor 2 with 32"),
                     WrongAnswer("make_swizzled_layout on A_shared", wrong.TRANSPOSE_SWIZZLED, "row % 8"),
                     WrongAnswer("16-byte pad (4 fp32)", wrong.TRANSPOSE_ALIGNED_PAD, "shares the factor 4 with 32"),
                     WrongAnswer("the fp16 kernel", wrong.TRANSPOSE_FP16_KERNEL, "this exercise is the float32 transpose"),
                     WrongAnswer("padding the first dimension", wrong.transpose_padded_rows, "the first dimension"),
                     WrongAnswer("read not transposed", wrong.transpose_untransposed_read, "untransposed"),
                     WrongAnswer("block offsets not swapped", wrong.transpose_blocks_not_swapped, "were never written"),
                     WrongAnswer("a grid of N // block blocks", wrong.transpose_grid_drops_partial_tiles,
                                 "drops the last, partial tile"),
                 )),
    ]


def flow_bugs():
    from .. import FlowBug

    return [
        # the classic transpose slip: the output block keeps A's block coordinates; on the ragged
        # 200 x 136 check, blocks land outside B or on each other
        FlowBug("03_layouts.ipynb", "transpose_program",
                old="T.copy(B_tile, B[bx * block, by * block])", new="T.copy(B_tile, B[by * block, bx * block])",
                what="output block offsets not swapped"),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import catalogue, programs, exercises  # noqa: E402,F401
