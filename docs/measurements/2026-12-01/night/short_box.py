"""Kernels for M <= 64 whose A box is only `rows` tall (rows >= m, a multiple of 8): the rest of
the 64-row shared tile is never loaded; the C rows it makes are never stored."""
import tilelang.language as T


def short_program(rows):
    def program(M, N, K, block_M=64, block_N=64, block_K=64, num_stages=4, threads=128,
                policy="Square", swizzle_panel=0, swizzle_order="column", in_dtype="float16",
                accum_dtype="float32", dynamic_m=False, store_via_shared=False):
        assert block_M == 64 and rows % 8 == 0 and rows <= 64
        m = T.dynamic("m") if dynamic_m else M
        warp_policy = getattr(T.GemmWarpPolicy, policy)

        @T.prim_func
        def gemm_relu_short(
            A: T.Tensor((m, K), in_dtype),
            B: T.Tensor((K, N), in_dtype),
            C: T.Tensor((m, N), in_dtype),
        ):
            with T.Kernel(T.ceildiv(N, block_N), 1, threads=threads) as (bx, by):
                A_shared = T.alloc_shared((block_M, block_K), in_dtype)
                B_shared = T.alloc_shared((block_K, block_N), in_dtype)
                C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
                T.clear(C_local)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    # one box per 64 columns (128-byte rows); `if` on a Python constant is resolved here
                    T.copy(A[0:rows, ko * block_K:ko * block_K + 64], A_shared[0:rows, 0:64])
                    if block_K > 64:
                        T.copy(A[0:rows, ko * block_K + 64:ko * block_K + 128], A_shared[0:rows, 64:128])
                    if block_K > 128:
                        T.copy(A[0:rows, ko * block_K + 128:ko * block_K + 192], A_shared[0:rows, 128:192])
                        T.copy(A[0:rows, ko * block_K + 192:ko * block_K + 256], A_shared[0:rows, 192:256])
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local, policy=warp_policy)
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] = T.max(C_local[i, j], 0)
                T.copy(C_local[0:rows, 0:block_N], C[0:rows, bx * block_N:(bx + 1) * block_N])

        return gemm_relu_short
    program.__name__ = f"short_program_{rows}"
    return program


def short_partial_program(rows):
    def program(N, K, split, block_M=64, block_N=128, block_K=64, num_stages=4, threads=128,
                policy="Square", in_dtype="float16", accum_dtype="float32"):
        m = T.dynamic("m")
        k_steps = -(-K // block_K)
        steps_per_split = -(-k_steps // split)
        warp_policy = getattr(T.GemmWarpPolicy, policy)

        @T.prim_func
        def gemm_partial_short(
            A: T.Tensor((m, K), in_dtype),
            B: T.Tensor((K, N), in_dtype),
            W: T.Tensor((split, m, N), accum_dtype),
        ):
            with T.Kernel(T.ceildiv(N, block_N), 1, split, threads=threads) as (bx, by, bz):
                A_shared = T.alloc_shared((block_M, block_K), in_dtype)
                B_shared = T.alloc_shared((block_K, block_N), in_dtype)
                acc = T.alloc_fragment((block_M, block_N), accum_dtype)
                T.clear(acc)
                for ko in T.Pipelined(steps_per_split, num_stages=num_stages):
                    k0 = (bz * steps_per_split + ko) * block_K
                    T.copy(A[0:rows, k0:k0 + 64], A_shared[0:rows, 0:64])
                    if block_K > 64:
                        T.copy(A[0:rows, k0 + 64:k0 + 128], A_shared[0:rows, 64:128])
                    if block_K > 128:
                        T.copy(A[0:rows, k0 + 128:k0 + 192], A_shared[0:rows, 128:192])
                        T.copy(A[0:rows, k0 + 192:k0 + 256], A_shared[0:rows, 192:256])
                    T.copy(B[(bz * steps_per_split + ko) * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, acc, policy=warp_policy)
                T.copy(acc[0:rows, 0:block_N], W[bz, 0:rows, bx * block_N:(bx + 1) * block_N])

        return gemm_partial_short
    return program
