"""Reference solution for notebook 02's transposed-B exercise: ``C = ReLU(A @ B^T)``, B stored (N, K).

That is how an ``nn.Linear`` weight is stored. Four things change against the notebook's kernel:
B's shape, the shape of ``B_shared`` (``(block_N, block_K)``, a tile of B as stored), the corner of
the B tile a block copies (``B[bx * block_N, ko * block_K]``: rows of B are columns of C), and
``transpose_B=True`` so ``T.gemm`` reads the (block_N, block_K) tile as its transpose. The K loop stays ``T.Pipelined`` (TMA + mbarriers + a producer warpgroup on
Hopper, cp.async stages on Ampere) and ``T.gemm`` still becomes ``wgmma``: on Hopper the
transpose is a bit in the instruction's shared-memory descriptor, not a data movement.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def gemm_transpose_b_solution(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64, num_stages=3,
                              threads=128):
    accum_dtype = "float32"

    @T.prim_func
    def gemm_relu_bt(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((N, K), in_dtype),
        C: T.Tensor((M, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)   # a tile of B as stored
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_relu_bt
