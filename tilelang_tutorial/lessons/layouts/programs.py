"""Small kernels that exist to be *looked at*: their inferred layouts are the lesson.

They are real ``T.prim_func`` programs (they compile), but notebook 03 mostly runs only layout
inference on them (:func:`tilelang_tutorial.layouts.infer_layouts`), which needs no nvcc.

* (notebook 01's elementwise ``T.Parallel`` fragment is ``scale_copy_program`` of lesson 01 itself):
  inference picks a thread-per-vector layout so global loads are 16 bytes wide.
* :func:`gemm_program` - a pipelined GEMM: the accumulator's layout is dictated by the tensor
  core instruction (``mma`` on sm_80, ``wgmma`` on sm_90a) and by the warp policy.
* :func:`gemm_rs_program` - the same GEMM with A staged in registers: A's fragment is the
  ``mma`` *operand* layout.
* :func:`chained_gemm_program` - ``Y = (X @ W1) @ W2`` with 256 consumer threads: two warpgroups
  split the accumulators ``acc_h`` (64 x 64) and ``acc_y`` (64 x 512), and the first GEMM's result
  goes through shared memory (``H_shared``) because the second GEMM needs whole rows of it in every
  warpgroup; :func:`chained_gemm_fragment_program` keeps it in registers, which inference rejects.
* :func:`transpose_program` - ``B = A^T`` through a shared tile read down its columns: notebook
  03's kernel for bank conflicts, with ``pad`` and ``swizzle`` as the reader's choices.
"""
from __future__ import annotations

import tilelang.language as T


def gemm_program(
    M: int = 128,
    N: int = 128,
    K: int = 64,
    block_M: int | None = None,
    block_N: int | None = None,
    block_K: int = 32,
    threads: int = 128,
    policy=T.GemmWarpPolicy.Square,
    dtype: str = "float16",
    num_stages: int = 2,
):
    """``C = A @ B`` with one ``block_M x block_N`` fp32 accumulator per block."""
    block_M = block_M or M
    block_N = block_N or N

    @T.prim_func
    def gemm_demo(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=policy)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_demo


