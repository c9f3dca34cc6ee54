"""DeepSeek MLA decode (absorbed form) over a paged KV cache, written in TileLang for Hopper.

The problem
-----------
In the absorbed form of Multi-head Latent Attention every query head attends to the *same*
latent cache: per token one 512-wide latent vector ``c`` (serving as both K and V) plus a
64-wide rotary key ``k_pe``. One decode step of one sequence is therefore

    scores[h, t] = (q_nope[h] . c[t] + q_pe[h] . k_pe[t]) * softmax_scale      (576-wide dot)
    out[h]       = sum_t softmax_t(scores[h, :]) * c[t]                       (512-wide output)

for ``h_q`` query heads (128 in DeepSeek-V3; 16/32/64 on a tensor-parallel shard). With 128
heads sharing one KV head this is a real matrix multiplication (M = heads), which is why MLA
decode can be compute-bound, unlike ordinary decode attention.

Cache layout (choice made here)
-------------------------------
Two paged tensors, like FlashMLA's ``blocked_k`` cut in two:

* ``kv_cache``: ``(num_pages, page_size, 1, 512)`` -- the latent vectors (K and V),
* ``pe_cache``: ``(num_pages, page_size, 1, 64)``  -- the rotary keys,

with ``page_size = 64``, ``block_table[b, i]`` = the physical page of sequence ``b``'s logical
page ``i`` and ``cache_seqlens[b]`` = its length (any value >= 1; not a multiple of 64 in
general). Keeping the two parts apart lets each be one rectangular TMA load (a 576-wide row
would have to be cut into a 512 part and a 64 part anyway).

Softmax scale
-------------
A parameter. The default is ``1/sqrt(576)`` (the convention of FlashMLA's and TileLang's MLA
benchmarks). DeepSeek-V3 itself uses ``1/sqrt(192) * mscale**2`` (qk head dim 128 + 64 before
absorption, times the YaRN correction); :func:`deepseek_v3_softmax_scale` computes it. Inside
the kernel scores are kept in the log2 domain (``exp2(x * scale * log2(e))``).

The Hopper design (one CTA = one sequence x 64 query heads x one KV split)
------------------------------------------------------------------------
* ``wgmma`` needs M >= 64, so a block of 64 query heads is the M of both matmuls
  (h_q = 16/32 still computes 64 rows; the extra rows are never stored).
* The output accumulator ``acc_o`` is 64 x 512 fp32 = 256 registers per thread for one
  128-thread warpgroup -- over the 255-register limit. M cannot shrink, so the *output dim* is
  split: two consumer warpgroups each own 64 x 256 of ``acc_o`` (``GemmWarpPolicy.FullCol``).
* With FullCol, Q @ K^T also splits its N (the KV tokens): each warpgroup computes 64 x
  (block_N/2) of the scores. But P @ V needs *all* scores of the row in each warpgroup. The
  kernel writes that exchange itself: ``T.copy(acc_s, S_shared)`` stores the probabilities to
  shared memory, and the second GEMM reads P from ``S_shared``; layout inference derives each
  warpgroup's fragment shapes from the policies.
* Row statistics are reductions over the N axis, which is split across the two warpgroups:
  TileLang lowers ``T.reduce_max`` to warp shuffles plus a cross-warpgroup step through shared
  memory guarded by named barriers. Two choices keep those barriers few: ``batch=2`` reduces
  both rows a thread owns in one call, and the softmax *denominator* is not reduced per block
  at all -- each thread accumulates its own exponentials element-wise (``acc_p``, rescaled by
  the same ``alpha``) and one ``reduce_sum`` runs after the loop (``defer_sum``).
* Launch order ``(head block, split, sequence)``: for h_q = 128 the two CTAs that read the same
  KV blocks are neighbours, run together, and the second read of each block can hit L2.
* h_q = 16 / 32: the tile still has 64 rows; Q is loaded with a predicated copy that zeroes the
  padding rows, and only real rows are stored.
* ``T.Pipelined(..., num_stages=2)`` over KV blocks: TileLang's warp specialization adds a
  producer warpgroup that issues TMA loads of the paged blocks into a double buffer, signalled
  on mbarriers, and ``setmaxnreg`` moves registers from the producer to the consumers.
* Split-KV (FlashDecoding): with few sequences the grid ``batch x heads/64`` cannot fill 132
  SMs, so each sequence's KV blocks are divided among ``num_split`` CTAs which write a partial
  output (fp32) and its log-sum-exp; a small combine kernel merges them. :func:`choose_num_split`
  picks ``num_split`` from batch, heads, lengths and the SM count.
* Ragged lengths: the last KV block of a sequence is read whole (a page always holds 64 rows)
  and its out-of-range tokens get score -inf before the row max; splits that receive no block
  (a sequence shorter than ``num_split`` blocks) write lse = -inf and zeros, which the combine
  weighs by exp2(-inf) = 0.

Shared memory per CTA (fp16/bf16, block_N = 64, 2 stages): Q 64x576 (72 KiB) + 2 x KV 64x576
(144 KiB) + S 64x64 (8 KiB) = 224 KiB of the 227 KiB Hopper allows, which is why the KV block
cannot simply be made larger: block_N = 128 would need 288 KiB for two stages.

Hand-written schedules
----------------------
Two more modules compute the same thing with the warp specialization written by hand (roles,
the program's own mbarriers, ``setmaxnreg``), sm_90a only:

* :mod:`.mla_decode_ws`: a score warpgroup that owns whole rows of S, a value warpgroup, a
  producer;
* :mod:`.mla_decode_seesaw`: both consumer warpgroups score, alternate blocks, so one's softmax
  overlaps the other's matmuls -- :func:`build_mla_decode`'s default on sm_90a.

This module's program is the one notebook 04 takes apart, and the portable one (sm_80 / sm_90
builds). All share the inputs, the split-KV workspaces, :func:`choose_num_split`, the split
ranges (:func:`split_range_macro`), the kernel signature (:func:`decode_prim_func`) and the
combine kernel (:func:`combine_macro`).
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from .common import BLOCK_H, DIM_NOPE, DIM_PE, LOG2E, PAGE_SIZE, SUPPORTED_HEADS, decode_dims, \
    decode_prim_func, default_softmax_scale, split_range_macro


def mla_decode_program(h_q: int, dtype: str = "float16", *, split: bool = False,
                       softmax_scale: float | None = None, block_N: int = 64,
                       num_stages: int = 2, threads: int = 256, defer_sum: bool = True,
                       reduce_batch: int = 2, qk_wait: str = "each"):
    """The MLA decode ``T.prim_func``; with ``split=True`` it holds two kernels (attention over
    ``num_split`` KV splits + the combine), with ``split=False`` one that writes Output directly.

    Arguments of the returned function (``batch``, ``num_pages``, ``max_pages`` and
    ``num_split`` are dynamic, so one compiled kernel serves every batch size, cache size and
    split count; ``num_split`` is read from the shape of ``lse``):

    ``Q (b, h_q, 512)``, ``Q_pe (b, h_q, 64)``, ``KV (num_pages*64, 512)``, ``K_pe (num_pages*64,
    64)`` (the paged caches viewed as rows), ``block_table (b, max_pages) int32``,
    ``cache_seqlens (b,) int32``, workspaces ``lse (b, h_q, num_split) fp32`` and ``o_partial
    (b, h_q, num_split, 512) fp32`` (unused by the ``split=False`` kernel, which requires
    ``num_split == 1``), and ``Output (b, h_q, 512)``.

    Tuning knobs (see ``benchmarks.mla.sweep``): ``block_N`` KV rows per step (32 or 64, must
    divide the page size), ``num_stages`` (TMA buffers; 2 x 64 rows is the shared-memory limit),
    ``defer_sum`` (accumulate the exponentials element-wise and reduce the softmax denominator
    once after the loop instead of a cross-warpgroup ``reduce_sum`` every step) and
    ``reduce_batch`` (rows per ``tl::AllReduce`` call: each thread owns 2 rows, so 2 halves the
    named barriers of the row-max reduction).

    ``qk_wait``: ``"each"`` waits for each of the two Q K^T gemms (512-wide "nope" part, then
    the 64-wide rotary part); ``"single"`` issues the 512-wide part without waiting
    (``T.wgmma_gemm``) so the rotary gemm's wait covers both: one ``warpgroup_wait<0>`` per KV
    block instead of two. ``build_mla_decode`` uses ``"single"`` on sm_90a (measured faster on
    the H200 by ``benchmarks.mla.sweep``) and ``"each"`` elsewhere.
    """
    import tilelang
    import tilelang.language as T

    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"h_q must be one of {SUPPORTED_HEADS}, got {h_q}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    if block_N not in (32, 64) or PAGE_SIZE % block_N:
        raise ValueError(f"block_N must be 32 or 64 (a divisor of the page size {PAGE_SIZE}), got {block_N}")
    if qk_wait not in ("each", "single"):
        raise ValueError(f"qk_wait must be 'each' or 'single', got {qk_wait!r}")
    if threads != 256:
        raise ValueError("threads must be 256: two consumer warpgroups split the 512-wide output")
    scale = float((softmax_scale if softmax_scale is not None else default_softmax_scale()) * LOG2E)
    accum = "float32"
    dv, dpe = DIM_NOPE, DIM_PE
    valid_h = min(BLOCK_H, h_q)            # rows of the 64-row tile that are real heads
    head_blocks = math.ceil(h_q / BLOCK_H)
    assert valid_h == BLOCK_H or head_blocks == 1  # h_q < 64: one head block, h0 == 0
    dims = decode_dims(split)
    batch, _, _, num_split = dims
    split_range = split_range_macro(num_split, block_N)

    @T.macro
    def attention(Q, Q_pe, KV, K_pe, block_table, cache_seqlens, lse, o_partial, Output):
        # Grid order (head block, split, sequence): the CTAs that read the same KV blocks --
        # the two 64-head halves of h_q = 128 -- are neighbours in launch order, run at the
        # same time, and the second read of each block hits L2 instead of HBM.
        with T.Kernel(head_blocks, num_split, batch, threads=threads) as (hb, sp, bx):
            Q_shared = T.alloc_shared([BLOCK_H, dv], dtype)
            Q_pe_shared = T.alloc_shared([BLOCK_H, dpe], dtype)
            KV_shared = T.alloc_shared([block_N, dv], dtype)
            K_pe_shared = T.alloc_shared([block_N, dpe], dtype)
            S_shared = T.alloc_shared([BLOCK_H, block_N], dtype)
            acc_s = T.alloc_fragment([BLOCK_H, block_N], accum)
            acc_o = T.alloc_fragment([BLOCK_H, dv], accum)
            m_i = T.alloc_fragment([BLOCK_H], accum)        # running row max (raw scores)
            m_prev = T.alloc_fragment([BLOCK_H], accum)
            alpha = T.alloc_fragment([BLOCK_H], accum)      # rescale exp2((m_prev - m) * scale)
            l_i = T.alloc_fragment([BLOCK_H], accum)        # softmax denominator
            if defer_sum:
                acc_p = T.alloc_fragment([BLOCK_H, block_N], accum)  # sum of P, per element
            else:
                row_sum = T.alloc_fragment([BLOCK_H], accum)
            if not split and valid_h == BLOCK_H:
                O_shared = T.alloc_shared([BLOCK_H, dv], dtype)
                T.annotate_layout({S_shared: tilelang.layout.make_swizzled_layout(S_shared),
                                   O_shared: tilelang.layout.make_swizzled_layout(O_shared)})
            else:
                T.annotate_layout({S_shared: tilelang.layout.make_swizzled_layout(S_shared)})

            seqlen = cache_seqlens[bx]
            h0 = hb * valid_h
            # this split's share of the sequence's KV blocks (see split_range_macro)
            is_empty, blk_begin, n_steps = split_range(seqlen, sp)

            if valid_h == BLOCK_H:
                T.copy(Q[bx, h0:h0 + BLOCK_H, :], Q_shared)          # TMA
                T.copy(Q_pe[bx, h0:h0 + BLOCK_H, :], Q_pe_shared)
            else:
                # h_q = 16 / 32: the tile still has 64 rows (wgmma M); zero the padding rows.
                for i, j in T.Parallel(BLOCK_H, dv):
                    Q_shared[i, j] = T.if_then_else(i < valid_h, Q[bx, T.min(i, valid_h - 1), j], 0)
                for i, j in T.Parallel(BLOCK_H, dpe):
                    Q_pe_shared[i, j] = T.if_then_else(i < valid_h, Q_pe[bx, T.min(i, valid_h - 1), j], 0)
            T.fill(acc_o, 0)
            T.fill(m_i, -T.infinity(accum))
            if defer_sum:
                T.fill(acc_p, 0)
            else:
                T.fill(l_i, 0)

            for k in T.Pipelined(n_steps, num_stages=num_stages):
                tok0 = (blk_begin + k) * block_N
                row0 = block_table[bx, tok0 // PAGE_SIZE] * PAGE_SIZE + tok0 % PAGE_SIZE
                T.copy(KV[row0:row0 + block_N, :], KV_shared)
                T.copy(K_pe[row0:row0 + block_N, :], K_pe_shared)
                # S = Q_nope K^T + Q_pe K_pe^T; FullCol: warpgroup w computes columns
                # [w * block_N/2, (w+1) * block_N/2) of the 64 x block_N scores.
                if qk_wait == "single":
                    # issue without waiting; the synchronous rotary gemm's wait covers both
                    T.wgmma_gemm(Q_shared, KV_shared, acc_s, transpose_B=True,
                                 policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
                else:
                    T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True,
                           policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                # ragged tail: tokens at or past seqlen do not exist (page rows are garbage)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.if_then_else(tok0 + j < seqlen, acc_s[i, j], -T.infinity(accum))
                # online softmax: new running max (a reduction across both warpgroups)
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False, batch=reduce_batch)
                for i in T.Parallel(BLOCK_H):
                    alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
                if defer_sum:
                    # Each thread keeps the rescaled sum of *its own* P elements; the one
                    # cross-thread reduction happens after the loop.
                    for i, j in T.Parallel(BLOCK_H, block_N):
                        acc_p[i, j] = acc_p[i, j] * alpha[i] + acc_s[i, j]
                else:
                    T.reduce_sum(acc_s, row_sum, dim=1)
                    for i in T.Parallel(BLOCK_H):
                        l_i[i] = l_i[i] * alpha[i] + row_sum[i]
                # The exchange: each warpgroup holds half of P's columns, but its half of
                # P @ V needs all of them -- so P goes through shared memory.
                T.copy(acc_s, S_shared)
                for i, j in T.Parallel(BLOCK_H, dv):
                    acc_o[i, j] *= alpha[i]
                # O += P V; FullCol: warpgroup w owns output columns [256 w, 256 (w+1))
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            if defer_sum:
                T.reduce_sum(acc_p, l_i, dim=1)
            if split:
                # normalise per split; an empty split writes 0 and lse = -inf (weight 0)
                for i, j in T.Parallel(BLOCK_H, dv):
                    acc_o[i, j] = T.if_then_else(is_empty, 0, acc_o[i, j] / l_i[i])
                for i in T.Parallel(BLOCK_H):
                    m_prev[i] = T.if_then_else(is_empty, -T.infinity(accum),
                                               T.log2(l_i[i]) + m_i[i] * scale)
                for i in T.Parallel(BLOCK_H):
                    if i < valid_h:
                        lse[bx, h0 + i, sp] = m_prev[i]
                for i, j in T.Parallel(BLOCK_H, dv):
                    if i < valid_h:
                        o_partial[bx, h0 + i, sp, j] = acc_o[i, j]
            elif valid_h == BLOCK_H:
                for i, j in T.Parallel(BLOCK_H, dv):
                    acc_o[i, j] /= l_i[i]
                T.copy(acc_o, O_shared)
                T.copy(O_shared, Output[bx, h0:h0 + BLOCK_H, :])      # TMA store
            else:
                for i, j in T.Parallel(BLOCK_H, dv):
                    if i < valid_h:
                        Output[bx, i, j] = acc_o[i, j] / l_i[i]

    return decode_prim_func(attention, h_q=h_q, dtype=dtype, split=split, dims=dims)

