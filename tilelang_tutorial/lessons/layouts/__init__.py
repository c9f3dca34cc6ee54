"""Lesson 03: layouts — who owns what, where it lives, why swizzles exist
(``notebooks/03_layouts.ipynb``).

Small programs made to look at (:mod:`.programs`), the picker's kernels (:mod:`.catalogue`),
exercises on shared-memory banks (:mod:`.exercises`). Everything runs without a GPU.
"""
NOTEBOOK = "03_layouts.ipynb"
SUITES = {}


def compile_cases():
    return []


def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from . import wrong_answers as wrong
    from .solutions import conflict_table, padding

    def check_padding(answer, **kw):
        return ex.check_padding(*answer, **kw) if isinstance(answer, tuple) else ex.check_padding(**answer, **kw)

    return [
        Exercise("03 conflict table", ex.check_conflict_table, conflict_table.CONFLICT_TABLE,
                 starter=[[None, None], [None, None]],
                 wrong_answers=(WrongAnswer("64-wide guess", wrong.CONFLICT_TABLE_FROM_64_WIDE, "must deliver"),)),
        Exercise("03 padding", check_padding, (padding.COLUMN_PAD, padding.LDMATRIX_PAD), starter=(None, None),
                 wrong_answers=(WrongAnswer("too small", wrong.PADDING_TOO_SMALL, "16-byte aligned"),)),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import catalogue, programs, exercises  # noqa: E402,F401