def gemm_rs_program(
    M: int = 64,
    N: int = 64,
    K: int = 32,
    threads: int = 128,
    policy=T.GemmWarpPolicy.Square,
    dtype: str = "float16",
):
    """``C = A @ B`` for one tile with A copied into registers first (``T.gemm`` with a fragment
    A operand): inference must give ``A_local`` the layout the ``mma`` instruction reads."""

    @T.prim_func
    def gemm_rs_demo(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_shared = T.alloc_shared((M, K), dtype)
            B_shared = T.alloc_shared((K, N), dtype)
            A_local = T.alloc_fragment((M, K), dtype)
            C_local = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.copy(A_shared, A_local)
            T.gemm(A_local, B_shared, C_local, policy=policy, clear_accum=True)
            T.copy(C_local, C)

    return gemm_rs_demo


def chained_gemm_program(
    rows: int = 64,
    d_in: int = 128,
    hidden: int = 256,
    d_out: int = 512,
    block_hidden: int = 64,
    threads: int = 256,
    policy=T.GemmWarpPolicy.FullCol,
    dtype: str = "float16",
):
    """``Y = (X @ W1) @ W2`` for one block of ``rows`` rows, two GEMMs chained through shared memory.

    The hidden dimension is walked in blocks of ``block_hidden``: ``acc_h = X @ W1[:, block]``
    (rows x block_hidden) then ``acc_y += H @ W2[block, :]`` (rows x d_out). The kernel writes
    ``T.copy(acc_h, H_shared)`` itself: under a column split each warpgroup holds part of every row
    of ``acc_h``, but its half of the second GEMM needs whole rows, so they go through shared memory.
    Everything else (who owns what) is inferred.
    """

    @T.prim_func
    def chained_gemm(
        X: T.Tensor((rows, d_in), dtype),
        W1: T.Tensor((d_in, hidden), dtype),
        W2: T.Tensor((hidden, d_out), dtype),
        Y: T.Tensor((rows, d_out), dtype),
    ):
        with T.Kernel(1, threads=threads) as bx:
            X_shared = T.alloc_shared((rows, d_in), dtype)
            W1_shared = T.alloc_shared((d_in, block_hidden), dtype)
            W2_shared = T.alloc_shared((block_hidden, d_out), dtype)
            H_shared = T.alloc_shared((rows, block_hidden), dtype)     # the exchange between the GEMMs
            acc_h = T.alloc_fragment((rows, block_hidden), "float32")
            acc_y = T.alloc_fragment((rows, d_out), "float32")
            T.copy(X, X_shared)
            T.clear(acc_y)
            for k in T.Pipelined(T.ceildiv(hidden, block_hidden), num_stages=1):
                T.copy(W1[0, k * block_hidden], W1_shared)
                T.copy(W2[k * block_hidden, 0], W2_shared)
                T.clear(acc_h)
                T.gemm(X_shared, W1_shared, acc_h, policy=policy)
                T.copy(acc_h, H_shared)
                T.gemm(H_shared, W2_shared, acc_y, policy=policy)
            T.copy(acc_y, Y)

    return chained_gemm


def chained_gemm_fragment_program(
    rows: int = 64,
    d_in: int = 128,
    hidden: int = 256,
    d_out: int = 512,
    block_hidden: int = 64,
    threads: int = 256,
    policy=T.GemmWarpPolicy.FullCol,
    dtype: str = "float16",
):
    """:func:`chained_gemm_program` with H cast into a register fragment, ``H_frag``, instead of
    shared memory. Layout inference fails on it ("Layout infer conflict between acc_h and H_frag"):
    the second GEMM wants every element of H in both warpgroups, the first leaves half in each."""

    @T.prim_func
    def chained_gemm_fragment(
        X: T.Tensor((rows, d_in), dtype),
        W1: T.Tensor((d_in, hidden), dtype),
        W2: T.Tensor((hidden, d_out), dtype),
        Y: T.Tensor((rows, d_out), dtype),
    ):
        with T.Kernel(1, threads=threads) as bx:
            X_shared = T.alloc_shared((rows, d_in), dtype)
            W1_shared = T.alloc_shared((d_in, block_hidden), dtype)
            W2_shared = T.alloc_shared((block_hidden, d_out), dtype)
            H_frag = T.alloc_fragment((rows, block_hidden), dtype)      # registers, where H_shared was
            acc_h = T.alloc_fragment((rows, block_hidden), "float32")
            acc_y = T.alloc_fragment((rows, d_out), "float32")
            T.copy(X, X_shared)
            T.clear(acc_y)
            for k in T.Pipelined(T.ceildiv(hidden, block_hidden), num_stages=1):
                T.copy(W1[0, k * block_hidden], W1_shared)
                T.copy(W2[k * block_hidden, 0], W2_shared)
                T.clear(acc_h)
                T.gemm(X_shared, W1_shared, acc_h, policy=policy)
                T.copy(acc_h, H_frag)
                T.gemm(H_frag, W2_shared, acc_y, policy=policy)
            T.copy(acc_y, Y)

    return chained_gemm_fragment


def transpose_program(M: int, N: int, block: int = 64, pad: int = 0, swizzle: bool = False,
                      threads: int = 128, dtype: str = "float16"):
    """``B = A^T`` through a shared tile: rows of A are copied into ``A_shared``, read back down its
    columns into the fragment ``B_tile`` and written out as rows of B.

    ``pad`` extra elements at the end of each row of ``A_shared`` and ``swizzle`` (TileLang's XOR
    swizzle, forced with ``T.annotate_layout``) are the two ways to change where its elements sit.
    """
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block, block + pad), dtype)   # `pad` unused elements end each row
            B_tile = T.alloc_fragment((block, block), dtype)
            if swizzle:
                T.annotate_layout({A_shared: make_swizzled_layout(A_shared)})
            T.copy(A[by * block, bx * block], A_shared[0:block, 0:block])   # rows of A -> rows of A_shared
            for i, j in T.Parallel(block, block):
                B_tile[i, j] = A_shared[j, i]                              # read down the columns
            T.copy(B_tile, B[bx * block, by * block])                      # block (by, bx) of A -> (bx, by) of B

    return transpose

