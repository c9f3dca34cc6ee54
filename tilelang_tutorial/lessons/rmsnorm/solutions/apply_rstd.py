"""Reference solution for notebook 05b's exercise 2: the output pass, from a saved Rstd.

    Y = silu(X * Rstd[:, None] * Gamma)       (the product and SiLU in fp32, rounded to dtype once)

The last loop of notebook 05's kernel on its own: X gets the annotated row-group layout (the row
padded to whole rounds of the group), so it is read and Y written with 16-byte vectors at every
width; Rstd is one fp32 value per row, read where it is used.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T

from ..kernel import LOG2_E, VEC, default_config, row_group_layout, vectors_per_thread


def apply_rstd_solution(C, dtype="bfloat16"):
    cfg = default_config(C, dtype)
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    width = vectors_per_thread(C, group) * group * VEC
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), accum), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype)):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            rstd = T.alloc_fragment((block_m,), accum)
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(Rstd[bx * block_m], rstd)
            for i, j in T.Parallel(block_m, width):
                v = T.Cast(accum, x[i, j]) * rstd[i] * T.Cast(accum, Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main
