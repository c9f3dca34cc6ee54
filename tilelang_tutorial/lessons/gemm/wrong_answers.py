"""Plausible wrong answers to this lesson's exercises: each is a mistake a reader could make, and
the checkers must reject it with a message that helps (``tests/test_exercises.py``). Test
fixtures, not solutions; kernels are defined in a file because ``T.prim_func`` needs source.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def gemm_bias_gelu_no_bias(M, N, K, in_dtype):
    """The bias parameter was forgotten: 3 tensors instead of 4 (CPU, no compile)."""
    from .kernel import gemm_relu_program

    return gemm_relu_program(M, N, K, in_dtype=in_dtype)


def gemm_bias_gelu_wrong_order(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """GELU applied *before* adding the bias (GPU)."""
    inv_sqrt2 = 0.7071067811865476

    @T.prim_func
    def gemm_gelu_bias(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        Bias: T.Tensor((N,), in_dtype),
        C: T.Tensor((M, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                col = T.min(bx * block_N + j, N - 1)
                x = C_local[i, j]
                C_local[i, j] = 0.5 * x * (1.0 + T.erf(x * inv_sqrt2)) + T.cast(Bias[col], "float32")
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_gelu_bias


def gemm_bt_untransposed_shape(M, N, K, in_dtype):
    """B declared (K, N) as in the notebook's kernel, not (N, K) like an nn.Linear weight (CPU)."""
    from .kernel import gemm_relu_program

    return gemm_relu_program(M, N, K, in_dtype=in_dtype)


def gemm_bt_serial(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """Transposed B done right, but the K loop is T.serial: no software pipeline (CPU, compiles)."""

    @T.prim_func
    def gemm_bt(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bt


def gemm_bt_wrong_tile(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """(N, K) B, but the tile is loaded from B[k, n] coordinates: wrong values (GPU)."""

    @T.prim_func
    def gemm_bt(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bt
