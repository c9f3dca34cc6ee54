"""Reference solution: split-K GEMM whose slices add their partial tiles into C with atomics
(notebook 02b, exercise 1)."""
import tilelang.language as T


def gemm_split_k_atomic_solution(M, N, K, split, in_dtype, block_M=64, block_N=128, block_K=64, threads=128):
    steps_per_split = -(-(-(-K // block_K)) // split)        # ceil(ceil(K / block_K) / split)

    @T.prim_func
    def gemm_split_k_atomic(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((M, N), "float32"),         # zeroed by the caller; every slice adds into it
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(steps_per_split, num_stages=2):
                T.copy(A[by * block_M, (bz * steps_per_split + ko) * block_K], A_shared)
                T.copy(B[(bz * steps_per_split + ko) * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc)
            T.atomic_add(C[by * block_M, bx * block_N], acc)

    return gemm_split_k_atomic
