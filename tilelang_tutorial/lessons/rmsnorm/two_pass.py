"""The two-pass, shared-memory RMSNorm + SiLU (a design production kernels use), for comparison.

A common production design makes *two passes* over the
channels, in ``BLOCK_C``-wide chunks staged in shared memory:

1. loop over C in chunks of ``block_C``: copy the chunk of ``block_m`` rows global -> shared,
   add its squares to an fp32 sum per row;
2. ``rstd = rsqrt(sum / C + eps)``; loop over C again: reload each chunk, write
   ``silu(x * rstd * gamma)``.

with ``block_C`` in {128, 64, 32} "to respect the TMA box limit" (a TMA box is at most 256
elements per dimension). Notebook 05 runs this design next to the one-pass kernel of
:mod:`.kernel`, whose rows stay in registers between the sum and the output (X is read once, not
twice), and shows from the generated code that TileLang 0.1.15 splits a large tile copy into
several TMA boxes by itself, so the box limit does not force a chunk size.

Same interface as :func:`.kernel.rmsnorm_silu_program`: ``main(X[m, C], Gamma[C], Y[m, C], eps)``,
``m`` dynamic, fp16/bf16 in and out, fp32 inside, C a multiple of 32 (its narrowest chunk). On
Hopper, TileLang 0.1.15 warp-specializes the first loop (a producer warpgroup issues the TMA loads,
so the kernel launches ``2 * threads`` threads) and turns the second into a ``cp.async`` pipeline.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T

from .kernel import LOG2_E, SUPPORTED_DTYPES, check_channel_width

#: Chunk widths of the two-pass design, largest first.
BLOCK_C_CHOICES = (128, 64, 32)


def two_pass_block_C(C: int) -> int:
    """The largest chunk width in :data:`BLOCK_C_CHOICES` that divides C; ValueError where none does."""
    check_channel_width(C)
    block_C = next((b for b in BLOCK_C_CHOICES if C % b == 0), None)
    if block_C is None:
        raise ValueError(f"the two-pass kernel walks C in chunks of {' or '.join(map(str, BLOCK_C_CHOICES))} "
                         f"columns: C = {C} is not a multiple of {BLOCK_C_CHOICES[-1]}")
    return block_C


def two_pass_rmsnorm_silu_program(C: int, dtype: str = "float16", block_m: int = 16, block_C: int | None = None,
                                  threads: int = 128):
    """Two passes over C in ``block_C`` chunks staged in shared memory; fp32 sum of squares."""
    check_channel_width(C)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"two_pass_rmsnorm_silu supports {' and '.join(SUPPORTED_DTYPES)}, got {dtype}")
    block_C = block_C or two_pass_block_C(C)
    if C % block_C:
        raise ValueError(f"block_C = {block_C} must divide C = {C}")
    accum = "float32"
    inv_c = 1.0 / C
    m = T.dynamic("m")

    @T.prim_func
    def main(
        X: T.Tensor((m, C), dtype),
        Gamma: T.Tensor((C,), dtype),
        Y: T.Tensor((m, C), dtype),
        eps: T.float32,
    ):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            # One chunk of the rows, on chip. Each pipelined loop gets its own buffer: 0.1.15's
            # layout inference fails when two T.Pipelined loops stage into the same one.
            x_chunk = T.alloc_shared((block_m, block_C), dtype)     # pass 1
            x_again = T.alloc_shared((block_m, block_C), dtype)     # pass 2
            x = T.alloc_fragment((block_m, block_C), accum)
            part = T.alloc_fragment((block_m,), accum)              # this chunk's sum of squares
            rstd = T.alloc_fragment((block_m,), accum)              # the running sum, then 1/rms
            y = T.alloc_fragment((block_m, block_C), dtype)
            T.clear(rstd)
            # Pass 1: read X chunk by chunk, accumulate the sum of squares in fp32.
            for k in T.Pipelined(C // block_C, num_stages=2):
                T.copy(X[bx * block_m, k * block_C], x_chunk)
                T.copy(x_chunk, x)
                for i, j in T.Parallel(block_m, block_C):
                    x[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, part, dim=1)
                for i in T.Parallel(block_m):
                    rstd[i] += part[i]
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)
            # Pass 2: read X again, chunk by chunk, and write y = silu(x * rstd * gamma).
            for k in T.Pipelined(C // block_C, num_stages=2):
                T.copy(X[bx * block_m, k * block_C], x_again)
                for i, j in T.Parallel(block_m, block_C):
                    v = T.Cast(accum, x_again[i, j]) * rstd[i] * T.Cast(accum, Gamma[k * block_C + j])
                    y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -LOG2_E)))
                T.copy(y, Y[bx * block_m, k * block_C])

    return main
