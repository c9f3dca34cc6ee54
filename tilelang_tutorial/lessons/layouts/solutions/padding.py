"""Reference answer for notebook 03's padding exercise (64x64 fp16 tile, row-major).

* Column reads (32 threads, one fp16 each, down a column): a pad of 2 elements makes a row
  33 words long, so row i starts in bank i mod 32 -> every row of the phase in its own bank.
  A pad of 1 is not enough: 130-byte rows put rows 0 and 1 in the same bank.
* ldmatrix with 16-byte aligned rows (pad a multiple of 8): a pad of 8 makes rows 36 words long;
  the 8 rows of a phase start 4 banks apart and each reads 4 banks -> conflict-free.
"""

COLUMN_PAD = 2
LDMATRIX_PAD = 8
