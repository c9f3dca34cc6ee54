"""The op's second RMSNorm + SiLU layout: a row owned by ``warps`` whole warps, any number of them.

:func:`.kernel.rmsnorm_silu_program` gives each row a power-of-two group of lanes, because
TileLang 0.1.15's cross-lane sum (``T.reduce_sum`` across threads, ``tl::AllReduce``) pairs lanes
by halves. Where the row's 16-byte vectors fill such a group's last round badly, lanes sit idle for
a whole round (bf16 C = 6176: 772 vectors over 128 lanes x 7 = 896 slots). A row split into ``warps``
contiguous segments, one per warp, can take any number of warps: 5 warps x 32 lanes x 5 vectors
= 800 slots at C = 6176. The sum of squares is then taken in two levels: within each warp (a
32-lane butterfly, ``T.reduce_sum`` along the segment), then across the row's warps through a few
floats of shared memory.

Tile: ``(block_m, warps, L)`` with ``L = 32 x V x 8`` columns a segment, ``V`` vectors a lane;
warp ``w`` of row ``i`` holds columns ``w L ... w L + L - 1``, lane ``t`` of it the vectors
``t, t + 32, ...`` of that segment. Columns past C are read as 0 and never stored.

The op uses it only in the bf16 bands where it was measured faster than the power-of-two rule
(:func:`.op.config_for`); notebook 05b builds and reads it.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
from dataclasses import dataclass

import tilelang.language as T
from tilelang.layout import Fragment

from .kernel import LOG2_E, MAX_VECTORS_PADDED_ROW, VEC, check_channel_width

#: lanes of a warp
WARP = 32


@dataclass(frozen=True)
class WarpSegmentConfig:
    """How a warp-segment kernel is laid out.

    warps:           whole warps that share one row (any number; ``group = 32 x warps`` lanes)
    rows_per_block:  rows a block holds (``threads = group x rows_per_block``)
    min_blocks:      blocks each SM must hold at once (``__launch_bounds__``'s second number)
    """

    warps: int
    rows_per_block: int = 1
    min_blocks: int = 0

    @property
    def group(self) -> int:
        return WARP * self.warps

    @property
    def threads(self) -> int:
        return self.group * self.rows_per_block

    def block_m(self) -> int:
        return self.rows_per_block

    def as_dict(self) -> dict:
        return {"layout": "warp_segments", "warps": self.warps, "group": self.group, "threads": self.threads,
                "rows_per_block": self.rows_per_block, "fast_sigmoid": True, "min_blocks": self.min_blocks,
                "block_m": self.block_m()}


#: the fields a record's config stores that :class:`WarpSegmentConfig` reads back
SEGMENT_CONFIG_FIELDS = ("warps", "rows_per_block", "min_blocks")


def segment_vectors(C: int, warps: int) -> int:
    """16-byte vectors each lane holds: the row's C / 8 vectors over ``32 x warps`` lanes, rounded up."""
    return -(-(C // VEC) // (WARP * warps))


def check_segment_config(C: int, config: WarpSegmentConfig) -> None:
    """Raise ValueError unless ``config`` lays out a row of C channels with every warp holding data:
    C a multiple of 8, at most ``MAX_VECTORS_PADDED_ROW`` vectors a lane (more and the capped
    registers spill), at most 1024 threads a block."""
    check_channel_width(C)
    if config.warps < 1 or config.rows_per_block < 1 or config.threads > 1024:
        raise ValueError(f"{config}: warps and rows_per_block must be >= 1 and the block at most 1024 threads")
    V = segment_vectors(C, config.warps)
    if V > MAX_VECTORS_PADDED_ROW:
        raise ValueError(f"{config}: {V} vectors a lane at C = {C}; at most {MAX_VECTORS_PADDED_ROW} (use more warps)")
    if (config.warps - 1) * WARP * V * VEC >= C:
        raise ValueError(f"{config}: at C = {C} the last warp of a row would hold no channel (use fewer warps)")


def warp_segment_layout(block_m: int, warps: int, L: int, threads: int) -> Fragment:
    """(block_m, warps, L) tile: row i, segment w -> warp w of the row's group; vectors round-robin
    over the warp's 32 lanes."""
    rows_per_pass = threads // (WARP * warps)

    def thread_fn(i, w, j):
        return (i % rows_per_pass) * (WARP * warps) + w * WARP + (j // VEC) % WARP

    def index_fn(i, w, j):
        return (i // rows_per_pass) * (L // WARP) + (j // (VEC * WARP)) * VEC + j % VEC

    return Fragment([block_m, warps, L], forward_thread_fn=thread_fn, forward_index_fn=index_fn)


def warp_sums_layout(block_m: int, warps: int, threads: int) -> Fragment:
    """(block_m, warps) per-warp sums, each held (replicated) by the 32 lanes of its warp."""
    rows_per_pass = threads // (WARP * warps)

    def thread_fn(i, w, lane):
        return (i % rows_per_pass) * (WARP * warps) + w * WARP + lane

    def index_fn(i, w):
        return i // rows_per_pass

    return Fragment([block_m, warps], forward_thread_fn=thread_fn, forward_index_fn=index_fn, replicate=WARP)


def warp_segment_rmsnorm_silu_program(C: int, dtype: str, config: WarpSegmentConfig):
    """``main(X[m, C], gamma[C], Y[m, C], eps)`` with dynamic m, a row held by ``config.warps`` warps."""
    check_segment_config(C, config)
    warps, threads, block_m = config.warps, config.threads, config.block_m()
    L = WARP * segment_vectors(C, warps) * VEC  # columns a segment (the last one padded)
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
            if config.min_blocks:
                T.annotate_min_blocks_per_sm(config.min_blocks)
            x = T.alloc_fragment((block_m, warps, L), dtype)
            sq = T.alloc_fragment((block_m, warps, L), accum)
            warp_sums = T.alloc_fragment((block_m, warps), accum)
            warp_sums_shared = T.alloc_shared((block_m, warps), accum)
            rstd = T.alloc_fragment((block_m,), accum)
            y = T.alloc_fragment((block_m, warps, L), dtype)
            T.annotate_layout({
                x: warp_segment_layout(block_m, warps, L, threads),
                sq: warp_segment_layout(block_m, warps, L, threads),
                y: warp_segment_layout(block_m, warps, L, threads),
                warp_sums: warp_sums_layout(block_m, warps, threads),
            })
            # 16-byte loads; the padding past C and rows past m read as 0 (they add nothing to the sum)
            for i, w, j in T.Parallel(block_m, warps, L):
                x[i, w, j] = T.if_then_else(w * L + j < C and bx * block_m + i < m,
                                            X[bx * block_m + i, w * L + j], T.Cast(dtype, 0))
            for i, w, j in T.Parallel(block_m, warps, L):
                sq[i, w, j] = T.Cast(accum, x[i, w, j]) * T.Cast(accum, x[i, w, j])
            T.reduce_sum(sq, warp_sums, dim=2)           # level 1: within each warp (32 lanes)
            T.copy(warp_sums, warp_sums_shared)          # level 2: across the row's warps
            for i in T.Parallel(block_m):
                rstd[i] = 0.0
                for w in T.serial(warps):
                    rstd[i] += warp_sums_shared[i, w]
                rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)
            # gamma's padding vectors are not read: TileLang guards each 16-byte load against C
            for i, w, j in T.Parallel(block_m, warps, L):
                v = T.Cast(accum, x[i, w, j]) * rstd[i] * T.Cast(accum, Gamma[w * L + j])
                y[i, w, j] = T.Cast(dtype, v * T.fast_rcp(1.0 + T.exp2(v * -LOG2_E)))
            for i, w, j in T.Parallel(block_m, warps, L):
                if w * L + j < C and bx * block_m + i < m:
                    Y[bx * block_m + i, w * L + j] = y[i, w, j]

    return main
