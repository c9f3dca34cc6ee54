"""Reference solution for notebook 05's residual exercise: RMSNorm + SiLU with a residual input.

    y = silu(rms_norm(x + r) * gamma)          (x + r formed in fp32, never rounded to 16 bits)

It is the kernel of ``kernel.py`` with a second input: R gets the same annotated
row-group layout as X (the row padded to whole rounds of the group, as there), so both are read
with 16-byte vectors at every width, and the sum lives only in registers.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T

from ..kernel import LOG2_E, VEC, default_config, row_group_layout, vectors_per_thread


def residual_rmsnorm_silu_solution(C, dtype="float16"):
    cfg = default_config(C, dtype)
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    width = vectors_per_thread(C, group) * group * VEC    # the row padded to whole rounds of the group
    accum = "float32"
    inv_c = 1.0 / C
    m = T.dynamic("m")

    @T.prim_func
    def main(
        X: T.Tensor((m, C), dtype),
        R: T.Tensor((m, C), dtype),
        Gamma: T.Tensor((C,), dtype),
        Y: T.Tensor((m, C), dtype),
        eps: T.float32,
    ):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            r = T.alloc_fragment((block_m, width), dtype)
            h = T.alloc_fragment((block_m, width), accum)
            sq = T.alloc_fragment((block_m, width), accum)
            rstd = T.alloc_fragment((block_m,), accum)
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, r, h, sq, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, width):
                h[i, j] = T.Cast(accum, x[i, j]) + T.Cast(accum, r[i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)
            for i, j in T.Parallel(block_m, width):
                v = h[i, j] * rstd[i] * T.Cast(accum, Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main
