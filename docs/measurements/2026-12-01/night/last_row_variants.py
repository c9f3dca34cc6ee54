"""GEMM + ReLU variants for the out-of-bounds experiment (same signature as gemm_relu_program)."""
import tilelang.language as T

HALF = 64       # wgmma's row count


def clamped_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                    policy="Square", swizzle_panel=4, swizzle_order="column", in_dtype="float16",
                    accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """the last row / column tile's origin clamped to m - block_M / N - block_N: no OOB box unless
    the matrix is smaller than one tile"""
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_clamped(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            row0 = T.min(by * block_M, T.max(m - block_M, 0))
            col0 = T.min(bx * block_N, max(N - block_N, 0))
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[row0, ko * block_K], A_shared)
                T.copy(B[ko * block_K, col0], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            if store_via_shared:
                C_shared = T.alloc_shared((block_M, block_N), in_dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[row0, col0])
            else:
                T.copy(C_local, C[row0, col0])

    return gemm_relu_clamped


def two_slice_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                      policy="Square", swizzle_panel=4, swizzle_order="column", in_dtype="float16",
                      accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """a 128-row tile as two 64-row slices, each slice's origin clamped to m - 64"""
    assert block_M == 2 * HALF and not store_via_shared
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_two_slice(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_top = T.alloc_shared((HALF, block_K), in_dtype)
            A_bot = T.alloc_shared((HALF, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_top = T.alloc_fragment((HALF, block_N), accum_dtype)
            C_bot = T.alloc_fragment((HALF, block_N), accum_dtype)
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            last_row = T.max(m - HALF, 0)
            top = T.min(by * block_M, last_row)
            bot = T.min(by * block_M + HALF, last_row)
            col0 = T.min(bx * block_N, max(N - block_N, 0))
            T.clear(C_top)
            T.clear(C_bot)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[top, ko * block_K], A_top)
                T.copy(A[bot, ko * block_K], A_bot)
                T.copy(B[ko * block_K, col0], B_shared)
                T.gemm(A_top, B_shared, C_top, policy=warp_policy)
                T.gemm(A_bot, B_shared, C_bot, policy=warp_policy)
            for i, j in T.Parallel(HALF, block_N):
                C_top[i, j] = T.max(C_top[i, j], 0)
                C_bot[i, j] = T.max(C_bot[i, j], 0)
            T.copy(C_top, C[top, col0])
            T.copy(C_bot, C[bot, col0])

    return gemm_relu_two_slice


def edge_program(M, N, K, block_M=128, threads=128, store_via_shared=False, **kw):
    """two slices for a 128-row tile of one warpgroup, else the clamped tile"""
    if block_M == 2 * HALF and threads == 128 and not store_via_shared:
        return two_slice_program(M, N, K, block_M=block_M, threads=threads, **kw)
    return clamped_program(M, N, K, block_M=block_M, threads=threads, store_via_shared=store_via_shared, **kw)


VARIANTS = {"plain": None, "clamp": clamped_program, "two_slice": two_slice_program, "edge": edge_program}


def one_buffer_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                       policy="Square", swizzle_panel=4, swizzle_order="column", in_dtype="float16",
                       accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """two clamped 64-row TMA boxes into one 128-row A tile, one multiply"""
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_one_buffer(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            last_row = T.max(m - HALF, 0)
            top = T.min(by * block_M, last_row)
            bot = T.min(by * block_M + HALF, last_row)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[top:top + HALF, ko * block_K:(ko + 1) * block_K], A_shared[0:HALF, 0:block_K])
                T.copy(A[bot:bot + HALF, ko * block_K:(ko + 1) * block_K], A_shared[HALF:2 * HALF, 0:block_K])
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local[0:HALF, 0:block_N], C[top:top + HALF, bx * block_N:(bx + 1) * block_N])
            T.copy(C_local[HALF:2 * HALF, 0:block_N], C[bot:bot + HALF, bx * block_N:(bx + 1) * block_N])

    return gemm_relu_one_buffer


VARIANTS["one_buffer"] = one_buffer_program
