"""Plausible wrong answers to this lesson's exercises: each is a mistake a reader could make, and
the checkers must reject it with a message that helps (``tests/test_exercises.py``). Test
fixtures, not solutions; kernels are defined in a file because ``T.prim_func`` needs source.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


_LOG2_E = 1.4426950408889634


def wrong_residual_no_layout(C, dtype="float16"):
    """Plausible wrong answer: right math, but the layout is left to inference (naive)."""
    block_m, threads = 8, 128
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            h = T.alloc_fragment((block_m, C), "float32")
            sq = T.alloc_fragment((block_m, C), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, C), dtype)
            for i, j in T.Parallel(block_m, C):
                h[i, j] = T.Cast("float32", X[bx * block_m + i, j]) + T.Cast("float32", R[bx * block_m + i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] / C + eps)
            for i, j in T.Parallel(block_m, C):
                v = h[i, j] * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_residual_after_norm(C, dtype="float16"):
    """Plausible wrong answer: fast layout, but the residual is added after the norm."""
    from .kernel import VEC, default_config, row_group_layout, vectors_per_thread

    cfg = default_config(C, dtype)
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    width = vectors_per_thread(C, group) * group * VEC
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            r = T.alloc_fragment((block_m, width), dtype)
            sq = T.alloc_fragment((block_m, width), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({x: row_group_layout(block_m, width, group, threads),
                               r: row_group_layout(block_m, width, group, threads),
                               sq: row_group_layout(block_m, width, group, threads),
                               y: row_group_layout(block_m, width, group, threads)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, width):
                sq[i, j] = T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] / C + eps)
            for i, j in T.Parallel(block_m, width):
                v = T.Cast("float32", x[i, j]) * rstd[i] * T.Cast("float32", Gamma[j]) + T.Cast("float32", r[i, j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def rmsnorm_config_five_lanes():
    """Five lanes per row, because 80 vectors / 5 = 16 each: but the sum's butterfly pairs lanes by
    halves, so a group must be a power of two (CPU, no compile)."""
    from .kernel import RMSNormSiLUConfig

    return RMSNormSiLUConfig(group=5, threads=160)


def rmsnorm_config_one_lane_per_row():
    """One lane holds a whole row of 640: correct, but far too many registers (ptxas spills)."""
    from .kernel import RMSNormSiLUConfig

    return RMSNormSiLUConfig(group=1, threads=128)


def _residual_layout(C, dtype):
    from .kernel import VEC, default_config, vectors_per_thread

    cfg = default_config(C, dtype)
    return cfg.group, cfg.threads, cfg.block_m(), vectors_per_thread(C, cfg.group) * cfg.group * VEC


def wrong_residual_fp16_sum(C, dtype="float16"):
    """Plausible wrong answer: x + r added in the inputs' 16-bit type (the spec says fp32), then
    widened: a sum beyond 65504 is inf in fp16, and every output of its row is lost."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _residual_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            r = T.alloc_fragment((block_m, width), dtype)
            h = T.alloc_fragment((block_m, width), "float32")
            sq = T.alloc_fragment((block_m, width), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, r, h, sq, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, width):
                h[i, j] = T.Cast("float32", x[i, j] + r[i, j])      # the add happens in fp16
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / C) + eps)
            for i, j in T.Parallel(block_m, width):
                v = h[i, j] * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_residual_no_eps(C, dtype="float16"):
    """Plausible wrong answer: 1/sqrt(mean(h^2)) without eps: right on ordinary rows, wrong (or
    inf * 0 = NaN) on a row whose mean square is near or at zero."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _residual_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            r = T.alloc_fragment((block_m, width), dtype)
            h = T.alloc_fragment((block_m, width), "float32")
            sq = T.alloc_fragment((block_m, width), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, r, h, sq, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, width):
                h[i, j] = T.Cast("float32", x[i, j]) + T.Cast("float32", r[i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / C))              # eps left out
            for i, j in T.Parallel(block_m, width):
                v = h[i, j] * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_residual_eps_outside_the_root(C, dtype="float16"):
    """Plausible wrong answer: 1/sqrt(mean(h^2)) + eps, eps added after the root (as TileLang's
    examples/norm/rms_norm.py writes it, with 1e-12): right on ordinary rows, wrong where the mean
    square is near or at zero."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _residual_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            r = T.alloc_fragment((block_m, width), dtype)
            h = T.alloc_fragment((block_m, width), "float32")
            sq = T.alloc_fragment((block_m, width), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, r, h, sq, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, width):
                h[i, j] = T.Cast("float32", x[i, j]) + T.Cast("float32", r[i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / C)) + eps        # eps outside the root
            for i, j in T.Parallel(block_m, width):
                v = h[i, j] * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_residual_r_not_annotated(C, dtype="float16"):
    """Plausible wrong answer: the solution with R's fragment left out of T.annotate_layout (the
    spec asks for every (block_m, width) fragment to carry the row-group layout)."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _residual_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            r = T.alloc_fragment((block_m, width), dtype)
            h = T.alloc_fragment((block_m, width), "float32")
            sq = T.alloc_fragment((block_m, width), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, h, sq, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, width):
                h[i, j] = T.Cast("float32", x[i, j]) + T.Cast("float32", r[i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * (1.0 / C) + eps)
            for i, j in T.Parallel(block_m, width):
                v = h[i, j] * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main
