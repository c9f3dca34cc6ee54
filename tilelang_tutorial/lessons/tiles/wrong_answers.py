"""Plausible wrong answers to this lesson's exercises: each is a mistake a reader could make, and
the checkers must reject it with a message that helps (``tests/test_exercises.py``). Test
fixtures, not solutions; kernels are defined in a file because ``T.prim_func`` needs source.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def row_max_unmasked(N, dtype, block_M=64, block_N=256):
    """Row max without masking the ragged last tile: zero-filled columns win on negative rows (GPU)."""
    M = T.dynamic("M")

    @T.prim_func
    def row_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            T.fill(best, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                T.copy(X[bx * block_M, k * block_N], x_frag)
                T.reduce_max(x_frag, part, dim=1)
                for i in T.Parallel(block_M):
                    best[i] = T.max(best[i], part[i])
            T.copy(best, Out[bx * block_M])

    return row_max


def transpose_scattered(M, N, dtype="float16", block=64):
    """Transpose that stages A in shared memory but writes B from registers: scattered stores (CPU)."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            a_tile = T.alloc_shared((block, block), dtype)
            b_tile = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], a_tile)
            for i, j in T.Parallel(block, block):
                b_tile[i, j] = a_tile[j, i]
            T.copy(b_tile, B[bx * block, by * block])

    return transpose


def transpose_swapped_blocks(M, N, dtype="float16", block=64):
    """Fast, but the output tile goes to B[by, bx] instead of B[bx, by]: wrong on non-square A (GPU)."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            a_tile = T.alloc_fragment((block, block), dtype)
            b_tile = T.alloc_shared((block, block), dtype)
            T.copy(A[by * block, bx * block], a_tile)
            for i, j in T.Parallel(block, block):
                b_tile[j, i] = a_tile[i, j]
            T.copy(b_tile, B[by * block, bx * block])

    return transpose
