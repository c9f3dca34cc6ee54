"""Reference solution for notebook 02's bias + GELU exercise: C = GELU(A @ B + bias).

The solution keeps the GEMM main loop of the lesson's ``kernel.py`` and changes only the epilogue:
the bias is a (N,) vector, so each thread reads ``Bias[bx * block_N + j]`` for the columns of its
fragment; bias and GELU are applied on registers before the single store of C.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import math

import tilelang.language as T

_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def gemm_bias_gelu_solution(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64, num_stages=3,
                            threads=128):
    accum_dtype = "float32"

    @T.prim_func
    def gemm_bias_gelu(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        Bias: T.Tensor((N,), in_dtype),
        C: T.Tensor((M, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                # Columns past N read a clamped bias; their results are never stored.
                col = T.min(bx * block_N + j, N - 1)
                x = C_local[i, j] + T.cast(Bias[col], accum_dtype)
                C_local[i, j] = 0.5 * x * (1.0 + T.erf(x * _INV_SQRT2))
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bias_gelu
