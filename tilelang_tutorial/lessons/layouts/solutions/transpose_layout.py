"""Reference answer for notebook 03's second exercise: an fp32 transpose whose column reads are
conflict-free.

The warp reads 32 rows of one column of ``A_shared`` (thread t of the warp: row t, the same
column). With 64 fp32 per row, rows are 256 B = 64 words apart, so every one of those 32 elements
sits in the same bank: 32-way. One element of padding makes a row 65 words long; 65 is odd, so row
r starts in bank r mod 32 and the 32 rows of a request fall in 32 different banks. The cost:
64 x 4 = 256 B more shared memory (1.6 %).

Section 6's fp16 answer, two elements, is two *words* here: 66 words share the factor 2 with 32,
so rows r and r + 16 meet (2-way). TileLang's XOR swizzle permutes 16-byte chunks by ``row % 8``,
which separates 8 consecutive rows, not 32 (4-way); a 16-byte pad (4 fp32, 68 words) is 4-way too.
"""
import tilelang.language as T


def conflict_free_transpose(M: int, N: int, block: int = 64, threads: int = 128, dtype: str = "float32"):
    pad = 1   # 65 fp32 = 65 words per row: an odd number of words

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block, block + pad), dtype)
            B_tile = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], A_shared[0:block, 0:block])
            for i, j in T.Parallel(block, block):
                B_tile[i, j] = A_shared[j, i]
            T.copy(B_tile, B[bx * block, by * block])

    return transpose
