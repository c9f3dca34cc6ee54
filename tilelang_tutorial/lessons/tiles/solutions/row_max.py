"""Solution to notebook 01's first exercise: row max with the ragged last tile masked to -inf,
as a factory and (the same kernel) in eager mode."""
import tilelang
import tilelang.language as T


def row_max_program(N: int, dtype: str = "float16", block_M: int = 64, block_N: int = 256, threads: int = 128):
    M = T.dynamic("M")

    @T.prim_func
    def row_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            T.fill(best, -T.infinity("float32"))        # below every value: 0 would beat negative rows
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(block_M, block_N):
                    # columns past N do not exist: -inf, never the max
                    x_frag[i, j] = T.if_then_else(k * block_N + j < N, X[bx * block_M + i, k * block_N + j],
                                                  -T.infinity("float32"))
                T.reduce_max(x_frag, part, dim=1)
                for i in T.Parallel(block_M):
                    best[i] = T.max(best[i], part[i])
            T.copy(best, Out[bx * block_M])

    return row_max


@tilelang.jit
def row_max_eager(X, Out, block_M: int = 64, block_N: int = 256, threads: int = 128, dtype: str = "float16"):
    M, N = T.const("M, N")
    X: T.Tensor[[M, N], dtype]
    Out: T.Tensor[[M], "float32"]
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        x_frag = T.alloc_fragment((block_M, block_N), "float32")
        part = T.alloc_fragment((block_M,), "float32")
        best = T.alloc_fragment((block_M,), "float32")
        T.fill(best, -T.infinity("float32"))
        for k in T.serial(T.ceildiv(N, block_N)):
            for i, j in T.Parallel(block_M, block_N):
                x_frag[i, j] = T.if_then_else(k * block_N + j < N, X[bx * block_M + i, k * block_N + j],
                                              -T.infinity("float32"))
            T.reduce_max(x_frag, part, dim=1)
            for i in T.Parallel(block_M):
                best[i] = T.max(best[i], part[i])
        T.copy(best, Out[bx * block_M])
