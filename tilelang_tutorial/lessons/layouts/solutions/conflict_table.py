"""Reference answer for notebook 03's first exercise: the conflict table of a 32x32 fp16 tile.

A row is 64 bytes = 16 banks, so rows i and i + 2 start in the same bank.

* row-major, ldmatrix (8 rows x 16 B): rows 0, 2, 4, 6 share banks -> 4-way.
* row-major, column reads (32 rows, one fp16 each): the 16 even rows share one bank -> 16-way
  (two fp16 of a row share a word, which is why it is not 32).
* swizzled, ldmatrix: the 16-byte chunks of each 8-row group are permuted so the 8 rows of a
  phase hit 8 different chunks -> conflict-free.
* swizzled, column reads: the swizzle repeats every 8 rows (of 128-byte lines), so rows i, i + 8,
  i + 16, i + 24 still meet in one bank -> 4-way.
"""

CONFLICT_TABLE = [
    # ldmatrix 8x8, column reads
    [4, 16],   # row-major
    [1, 4],    # swizzled
]
