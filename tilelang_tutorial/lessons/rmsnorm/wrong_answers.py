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


# ------------------------------------------------------------------------------------------------
# Notebook 05b, exercise 1: the chunked statistics kernel, Rstd = 1/sqrt(mean(x^2) + eps)
# ------------------------------------------------------------------------------------------------

def _stats_chunk(C):
    return next(b for b in (128, 64, 32) if C % b == 0)


def wrong_stats_fp16_sum(C, dtype="float16"):
    """Plausible wrong answer: the sums kept in the input's type (accum = dtype): a square of 256 is
    already beyond fp16's 65504, so rows of a few hundred give inf, and 1/sqrt(inf) = 0."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = dtype
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            out = T.alloc_fragment((block_m,), "float32")
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = chunk[i, j] * chunk[i, j]
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                out[i] = T.rsqrt(T.Cast("float32", total[i]) * (1.0 / C) + eps)
            T.copy(out, Rstd[bx * block_m])

    return main


def wrong_stats_fp16_square(C, dtype="float16"):
    """Plausible wrong answer: the sums in fp32, but each square formed in fp16 and then widened
    (T.Cast around the product, not around each factor): 300^2 = 9e4 is inf in fp16."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j] * chunk[i, j])     # the product is fp16
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / C) + eps)
            T.copy(total, Rstd[bx * block_m])

    return main


def wrong_stats_last_chunk(C, dtype="float16"):
    """Plausible wrong answer: each chunk's sum overwrites the running total (= for +=)."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] = part[i]                                     # = where += belongs
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / C) + eps)
            T.copy(total, Rstd[bx * block_m])

    return main


def wrong_stats_chunk_mean(C, dtype="float16"):
    """Plausible wrong answer: the total divided by the chunk width instead of C."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / block_C) + eps)       # block_C where C belongs
            T.copy(total, Rstd[bx * block_m])

    return main


def wrong_stats_no_eps(C, dtype="float16"):
    """Plausible wrong answer: 1/sqrt(mean(x^2)) without eps (inf on a row of zeros)."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / C))                    # eps left out
            T.copy(total, Rstd[bx * block_m])

    return main


def wrong_stats_eps_outside_the_root(C, dtype="float16"):
    """Plausible wrong answer: 1/sqrt(mean(x^2)) + eps (as TileLang's examples/norm/rms_norm.py
    writes it, with 1e-12)."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / C)) + eps              # eps outside the root
            T.copy(total, Rstd[bx * block_m])

    return main


def wrong_stats_rms_not_inverse(C, dtype="float16"):
    """Plausible wrong answer: sqrt(mean(x^2) + eps), the rms itself, where its inverse is asked."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.clear(total)
            for k in T.serial(C // block_C):
                T.copy(X[bx * block_m, k * block_C], chunk)
                for i, j in T.Parallel(block_m, block_C):
                    sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(block_m):
                    total[i] += part[i]
            for i in T.Parallel(block_m):
                total[i] = T.sqrt(total[i] * (1.0 / C) + eps)              # sqrt where rsqrt belongs
            T.copy(total, Rstd[bx * block_m])

    return main


def wrong_stats_floor_grid(C, dtype="float16"):
    """Plausible wrong answer: the grid is m // block_m blocks, so the last, partial block of rows
    is never computed."""
    block_m, threads, block_C = 16, 128, _stats_chunk(C)
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(m // block_m, threads=threads) as bx:                 # floor where ceildiv belongs
            chunk = T.alloc_fragment((block_m, block_C), dtype)
            sq = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)
            total = T.alloc_fragment((block_m,), accum)
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


def wrong_stats_whole_row(C, dtype="float16"):
    """Plausible wrong answer: right numbers, but the whole row in one tile (no chunks): a
    thread's registers grow with C."""
    from .kernel import default_config, row_group_layout

    cfg = default_config(C, dtype)
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    accum = "float32"
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, C), dtype)
            sq = T.alloc_fragment((block_m, C), accum)
            total = T.alloc_fragment((block_m,), accum)
            T.annotate_layout({buf: row_group_layout(block_m, C, group, threads) for buf in (x, sq)})
            T.copy(X[bx * block_m, 0], x)
            for i, j in T.Parallel(block_m, C):
                sq[i, j] = T.Cast(accum, x[i, j]) * T.Cast(accum, x[i, j])
            T.reduce_sum(sq, total, dim=1)
            for i in T.Parallel(block_m):
                total[i] = T.rsqrt(total[i] * (1.0 / C) + eps)
            T.copy(total, Rstd[bx * block_m])

    return main


# ------------------------------------------------------------------------------------------------
# Notebook 05b, exercise 2: the output pass in bf16, Y = silu(X * Rstd * Gamma)
# ------------------------------------------------------------------------------------------------

def _apply_layout(C, dtype):
    from .kernel import VEC, default_config, vectors_per_thread

    cfg = default_config(C, dtype)
    return cfg.group, cfg.threads, cfg.block_m(), vectors_per_thread(C, cfg.group) * cfg.group * VEC


def wrong_apply_bf16_math(C, dtype="bfloat16"):
    """Plausible wrong answer: Rstd cast to the input type and the product formed in bf16, so the
    result is rounded to bf16 several times (within bf16's tolerance, but not rounded once)."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _apply_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype)):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(Rstd[bx * block_m], rstd)
            for i, j in T.Parallel(block_m, width):
                v = x[i, j] * T.Cast(dtype, rstd[i]) * Gamma[j]                 # bf16 products
                y[i, j] = T.Cast(dtype, T.Cast("float32", v) / (1.0 + T.exp2(T.Cast("float32", v) * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_apply_divides(C, dtype="bfloat16"):
    """Plausible wrong answer: x / rstd, as if Rstd held the rms (it holds its inverse)."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _apply_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype)):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(Rstd[bx * block_m], rstd)
            for i, j in T.Parallel(block_m, width):
                v = T.Cast("float32", x[i, j]) / rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_apply_no_silu(C, dtype="bfloat16"):
    """Plausible wrong answer: the norm without the SiLU."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _apply_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype)):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, y)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(Rstd[bx * block_m], rstd)
            for i, j in T.Parallel(block_m, width):
                y[i, j] = T.Cast(dtype, T.Cast("float32", x[i, j]) * rstd[i] * T.Cast("float32", Gamma[j]))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_apply_rstd_not_applied(C, dtype="bfloat16"):
    """Plausible wrong answer: Rstd read but never multiplied in."""
    from .kernel import row_group_layout

    group, threads, block_m, width = _apply_layout(C, dtype)
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype)):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, width), dtype)
            y = T.alloc_fragment((block_m, width), dtype)
            T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, y)})
            T.copy(X[bx * block_m, 0], x)
            for i, j in T.Parallel(block_m, width):
                v = T.Cast("float32", x[i, j]) * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_apply_no_layout(C, dtype="bfloat16"):
    """Plausible wrong answer: right math, the layout left to inference."""
    block_m, threads = 8, 128
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Rstd: T.Tensor((m,), "float32"), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype)):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, C), dtype)
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, C), dtype)
            T.copy(X[bx * block_m, 0], x)
            T.copy(Rstd[bx * block_m], rstd)
            for i, j in T.Parallel(block_m, C):
                v = T.Cast("float32", x[i, j]) * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main
