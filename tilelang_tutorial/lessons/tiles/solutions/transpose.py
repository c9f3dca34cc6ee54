"""Solution to notebook 01's second exercise: a tiled transpose ``B = A^T`` through shared memory.

Why shared memory: a thread that reads a 16-byte vector along a row of A would write 8 elements
that lie 8 *rows* apart in B (the write is scattered), and vice versa. Staging the tile in shared
memory lets both sides be row-contiguous: the copy in reads rows of A, the copy out writes rows of
B, and only the on-chip read in between goes "down a column".
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def transpose_program(M: int, N: int, dtype: str = "float16", block: int = 64, threads: int = 128):
    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        # bx walks the columns of A (= rows of B), by walks the rows of A.
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            a_tile = T.alloc_fragment((block, block), dtype)   # registers
            b_tile = T.alloc_shared((block, block), dtype)     # on chip, visible to the block
            T.copy(A[by * block, bx * block], a_tile)          # rows of A: 16-byte loads
            for i, j in T.Parallel(block, block):
                b_tile[j, i] = a_tile[i, j]                    # the transpose happens on chip
            T.copy(b_tile, B[bx * block, by * block])          # rows of B: 16-byte stores

    return transpose
