"""RMSNorm + SiLU with a row owned by W whole warps, W not a power of two (probe, not the lesson).

lessons/rmsnorm/kernel.py gives each row a power-of-two group of lanes, because TileLang 0.1.15's
cross-lane sum (tl::AllReduce) pairs lanes by halves. Where the row's 16-byte vectors fill that
group's last round badly (C = 7200 ... 7328: 900-916 vectors over 256 lanes x 4 = 1024 slots),
a group of W = 5 or 6 warps fills 0.94-0.95 of its slots. The sum is then taken in two levels:
within each warp (32 lanes: the butterfly), and across the W warps of the row through shared memory.

Tile: (block_m, W, L) with L = 32 lanes x V vectors x 8; warp w of row i holds the contiguous
columns w*L ... w*L + L - 1 of the row, lane t of it the vectors t, t + 32, ... of that segment.
"""
import tilelang.language as T
from tilelang.layout import Fragment

VEC = 8
LOG2_E = 1.4426950408889634


def warp_segment_layout(block_m, W, L, threads):
    rows_per_pass = threads // (32 * W)

    def thread_fn(i, w, l):
        return (i % rows_per_pass) * (32 * W) + w * 32 + (l // VEC) % 32

    def index_fn(i, w, l):
        return (i // rows_per_pass) * (L // 32) + (l // (VEC * 32)) * VEC + l % VEC

    return Fragment([block_m, W, L], forward_thread_fn=thread_fn, forward_index_fn=index_fn)


def partial_layout(block_m, W, threads):
    """(block_m, W) per-warp sums: replicated over the warp's 32 lanes."""
    rows_per_pass = threads // (32 * W)

    def thread_fn(i, w, rep):
        return (i % rows_per_pass) * (32 * W) + w * 32 + rep

    def index_fn(i, w, rep):
        return i // rows_per_pass

    return Fragment([block_m, W], forward_thread_fn=thread_fn, forward_index_fn=index_fn, replicate=32)


def program(C, dtype, W, V, rows_per_block=1, min_blocks=0):
    L = 32 * V * VEC
    assert W * L >= C and (W - 1) * L < C, (C, W, V)
    threads = 32 * W * rows_per_block
    block_m = rows_per_block
    accum = "float32"
    inv_c = 1.0 / C
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype), Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            if min_blocks:
                T.annotate_min_blocks_per_sm(min_blocks)
            x = T.alloc_fragment((block_m, W, L), dtype)
            sq = T.alloc_fragment((block_m, W, L), accum)
            part = T.alloc_fragment((block_m, W), accum)
            part_s = T.alloc_shared((block_m, W), accum)
            rstd = T.alloc_fragment((block_m,), accum)
            y = T.alloc_fragment((block_m, W, L), dtype)
            T.annotate_layout({x: warp_segment_layout(block_m, W, L, threads),
                               sq: warp_segment_layout(block_m, W, L, threads),
                               y: warp_segment_layout(block_m, W, L, threads)})
            for i, w, l in T.Parallel(block_m, W, L):
                x[i, w, l] = T.if_then_else(w * L + l < C and bx * block_m + i < m,
                                            X[bx * block_m + i, w * L + l], T.Cast(dtype, 0))
            for i, w, l in T.Parallel(block_m, W, L):
                sq[i, w, l] = T.Cast(accum, x[i, w, l]) * T.Cast(accum, x[i, w, l])
            T.reduce_sum(sq, part, dim=2)           # within each warp: 32 lanes
            T.copy(part, part_s)
            for i in T.Parallel(block_m):
                s = T.alloc_var(accum)
                s = 0.0
                for w in T.serial(W):
                    s += part_s[i, w]
                rstd[i] = T.rsqrt(s * inv_c + eps)
            # gamma read in the SiLU loop: TileLang predicates each 16-byte vector against C
            for i, w, l in T.Parallel(block_m, W, L):
                v = T.Cast(accum, x[i, w, l]) * rstd[i] * T.Cast(accum, Gamma[w * L + l])
                y[i, w, l] = T.Cast(dtype, v * T.fast_rcp(1.0 + T.exp2(v * -LOG2_E)))
            for i, w, l in T.Parallel(block_m, W, L):
                if w * L + l < C:
                    Y[bx * block_m + i, w * L + l] = y[i, w, l]

    return main
