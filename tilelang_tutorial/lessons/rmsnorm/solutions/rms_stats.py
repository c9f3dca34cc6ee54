"""Reference solution for notebook 05b's exercise 1: the chunked statistics kernel.

    Rstd[i] = 1 / sqrt(mean_j X[i, j]^2 + eps)          (fp32 throughout)

The first pass of the two-pass design on its own: a row of any width is walked in chunks of at
most 128 columns (the largest of 128, 64, 32 that divides C), so the registers a thread needs do
not grow with C. Each chunk is copied into an input-dtype fragment (``T.copy`` guards the rows past
``m``), widened to fp32 before it is squared (an fp16 square of 256 is already beyond 65504), and
its row sums are added to a running fp32 total that ``T.clear`` zeroed first.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def rms_stats_solution(C, dtype="float16"):
    block_m, threads = 16, 128
    block_C = next(b for b in (128, 64, 32) if C % b == 0)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), accum), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)       # this chunk's sum of squares
            total = T.alloc_fragment((block_m,), accum)      # the running sum, then 1/rms
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / C) + eps)
            T.copy(total, Rstd[bx * block_m])

    return main
