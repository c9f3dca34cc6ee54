"""DeepSeek MLA decode, the ``auto`` schedule: the kernel notebook 04 teaches.

One CTA = one sequence x 64 query heads x one share of the sequence's KV blocks. It is the
online-softmax loop of the single-head-group decode kernel (:mod:`.mqa`) with MLA's shapes, and
what those shapes force:

* ``acc_o`` is 64 x 512 fp32: 256 registers per thread for one 128-thread warpgroup, more than
  the 255 a thread can address. ``wgmma`` needs M >= 64, so the heads cannot be split: two
  consumer warpgroups split the *output columns* (``GemmWarpPolicy.FullCol``), 64 x 256 each.
* With FullCol, ``Q K^T`` also splits its columns (the 64 tokens of a page): each warpgroup
  computes half of every row of scores, but its half of ``P V`` needs the whole row. The kernel
  writes that exchange itself, ``T.copy(acc_s, S_shared)``, and the second GEMM reads P from
  shared memory. The row max and row sum cross the two warpgroups (the compiler emits the
  cross-warpgroup all-reduce).
* The cache is paged: ``block_table[b, i]`` is the physical page of sequence ``b``'s ``i``-th
  page of 64 tokens; each step loads one page of latent vectors (keys and values) and rotary keys.
* Split-KV: with few sequences, ``num_split`` CTAs share one sequence's pages; each writes a
  partial output and its log-sum-exp and a combine kernel merges them (:mod:`.common`).

TileLang derives the rest: the producer warpgroup issuing TMA loads into ``num_stages`` buffers
on mbarriers, ``setmaxnreg``, the layouts of every fragment. The hand-written schedules
(:mod:`.ws`, :mod:`.seesaw`) write those decisions out instead.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from .common import BLOCK_H, DIM_NOPE, DIM_PE, LOG2E, PAGE_SIZE, SUPPORTED_HEADS, decode_dims, \
    decode_prim_func, default_softmax_scale, split_range_macro


def mla_decode_program(h_q: int, dtype: str = "float16", *, split: bool = False,
                       softmax_scale: float | None = None, num_stages: int = 2):
    """The MLA decode ``T.prim_func`` (see the module docstring). With ``split=True`` it holds two
    kernels, attention over ``num_split`` shares of the KV pages and the combine; with
    ``split=False`` one kernel that writes ``Output`` directly.

    Arguments of the returned function (``batch``, ``num_pages``, ``max_pages`` and ``num_split``
    are dynamic: one compiled kernel serves every batch, cache size and split count):
    ``Q (b, h_q, 512)``, ``Q_pe (b, h_q, 64)``, ``KV (num_pages * 64, 512)`` and
    ``K_pe (num_pages * 64, 64)`` (the paged caches viewed as rows), ``block_table (b, max_pages)
    int32``, ``cache_seqlens (b,) int32``, the split-KV workspaces ``lse (b, h_q, num_split)`` and
    ``o_partial (b, h_q, num_split, 512)`` in fp32, and ``Output (b, h_q, 512)``.
    """
    import tilelang
    import tilelang.language as T

    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"h_q must be one of {SUPPORTED_HEADS}, got {h_q}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    # scores stay in the log2 domain: exp(x * scale) = exp2(x * scale * log2(e))
    scale = float((softmax_scale if softmax_scale is not None else default_softmax_scale()) * LOG2E)
    accum = "float32"
    dv, dpe, block_N = DIM_NOPE, DIM_PE, PAGE_SIZE
    valid_h = min(BLOCK_H, h_q)            # h_q = 16 / 32 still computes 64 rows (wgmma's M)
    head_blocks = math.ceil(h_q / BLOCK_H)
    dims = decode_dims(split)
    batch, _, _, num_split = dims
    split_range = split_range_macro(num_split, block_N)

    @T.macro
    def attention(Q, Q_pe, KV, K_pe, block_table, cache_seqlens, lse, o_partial, Output):
        # Launch order (head block, split, sequence): the two 64-head halves of h_q = 128 read the
        # same pages, are neighbours in launch order, and the second read hits L2.
        with T.Kernel(head_blocks, num_split, batch, threads=256) as (hb, sp, bx):
            Q_shared = T.alloc_shared([BLOCK_H, dv], dtype)
            Q_pe_shared = T.alloc_shared([BLOCK_H, dpe], dtype)
            KV_shared = T.alloc_shared([block_N, dv], dtype)       # one page: keys and values
            K_pe_shared = T.alloc_shared([block_N, dpe], dtype)
            S_shared = T.alloc_shared([BLOCK_H, block_N], dtype)   # P, shared by both warpgroups
            acc_s = T.alloc_fragment([BLOCK_H, block_N], accum)
            acc_o = T.alloc_fragment([BLOCK_H, dv], accum)
            m_i = T.alloc_fragment([BLOCK_H], accum)               # running row max (raw scores)
            m_prev = T.alloc_fragment([BLOCK_H], accum)
            alpha = T.alloc_fragment([BLOCK_H], accum)             # rescale of what came before
            l_i = T.alloc_fragment([BLOCK_H], accum)               # softmax denominator
            row_sum = T.alloc_fragment([BLOCK_H], accum)
            T.annotate_layout({S_shared: tilelang.layout.make_swizzled_layout(S_shared)})

            seqlen = cache_seqlens[bx]
            h0 = hb * valid_h
            is_empty, blk_begin, n_steps = split_range(seqlen, sp)   # this CTA's pages
            if valid_h == BLOCK_H:
                T.copy(Q[bx, h0:h0 + BLOCK_H, :], Q_shared)
                T.copy(Q_pe[bx, h0:h0 + BLOCK_H, :], Q_pe_shared)
            else:   # fewer heads than wgmma's 64 rows: zero the padding rows
                for i, j in T.Parallel(BLOCK_H, dv):
                    Q_shared[i, j] = T.if_then_else(i < valid_h, Q[bx, T.min(i, valid_h - 1), j], 0)
                for i, j in T.Parallel(BLOCK_H, dpe):
                    Q_pe_shared[i, j] = T.if_then_else(i < valid_h, Q_pe[bx, T.min(i, valid_h - 1), j], 0)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -T.infinity(accum))

            for k in T.Pipelined(n_steps, num_stages=num_stages):
                page = blk_begin + k
                row0 = block_table[bx, page] * PAGE_SIZE
                T.copy(KV[row0:row0 + block_N, :], KV_shared)
                T.copy(K_pe[row0:row0 + block_N, :], K_pe_shared)
                # S = Q_nope K^T + Q_pe K_pe^T; FullCol: each warpgroup computes 32 of the 64 columns
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol,
                       clear_accum=True)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                # tokens past the end of the sequence do not exist (the page's tail is garbage)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.if_then_else(page * block_N + j < seqlen, acc_s[i, j], -T.infinity(accum))
                # online softmax: the new running max is the max of the old one and this page's
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for i in T.Parallel(BLOCK_H):
                    alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(BLOCK_H):
                    l_i[i] = l_i[i] * alpha[i] + row_sum[i]
                # the exchange: each warpgroup holds half of P's columns; P @ V needs all of them
                T.copy(acc_s, S_shared)
                for i, j in T.Parallel(BLOCK_H, dv):
                    acc_o[i, j] *= alpha[i]
                # O += P V; FullCol: warpgroup w owns output columns [256 w, 256 (w + 1))
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            if split:
                # each split stores its normalised output and log2 of its denominator; an empty
                # split stores 0 and lse = -inf, which the combine weighs by 2^-inf = 0
                for i in T.Parallel(BLOCK_H):
                    if i < valid_h:
                        lse[bx, h0 + i, sp] = T.if_then_else(is_empty, -T.infinity(accum),
                                                             T.log2(l_i[i]) + m_i[i] * scale)
                for i, j in T.Parallel(BLOCK_H, dv):
                    if i < valid_h:
                        o_partial[bx, h0 + i, sp, j] = T.if_then_else(is_empty, 0, acc_o[i, j] / l_i[i])
            else:
                for i, j in T.Parallel(BLOCK_H, dv):
                    if i < valid_h:
                        Output[bx, h0 + i, j] = acc_o[i, j] / l_i[i]

    return decode_prim_func(attention, h_q=h_q, dtype=dtype, split=split, dims=dims)
