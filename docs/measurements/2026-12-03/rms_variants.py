"""Variants of lessons/rmsnorm/kernel.py's kernel for the padded band (probe, not the lesson).
guard 0: the kernel as it is; 1: the SiLU guarded by j < C (gamma read per element);
2: gamma read into a register tile first (vectorized, bounds-checked), then the guarded SiLU."""
import tilelang.language as T
from tilelang_tutorial.lessons.rmsnorm import kernel as rs
from tilelang_tutorial.lessons.rmsnorm.kernel import VEC, LOG2_E, row_group_layout, vectors_per_thread


def program(C, dtype, cfg, guard):
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    width = vectors_per_thread(C, group) * group * VEC
    accum = "float32"
    inv_c = 1.0 / C
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype), Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            if cfg.min_blocks:
                T.annotate_min_blocks_per_sm(cfg.min_blocks)
            x = T.alloc_fragment((block_m, width), dtype)
            sq = T.alloc_fragment((block_m, width), accum)
            rstd = T.alloc_fragment((block_m,), accum)
            y = T.alloc_fragment((block_m, width), dtype)
            if guard == 2:
                gm = T.alloc_fragment((block_m, width), dtype)
                T.annotate_layout({x: row_group_layout(block_m, width, group, threads),
                                   sq: row_group_layout(block_m, width, group, threads),
                                   y: row_group_layout(block_m, width, group, threads),
                                   gm: row_group_layout(block_m, width, group, threads)})
            else:
                T.annotate_layout({x: row_group_layout(block_m, width, group, threads),
                                   sq: row_group_layout(block_m, width, group, threads),
                                   y: row_group_layout(block_m, width, group, threads)})
            T.copy(X[bx * block_m, 0], x)
            for i, j in T.Parallel(block_m, width):
                sq[i, j] = T.Cast(accum, x[i, j]) * T.Cast(accum, x[i, j])
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)
            if guard == 0:
                for i, j in T.Parallel(block_m, width):
                    v = T.Cast(accum, x[i, j]) * rstd[i] * T.Cast(accum, Gamma[j])
                    y[i, j] = T.Cast(dtype, v * T.fast_rcp(1.0 + T.exp2(v * -LOG2_E)))
            elif guard == 1:
                for i, j in T.Parallel(block_m, width):
                    if j < C:
                        v = T.Cast(accum, x[i, j]) * rstd[i] * T.Cast(accum, Gamma[j])
                        y[i, j] = T.Cast(dtype, v * T.fast_rcp(1.0 + T.exp2(v * -LOG2_E)))
            else:
                for i, j in T.Parallel(block_m, width):
                    gm[i, j] = Gamma[j]
                for i, j in T.Parallel(block_m, width):
                    if j < C:
                        v = T.Cast(accum, x[i, j]) * rstd[i] * T.Cast(accum, gm[i, j])
                        y[i, j] = T.Cast(dtype, v * T.fast_rcp(1.0 + T.exp2(v * -LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main
