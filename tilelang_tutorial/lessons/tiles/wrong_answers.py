"""Plausible wrong answers to this lesson's exercises: each is a solution with one mistake typed
into its source (``old -> new``), and the checkers must reject it with a message that names it
(``tests/test_exercises.py``: each :class:`~tilelang_tutorial.lessons.WrongAnswer` carries the
phrase its rejection must contain).
"""
from ...exercise_kit import mutated
from .solutions.row_max import row_max_program
from .scale_copy import scale_copy_program
from .solutions.transpose import transpose_program

_START = '            T.fill(best, -T.infinity("float32"))        # below every value: 0 would beat negative rows\n'
_COMBINE = "best[i] = T.max(best[i], part[i])"
_MASK_FILL = " " * 50 + '-T.infinity("float32"))'  # the masked load's value for columns past N
_MASKED_LOAD = '''                for i, j in T.Parallel(block_M, block_N):
                    # columns past N do not exist: -inf, never the max
                    x_frag[i, j] = T.if_then_else(k * block_N + j < N, X[bx * block_M + i, k * block_N + j],
                                                  -T.infinity("float32"))
'''

#: The last tile loaded with T.copy, as in the row sum: its zero-filled columns win the max of
#: every all-negative row (only when N is not a multiple of the tile).
row_max_unmasked = mutated(row_max_program, (_MASKED_LOAD, "                T.copy(X[bx * block_M, k * block_N], x_frag)\n"))
#: The running max starts at 0 (T.clear): every all-negative row gives 0.
row_max_starts_at_zero = mutated(row_max_program, (_START, "            T.clear(best)\n"))
#: The row sum's ``+=`` kept: the tiles' maxima are added up.
row_max_adds_tile_maxima = mutated(row_max_program, (_START, "            T.clear(best)\n"),
                                   (_COMBINE, "best[i] += part[i]"))
#: Each tile's max replaces the running max: the result is the max of the last tile only.
row_max_keeps_last_tile = mutated(row_max_program, (_COMBINE, "best[i] = part[i]"))
#: The running max is never set before it is read (no T.fill).
row_max_never_started = mutated(row_max_program, (_START, ""))
#: The running max starts at -1, -2 or -1e4: right on rows whose max is above it, wrong on the others.
row_max_starts_at_minus_one = mutated(row_max_program, (_START, "            T.fill(best, -1.0)\n"))
row_max_starts_at_minus_two = mutated(row_max_program, (_START, "            T.fill(best, -2.0)\n"))
row_max_starts_at_minus_1e4 = mutated(row_max_program, (_START, "            T.fill(best, -1e4)\n"))
#: The last tile's missing columns filled with -1e4, not -inf: they win the max of rows below -1e4.
row_max_masked_with_minus_1e4 = mutated(row_max_program, (_MASK_FILL, " " * 50 + "-1e4)"))

#: The notebook's copy-and-scale with alpha typed in as the value its examples once used.
scale_copy_alpha_typed_in = mutated(scale_copy_program, ("x_shared[i, j] * alpha", "x_shared[i, j] * 0.5"))

#: A staged in shared memory, then read down its columns into a fragment that is copied to B: the
#: fragment's layout gives each thread a column of the tile, so B is stored 2 bytes at a time.
transpose_scattered = mutated(transpose_program,
                              ("a_tile = T.alloc_fragment", "a_tile = T.alloc_shared"),
                              ("b_tile = T.alloc_shared", "b_tile = T.alloc_fragment"),
                              ("b_tile[j, i] = a_tile[i, j]", "b_tile[i, j] = a_tile[j, i]"))
#: No on-chip tile at all: each element goes from A to its place in B inside T.Parallel.
transpose_direct = mutated(transpose_program, ('''            a_tile = T.alloc_fragment((block, block), dtype)   # registers
            b_tile = T.alloc_shared((block, block), dtype)     # on chip, visible to the block
            T.copy(A[by * block, bx * block], a_tile)          # rows of A: 16-byte loads
            for i, j in T.Parallel(block, block):
                b_tile[j, i] = a_tile[i, j]                    # the transpose happens on chip
            T.copy(b_tile, B[bx * block, by * block])          # rows of B: 16-byte stores
''', '''            for i, j in T.Parallel(block, block):
                B[bx * block + j, by * block + i] = A[by * block + i, bx * block + j]
'''))
#: The output tile goes to B[by, bx] instead of B[bx, by]: wrong on a non-square A.
transpose_swapped_blocks = mutated(transpose_program, ("B[bx * block, by * block]", "B[by * block, bx * block]"))
#: A grid of N // block x M // block blocks: the last, partial tiles of a ragged A are never moved.
transpose_grid_drops_partial_tiles = mutated(transpose_program, ("T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)",
                                                                 "T.Kernel(N // block, M // block"))
#: Each tile goes to its transposed place in B, but its contents are copied as they are.
transpose_tiles_not_transposed = mutated(transpose_program, ("b_tile[j, i] = a_tile[i, j]", "b_tile[i, j] = a_tile[i, j]"))
