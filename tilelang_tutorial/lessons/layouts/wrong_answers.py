"""Plausible wrong answers to this lesson's exercises (``tests/test_exercises.py``)."""
import functools

import tilelang.language as T

from .programs import transpose_program

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


def transpose_padded_rows(M, N, block=64, threads=128, dtype="float32"):
    """Padding on the wrong dimension: two extra rows, rows still 256 B apart."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block + 2, block), dtype)
            B_tile = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], A_shared[0:block, 0:block])
            for i, j in T.Parallel(block, block):
                B_tile[i, j] = A_shared[j, i]
            T.copy(B_tile, B[bx * block, by * block])

    return transpose


def transpose_untransposed_read(M, N, block=64, threads=128, dtype="float32"):
    """Conflict-free padding, but the read forgot to swap the indices."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block, block + 1), dtype)
            B_tile = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], A_shared[0:block, 0:block])
            for i, j in T.Parallel(block, block):
                B_tile[i, j] = A_shared[i, j]
            T.copy(B_tile, B[bx * block, by * block])

    return transpose


def transpose_blocks_not_swapped(M, N, block=64, threads=128, dtype="float32"):
    """Conflict-free padding, but block (by, bx) of A written to block (by, bx) of B."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block, block + 1), dtype)
            B_tile = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], A_shared[0:block, 0:block])
            for i, j in T.Parallel(block, block):
                B_tile[i, j] = A_shared[j, i]
            T.copy(B_tile, B[by * block, bx * block])

    return transpose
