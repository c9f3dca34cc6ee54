"""Plausible wrong answers to this lesson's exercises (``tests/test_exercises.py``): answers to
the table, and the transpose with one mistake typed into a solution's or section 6's kernel."""
import functools

from ...exercise_kit import mutated
from .programs import transpose_program
from .solutions.transpose_layout import conflict_free_transpose

#: 32x32 fp16 conflict table guessed from notebook 03's 64-wide tile (8-way / 32-way): wrong.
CONFLICT_TABLE_FROM_64_WIDE = [[8, 32], [1, 1]]
#: the swizzle trusted for column reads too (it removes ldmatrix conflicts, not these)
CONFLICT_TABLE_SWIZZLE_FIXES_ALL = [[4, 16], [1, 1]]

# -- exercise 2: the transpose ---------------------------------------------------------------------

#: the kernel as section 6 gives it, for fp32: 256-byte rows, 32-way
TRANSPOSE_UNCHANGED = functools.partial(transpose_program, dtype="float32")
#: section 6's fp16 answer carried over: two fp32 elements are two words, 66-word rows, 2-way
TRANSPOSE_FP16_PAD = functools.partial(transpose_program, pad=2, dtype="float32")
#: TileLang's XOR swizzle annotated on A_shared: built for ldmatrix's 8 rows, 4-way here
TRANSPOSE_SWIZZLED = functools.partial(transpose_program, swizzle=True, dtype="float32")
#: a 16-byte pad (4 fp32, keeps rows 16-byte aligned): 68-word rows, 4-way
TRANSPOSE_ALIGNED_PAD = functools.partial(transpose_program, pad=4, dtype="float32")
#: the fp16 kernel of section 6, conflict-free, but not the fp32 transpose the exercise asks for
TRANSPOSE_FP16_KERNEL = functools.partial(transpose_program, pad=2)


#: padding on the wrong dimension: one extra row, rows still 256 B apart
transpose_padded_rows = mutated(conflict_free_transpose, ("(block, block + pad)", "(block + pad, block)"))
#: conflict-free padding, but the read forgot to swap the indices
transpose_untransposed_read = mutated(conflict_free_transpose, ("A_shared[j, i]", "A_shared[i, j]"))
#: conflict-free padding, but block (by, bx) of A written to block (by, bx) of B
transpose_blocks_not_swapped = mutated(conflict_free_transpose,
                                       ("B[bx * block, by * block]", "B[by * block, bx * block]"))
#: conflict-free padding, but a grid of N // block x M // block blocks: the partial tiles never moved
transpose_grid_drops_partial_tiles = mutated(conflict_free_transpose,
                                             ("T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)",
                                              "T.Kernel(N // block, M // block"))
#: section 6's kernel with the same grid: its check (both ragged shapes) must reject it too
section6_grid_drops_partial_tiles = mutated(transpose_program, ("T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)",
                                                                "T.Kernel(N // block, M // block"))
