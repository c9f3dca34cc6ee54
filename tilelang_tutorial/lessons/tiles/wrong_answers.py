"""Plausible wrong answers to this lesson's exercises: each is a mistake a reader could make, and
the checkers must reject it with a message that names it (``tests/test_exercises.py``: each
:class:`~tilelang_tutorial.lessons.WrongAnswer` carries the phrase its rejection must contain).
Test fixtures, not solutions; kernels are defined in a file because ``T.prim_func`` needs source.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def _row_max(N, dtype, *, start_at_zero=False, mask=True, combine="max", block_M=64, block_N=256):
    """The row-max solution with one mistake switched on."""
    M = T.dynamic("M")

    @T.prim_func
    def row_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            if start_at_zero:
                T.clear(best)
            else:
                T.fill(best, -T.infinity("float32"))
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x_frag)
                if mask:
                    for i, j in T.Parallel(block_M, block_N):
                        x_frag[i, j] = T.if_then_else(k * block_N + j < N, x_frag[i, j], -T.infinity("float32"))
                T.reduce_max(x_frag, part, dim=1)
                for i in T.Parallel(block_M):
                    if combine == "max":
                        best[i] = T.max(best[i], part[i])
                    elif combine == "add":
                        best[i] += part[i]
                    else:
                        best[i] = part[i]
            T.copy(best, Out[bx * block_M])

    return row_max


def row_max_unmasked(N, dtype):
    """Starts at -inf but does not mask the ragged last tile: its zero-filled columns win the max
    of every all-negative row (only when N is not a multiple of the tile)."""
    return _row_max(N, dtype, mask=False)


def row_max_starts_at_zero(N, dtype):
    """Masks correctly but starts the running max at 0 (T.clear): every all-negative row gives 0."""
    return _row_max(N, dtype, start_at_zero=True)


def row_max_adds_tile_maxima(N, dtype):
    """row_sum with reduce_sum swapped for reduce_max: the tiles' maxima are added up."""
    return _row_max(N, dtype, start_at_zero=True, mask=False, combine="add")


def row_max_keeps_last_tile(N, dtype):
    """Each tile's max replaces the running max: the result is the max of the last tile only."""
    return _row_max(N, dtype, combine="replace")


def row_max_never_started(N, dtype, block_M=64, block_N=256):
    """The running max is never set before it is read (no T.fill)."""
    M = T.dynamic("M")

    @T.prim_func
    def row_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x_frag)
                for i, j in T.Parallel(block_M, block_N):
                    x_frag[i, j] = T.if_then_else(k * block_N + j < N, x_frag[i, j], -T.infinity("float32"))
                T.reduce_max(x_frag, part, dim=1)
                for i in T.Parallel(block_M):
                    best[i] = T.max(best[i], part[i])
            T.copy(best, Out[bx * block_M])

    return row_max


def transpose_scattered(M, N, dtype="float16", block=64):
    """Stages A in shared memory, then reads it down columns into a fragment and copies that to B:
    the fragment's layout gives each thread a column of the tile, so B is stored 2 bytes at a time."""

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


def transpose_direct(M, N, dtype="float16", block=64):
    """No on-chip tile at all: each element goes from A to its place in B inside T.Parallel."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                B[bx * block + j, by * block + i] = A[by * block + i, bx * block + j]

    return transpose


def transpose_swapped_blocks(M, N, dtype="float16", block=64):
    """Fast, but the output tile goes to B[by, bx] instead of B[bx, by]: wrong on non-square A."""

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


def transpose_tiles_not_transposed(M, N, dtype="float16", block=64):
    """Each tile goes to its transposed place in B, but its contents are copied as they are."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            a_tile = T.alloc_fragment((block, block), dtype)
            b_tile = T.alloc_shared((block, block), dtype)
            T.copy(A[by * block, bx * block], a_tile)
            for i, j in T.Parallel(block, block):
                b_tile[i, j] = a_tile[i, j]
            T.copy(b_tile, B[bx * block, by * block])

    return transpose
