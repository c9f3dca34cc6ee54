"""Reference answer for notebook 03's second exercise: a transpose whose column reads are
conflict-free.

The warp reads 32 rows of one column of ``A_shared`` (thread t of the warp: row t, the same
column). With 64 fp16 per row, rows are 128 B = 32 words apart, so every one of those 32 elements
sits in the same bank: 32-way. Two elements of padding make a row 66 fp16 = 33 words long; 33 is
odd, so row r starts in bank r mod 32 and the 32 rows of a request fall in 32 different banks.
The cost: 2 x 64 x 2 = 256 B more shared memory (3 %), and rows are no longer 16-byte aligned,
so the copy into ``A_shared`` writes 4-byte vectors instead of 16-byte ones.

(TileLang's XOR swizzle does not help here: it permutes 16-byte chunks by ``row % 8``, which
separates 8 consecutive rows, not 32; a 16-byte pad (8 elements, 36 words) leaves 4-way.)
"""
import tilelang.language as T


def conflict_free_transpose(M: int, N: int, block: int = 64, threads: int = 128, dtype: str = "float16"):
    pad = 2   # 66 fp16 = 33 words per row: an odd number of words

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
