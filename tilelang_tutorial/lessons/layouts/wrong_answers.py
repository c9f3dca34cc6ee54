"""Plausible wrong answers to this lesson's exercises (``tests/test_exercises.py``)."""

#: 32x32 fp16 conflict table guessed from notebook 03's 64-wide tile (8-way / 32-way): wrong.
CONFLICT_TABLE_FROM_64_WIDE = [[8, 32], [1, 1]]
#: One element of padding: rows 130 B apart still put rows 0 and 1 in bank 0; 4 is not 16-B aligned.
PADDING_TOO_SMALL = {"column_pad": 1, "ldmatrix_pad": 4}
