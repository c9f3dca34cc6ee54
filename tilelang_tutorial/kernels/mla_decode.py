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

import functools
import math
import threading

from .. import runtime

#: Sizes fixed by the DeepSeek-V2/V3 MLA architecture (absorbed form).
DIM_NOPE = 512      # latent width: K (first part) and V
DIM_PE = 64         # rotary part of K
PAGE_SIZE = 64      # tokens per page of the paged cache
BLOCK_H = 64        # query heads per CTA (wgmma M)
SUPPORTED_HEADS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634

#: Default tile configuration (see :func:`tilelang_tutorial.benchmarks.mla.sweep`).
DEFAULT_CONFIG = {"block_N": 64, "num_stages": 2, "threads": 256}
#: SM count assumed when no GPU is visible (H100 SXM / H200: 132).
DEFAULT_SM_COUNT = 132
MAX_SPLIT = 64


def default_softmax_scale() -> float:
    """1/sqrt(576): the scale FlashMLA's and TileLang's benchmarks use (our default)."""
    return 1.0 / math.sqrt(DIM_NOPE + DIM_PE)


def deepseek_v3_softmax_scale(qk_nope_head_dim: int = 128, qk_rope_head_dim: int = 64,
                              rope_factor: float = 40.0, mscale_all_dim: float = 1.0) -> float:
    """DeepSeek-V3's scale: ``1/sqrt(qk_head_dim) * mscale**2`` with the YaRN mscale.

    Absorbing W_UK into the query does not change the scale, so it is still based on the
    192-wide (128 + 64) head dim of the un-absorbed model.
    """
    scale = (qk_nope_head_dim + qk_rope_head_dim) ** -0.5
    if rope_factor > 1.0 and mscale_all_dim:
        mscale = 0.1 * mscale_all_dim * math.log(rope_factor) + 1.0
        scale *= mscale * mscale
    return scale


# --------------------------------------------------------------------------------------------
# split-KV heuristic
# --------------------------------------------------------------------------------------------
def split_cost(batch: int, h_q: int, max_seqlen: int, num_split: int, *,
               sm_count: int = DEFAULT_SM_COUNT, block_N: int = 64) -> float:
    """Estimated run time of a split choice, in units of "one KV block step of one CTA".

    * the CTAs (``batch * ceil(h_q/64) * num_split``, one per SM at a time -- the shared-memory
      footprint allows one) run in ``waves``; each wave lasts as long as its longest CTA:
      ``ceil(n_blocks / num_split)`` steps plus ~1 step for loading Q and the epilogue;
    * with a split, each CTA also writes a 64 x 512 fp32 partial (128 KiB, ~2 KV blocks of
      traffic), and the combine reads them all back, spread over the SMs.
    """
    ctas = batch * math.ceil(h_q / BLOCK_H) * num_split
    n_blocks = math.ceil(max_seqlen / block_N)
    waves = math.ceil(ctas / sm_count)
    per_cta = math.ceil(n_blocks / num_split) + 1 + (2 if num_split > 1 else 0)
    combine = 2.0 * ctas / sm_count if num_split > 1 else 0.0
    return waves * per_cta + combine


def choose_num_split(batch: int, h_q: int, max_seqlen: int, *, sm_count: int = DEFAULT_SM_COUNT,
                     block_N: int = 64, max_split: int = MAX_SPLIT) -> int:
    """How many CTAs share one sequence's KV blocks (1 = no split): the ``num_split`` in
    ``1..max_split`` (and at most one per KV block) with the smallest :func:`split_cost`,
    the smallest such one on ties. Large batches fill the 132 SMs on their own (-> 1); one
    sequence with 128 heads has only 2 CTAs and gets split up to 64 ways.
    """
    if batch < 1 or h_q < 1 or max_seqlen < 1:
        raise ValueError("batch, h_q and max_seqlen must be >= 1")
    n_blocks = math.ceil(max_seqlen / block_N)
    candidates = range(1, max(1, min(max_split, n_blocks)) + 1)
    return min(candidates, key=lambda s: (split_cost(batch, h_q, max_seqlen, s, sm_count=sm_count,
                                                     block_N=block_N), s))


# --------------------------------------------------------------------------------------------
# the TileLang program
# --------------------------------------------------------------------------------------------
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


def decode_dims(split: bool):
    """The kernel's dynamic sizes ``(batch, num_pages, max_pages, num_split)``; ``num_split``
    is the constant 1 without a split. One compiled kernel serves them all."""
    import tilelang.language as T

    return (T.dynamic("batch"), T.dynamic("num_pages"), T.dynamic("max_pages"),
            T.dynamic("num_split") if split else 1)


def split_range_macro(num_split, block_N: int):
    """``split_range(seqlen, sp) -> (is_empty, blk_begin, n_steps)`` as a ``T.macro`` (shared by
    all schedules): split ``sp``'s share of a sequence's KV blocks, in whole blocks, so only the
    sequence's last block can be partial.

    A split whose share is empty (a sequence shorter than ``num_split`` blocks) still runs one
    step on the last block -- so its TMA loads are waited for before the CTA exits -- and
    reports itself empty (it then writes lse = -inf, which the combine weighs by 0).
    """
    import tilelang.language as T

    @T.macro
    def split_range(seqlen, sp):
        n_blocks = T.ceildiv(seqlen, block_N)
        # truncdiv: both operands are positive; plain C division keeps the producer's index
        # math small (it runs with few registers after setmaxnreg)
        per_split = T.truncdiv(n_blocks + num_split - 1, num_split)
        is_empty = sp * per_split >= n_blocks
        blk_begin = T.min(sp * per_split, n_blocks - 1)
        n_steps = T.max(T.min(sp * per_split + per_split, n_blocks), blk_begin + 1) - blk_begin
        return is_empty, blk_begin, n_steps

    return split_range


def decode_prim_func(attention, *, h_q: int, dtype: str, split: bool, dims):
    """The kernel's ``T.prim_func`` around a schedule's ``attention`` macro (shared by all
    schedules): the arguments documented in :func:`mla_decode_program`, then the combine kernel
    (:func:`combine_macro`) when ``split``. ``dims``: :func:`decode_dims`."""
    import tilelang.language as T

    accum = "float32"
    dv, dpe = DIM_NOPE, DIM_PE
    batch, num_pages, max_pages, num_split = dims
    combine = combine_macro(h_q, batch, num_split)

    @T.prim_func
    def mla_decode_kernel(
        Q: T.Tensor([batch, h_q, dv], dtype),
        Q_pe: T.Tensor([batch, h_q, dpe], dtype),
        KV: T.Tensor([num_pages * PAGE_SIZE, dv], dtype),
        K_pe: T.Tensor([num_pages * PAGE_SIZE, dpe], dtype),
        block_table: T.Tensor([batch, max_pages], "int32"),
        cache_seqlens: T.Tensor([batch], "int32"),
        lse: T.Tensor([batch, h_q, num_split], accum),
        o_partial: T.Tensor([batch, h_q, num_split, dv], accum),
        Output: T.Tensor([batch, h_q, dv], dtype),
    ):
        attention(Q, Q_pe, KV, K_pe, block_table, cache_seqlens, lse, o_partial, Output)
        if split:
            combine(lse, o_partial, Output)

    return mla_decode_kernel


def combine_macro(h_q: int, batch, num_split):
    """The split-KV combine kernel as a ``T.macro`` (shared by both schedules):
    ``out = sum_s 2^(lse_s - lse_total) * o_s`` for every (head, sequence).

    One CTA per (head, sequence), 128 threads, 4 output columns each. The weights are computed
    once in shared memory by one thread per split, so the loop over splits only loads the
    partial outputs -- and it is unrolled 16 ways, so 16 independent loads are in flight per
    thread instead of one load's full latency per split.

    Tried on the H200 (seesaw schedule, batch 1, kv 32768, 64 splits: 36.7 us) and slower, so
    not kept: letting this kernel launch early (programmatic dependent launch: a trigger at the
    start of the attention kernel, ``griddepcontrol.wait`` here) -- 39.2 us; partial outputs in
    fp16 instead of fp32 on top of that, halving their traffic -- 41.0 us.

    Also tried and not kept: no second kernel at all -- the attention kernel launched
    cooperatively, a grid barrier (``T.sync_grid()``) after the partial outputs, then each CTA
    combining its share of the rows (correct on every test shape). Batch 1, kv 32768: 37.2 ->
    36.6 us; batch 1, kv 8192: 24.2 -> 23.0 us; but batch 4, kv 32768 (four rows per CTA):
    82.6 -> 86.5 us. The barrier plus the in-kernel combine took as long as this kernel and the
    gap before it (~6 us at batch 1): either way every partial output (16 MiB of fp32 at batch
    1) is read back from L2, so little was left to save.
    """
    import tilelang.language as T

    accum = "float32"
    dv = DIM_NOPE

    @T.macro
    def combine(lse, o_partial, Output):
        with T.Kernel(h_q, batch, threads=128) as (hx, bx):
            lse_s = T.alloc_shared([MAX_SPLIT], accum)
            w_s = T.alloc_shared([MAX_SPLIT], accum)
            o = T.alloc_fragment([dv], accum)
            lse_max = T.alloc_var(accum)
            total = T.alloc_var(accum)
            tx = T.get_thread_binding()
            if tx < MAX_SPLIT:
                lse_s[tx] = T.if_then_else(tx < num_split, lse[bx, hx, T.min(tx, num_split - 1)],
                                           -T.infinity(accum))
            T.sync_threads()
            lse_max = -T.infinity(accum)
            for s in T.serial(MAX_SPLIT):
                lse_max = T.max(lse_max, lse_s[s])
            total = 0
            for s in T.serial(MAX_SPLIT):
                total += T.exp2(lse_s[s] - lse_max)       # empty or absent split: 2^-inf = 0
            if tx < MAX_SPLIT:
                w_s[tx] = T.exp2(lse_s[tx] - lse_max) / total
            T.sync_threads()
            T.clear(o)
            for s in T.unroll(num_split, unroll_factor=16):
                for j in T.Parallel(dv):
                    o[j] += w_s[s] * o_partial[bx, hx, s, j]
            for j in T.Parallel(dv):
                Output[bx, hx, j] = o[j]

    return combine


# --------------------------------------------------------------------------------------------
# building
# --------------------------------------------------------------------------------------------
#: Architectures this kernel is built for. sm_90a gets the warp-specialized TMA + wgmma design;
#: sm_80 / sm_90 (no 'a': no wgmma/setmaxnreg) get the same program lowered to mma.sync and
#: cp.async with one KV buffer (A100's 164 KiB of shared memory holds Q + one 64-row block).
#: sm_86 / sm_89 have at most 99 KiB of shared memory per block, less than Q + one KV block
#: (152 KiB), so they are refused with a clear error.
ARCH_STAGES = {"sm_90a": None, "sm_90": 1, "sm_80": 1}
#: "auto": the program above (TileLang derives the warpgroup split and the producer);
#: "ws": hand-written warp specialization, a score and a value warpgroup (:mod:`.mla_decode_ws`);
#: "seesaw": hand-written, both warpgroups score alternate blocks (:mod:`.mla_decode_seesaw`).
SCHEDULES = ("auto", "ws", "seesaw")
#: the hand-written schedules: sm_90a only, one tile configuration each
HAND_WRITTEN = ("ws", "seesaw")
#: what ``schedule=None`` means on sm_90a with the default tile knobs (fastest on the H200 at
#: the b = 128 points, level elsewhere: see results/mla.json, which keeps all three)
DEFAULT_SM90A_SCHEDULE = "seesaw"


class UnsupportedArchError(ValueError):
    """The MLA decode kernel cannot be built for this architecture."""


def _stages_for(arch: str, num_stages: int) -> int:
    if arch not in ARCH_STAGES:
        raise UnsupportedArchError(
            f"MLA decode needs >= 152 KiB of shared memory per block (Q 64x576 + one 64x576 KV "
            f"block); {arch} offers at most 99 KiB. Supported: {', '.join(ARCH_STAGES)} "
            f"(sm_90a is the warp-specialized Hopper design).")
    cap = ARCH_STAGES[arch]
    return num_stages if cap is None else min(num_stages, cap)


#: TileLang's eager builder is not safe to run from several threads on one Python function
#: (``prebuild`` builds many configurations at once, and every schedule's program goes through
#: :func:`decode_prim_func`): the programs are built one at a time, the slow part -- lowering
#: and nvcc -- still runs in parallel.
_PROGRAM_LOCK = threading.Lock()


def _program(h_q, dtype, split, softmax_scale, block_N, num_stages, defer_sum, reduce_batch, arch,
             qk_wait, schedule):
    if schedule in HAND_WRITTEN:   # mla_decode_<schedule>.py: mla_decode_<schedule>_program
        import importlib

        module = importlib.import_module(f"{__package__}.mla_decode_{schedule}")
        program = getattr(module, f"mla_decode_{schedule}_program")
        return program(h_q, dtype, split=split, softmax_scale=softmax_scale)
    return mla_decode_program(h_q, dtype, split=split, softmax_scale=softmax_scale,
                              block_N=block_N, num_stages=_stages_for(arch, num_stages),
                              defer_sum=defer_sum, reduce_batch=reduce_batch, qk_wait=qk_wait)


@functools.lru_cache(maxsize=None)
def _build(h_q, dtype, split, softmax_scale, block_N, num_stages, defer_sum, reduce_batch, arch,
           qk_wait, schedule):
    with _PROGRAM_LOCK:
        prog = _program(h_q, dtype, split, softmax_scale, block_N, num_stages, defer_sum,
                        reduce_batch, arch, qk_wait, schedule)
    return runtime.compile_kernel(prog, arch=arch)


def resolve_schedule(schedule: str | None, arch: str | None = None, **knobs) -> str:
    """The schedule :func:`build_mla_decode` uses: ``schedule`` itself, or for ``None``
    :data:`DEFAULT_SM90A_SCHEDULE` on sm_90a with default tile knobs and ``"auto"`` otherwise."""
    if schedule is not None:
        return schedule
    arch = arch or runtime.current_arch()
    defaults = {"block_N": 64, "num_stages": 2, "defer_sum": True, "reduce_batch": 2, "qk_wait": None}
    default_knobs = all(knobs.get(k, v) == v for k, v in defaults.items())
    return DEFAULT_SM90A_SCHEDULE if arch == "sm_90a" and default_knobs else "auto"


def build_mla_decode(h_q: int, dtype: str = "float16", *, split: bool = False,
                     softmax_scale: float | None = None, block_N: int = DEFAULT_CONFIG["block_N"],
                     num_stages: int = DEFAULT_CONFIG["num_stages"], defer_sum: bool = True,
                     reduce_batch: int = 2, qk_wait: str | None = None,
                     schedule: str | None = None, arch: str | None = None):
    """Compile (once per configuration and architecture) the MLA decode kernel.

    Batch size, cache size, block-table width and ``num_split`` are dynamic, so the cache key is
    only the configuration: heads, dtype, split or not, scale, schedule and the tile knobs.

    ``schedule``: ``"auto"`` (:func:`mla_decode_program`: TileLang derives the warpgroup split
    and the producer), ``"ws"`` or ``"seesaw"`` (:mod:`.mla_decode_ws`,
    :mod:`.mla_decode_seesaw`: hand-written warp specialization, sm_90a only, one tile
    configuration). ``None`` picks :data:`DEFAULT_SM90A_SCHEDULE` on sm_90a when the tile knobs
    are at their defaults and ``"auto"`` otherwise (``results/mla.json`` records all three).
    """
    arch = arch or runtime.current_arch()
    _stages_for(arch, num_stages)  # a clear error before any compiling
    default_knobs = (block_N, num_stages, defer_sum, reduce_batch, qk_wait) == (64, 2, True, 2, None)
    schedule = resolve_schedule(schedule, arch, block_N=block_N, num_stages=num_stages,
                                defer_sum=defer_sum, reduce_batch=reduce_batch, qk_wait=qk_wait)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule in HAND_WRITTEN:
        if arch != "sm_90a":
            raise UnsupportedArchError(f"schedule={schedule!r} is written for sm_90a (TMA, wgmma, setmaxnreg), not {arch}")
        if not default_knobs:
            raise ValueError(f"schedule={schedule!r} has one fixed tile configuration; the tile knobs "
                             "(block_N, num_stages, defer_sum, reduce_batch, qk_wait) belong to schedule='auto'")
    if qk_wait is None:  # the faster schedule where the hardware has asynchronous wgmma
        qk_wait = "single" if arch == "sm_90a" else "each"
    if qk_wait != "each" and arch != "sm_90a":
        raise UnsupportedArchError(f"qk_wait='single' uses asynchronous wgmma: sm_90a only, not {arch}")
    scale = float(softmax_scale) if softmax_scale is not None else default_softmax_scale()
    return _build(int(h_q), str(dtype), bool(split), scale, int(block_N), int(num_stages),
                  bool(defer_sum), int(reduce_batch), arch, str(qk_wait), schedule)


def prebuild(configs, *, arch: str | None = None, workers: int | None = None) -> list:
    """Compile several configurations at once (``configs``: dicts of ``build_mla_decode``
    keyword arguments) with :func:`runtime.compile_parallel`; the kernels land in the same
    lru_cache. Raises the first configuration's error if any failed to build."""
    jobs = [tuple(sorted({"arch": arch, **c}.items())) for c in configs]
    built = runtime.compile_parallel(jobs, lambda job: build_mla_decode(**dict(job)), workers=workers,
                                     verbose=False)
    for job in jobs:
        if isinstance(built[job], Exception):
            raise built[job]
    return [built[job] for job in jobs]


# --------------------------------------------------------------------------------------------
# reference
# --------------------------------------------------------------------------------------------
def mla_decode_reference(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                         softmax_scale: float | None = None, *, dtype=None, return_lse: bool = False):
    """Plain torch MLA decode over the paged cache, in fp32 (or ``dtype``), one sequence at a time.

    Gathers each sequence's pages through ``block_table``, keeps its first ``cache_seqlens[b]``
    tokens and computes ``softmax(q k^T * scale) @ c``. Runs on any device (CPU included).
    With ``return_lse`` also returns the natural-log log-sum-exp of the scaled scores (b, h_q).
    """
    import torch

    dtype = dtype or torch.float32
    scale = softmax_scale if softmax_scale is not None else default_softmax_scale()
    b, h_q, dv = q_nope.shape
    page = kv_cache.shape[1]
    kv = kv_cache.reshape(kv_cache.shape[0], page, -1)
    pe = pe_cache.reshape(pe_cache.shape[0], page, -1)
    out = torch.empty(b, h_q, dv, dtype=dtype, device=q_nope.device)
    lse = torch.empty(b, h_q, dtype=dtype, device=q_nope.device)
    lens = [int(x) for x in cache_seqlens.tolist()]
    for i, n in enumerate(lens):
        pages = block_table[i, : math.ceil(n / page)].long()
        c = kv[pages].reshape(-1, dv)[:n].to(dtype)            # (n, 512): keys and values
        k_pe = pe[pages].reshape(-1, pe.shape[-1])[:n].to(dtype)  # (n, 64)
        s = (q_nope[i].to(dtype) @ c.T + q_pe[i].to(dtype) @ k_pe.T) * scale   # (h_q, n)
        lse[i] = torch.logsumexp(s, dim=-1)
        out[i] = torch.softmax(s, dim=-1) @ c
    return (out, lse) if return_lse else out


# --------------------------------------------------------------------------------------------
# the op
# --------------------------------------------------------------------------------------------
def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                    num_split=None, *, device_type: str | None = "cuda"):
    """Check every input; raise a ValueError/TypeError that names the problem.

    Shapes, dtypes and the block table are checked first (on any device, so these errors are
    testable without a GPU), then the device. Returns ``(batch, h_q, max_seqlen)``.
    """
    import torch

    from .. import checks

    act = (torch.float16, torch.bfloat16)
    checks.check_tensor(q_nope, "q_nope", dtype=act, device_type=None, ndim=3)
    b, h_q, dv = q_nope.shape
    if dv != DIM_NOPE:
        raise ValueError(f"q_nope must be (batch, heads, {DIM_NOPE}); got last dimension {dv}")
    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"q_nope has {h_q} heads; supported head counts are {SUPPORTED_HEADS}")
    if b < 1:
        raise ValueError("batch must be >= 1")
    checks.check_tensor(q_pe, "q_pe", dtype=q_nope.dtype, device_type=None, ndim=3,
                        shape=(b, h_q, DIM_PE))
    checks.check_tensor(kv_cache, "kv_cache", dtype=q_nope.dtype, device_type=None, ndim=4,
                        shape=(None, PAGE_SIZE, 1, DIM_NOPE))
    num_pages = kv_cache.shape[0]
    checks.check_tensor(pe_cache, "pe_cache", dtype=q_nope.dtype, device_type=None, ndim=4,
                        shape=(num_pages, PAGE_SIZE, 1, DIM_PE))
    checks.check_tensor(block_table, "block_table", dtype=torch.int32, device_type=None, ndim=2,
                        shape=(b, None))
    checks.check_tensor(cache_seqlens, "cache_seqlens", dtype=torch.int32, device_type=None,
                        ndim=1, shape=(b,))
    if num_pages < 1:
        raise ValueError("kv_cache has no pages")
    if num_split is not None and (not isinstance(num_split, int) or not 1 <= num_split <= MAX_SPLIT):
        raise ValueError(f"num_split must be None (automatic) or an int in 1..{MAX_SPLIT}, got {num_split!r}")
    devices = {t.device for t in (q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens)}
    if len(devices) > 1:
        raise ValueError(f"all inputs must be on one device, got {sorted(map(str, devices))}")
    lens = cache_seqlens.detach().to("cpu")
    if int(lens.min()) < 1:
        raise ValueError(f"cache_seqlens must be >= 1 (got min {int(lens.min())})")
    max_len = int(lens.max())
    need = math.ceil(max_len / PAGE_SIZE)
    if block_table.shape[1] < need:
        raise ValueError(
            f"block_table is too short for cache_seqlens: the longest sequence ({max_len} tokens) "
            f"needs {need} pages of {PAGE_SIZE}, but block_table has {block_table.shape[1]} columns")
    # every page a sequence uses must exist in the cache
    used = torch.arange(block_table.shape[1]) < ((lens + PAGE_SIZE - 1) // PAGE_SIZE)[:, None]
    bt = block_table.detach().to("cpu")[used]
    if bt.numel() and (int(bt.min()) < 0 or int(bt.max()) >= num_pages):
        raise ValueError(f"block_table holds page ids outside [0, {num_pages}) for used pages "
                         f"(min {int(bt.min())}, max {int(bt.max())})")
    if device_type is not None:
        for name, t in (("q_nope", q_nope), ("q_pe", q_pe), ("kv_cache", kv_cache),
                        ("pe_cache", pe_cache), ("block_table", block_table),
                        ("cache_seqlens", cache_seqlens)):
            checks.check_tensor(t, name, device_type=device_type)
    return b, h_q, max_len


def sm_count() -> int:
    """SMs of the visible GPU (132 on an H100/H200 SXM), or that default without a GPU."""
    if runtime.gpu_available():
        import torch

        return torch.cuda.get_device_properties(0).multi_processor_count
    return DEFAULT_SM_COUNT


class MLADecodeLaunch:
    """A prepared launch: compiled kernel + preallocated workspaces, no checks, no host sync.

    ``mla_decode`` validates and then uses one of these; benchmarks time ``launch()`` directly
    (like serving systems, which plan the split once per batch step).
    """

    def __init__(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *,
                 num_split: int, softmax_scale: float | None = None, out=None, **config):
        import torch

        b, h_q, _ = q_nope.shape
        self.num_split = num_split
        config = dict(config)
        knobs = {k: v for k, v in config.items() if k not in ("schedule", "arch")}
        config["schedule"] = resolve_schedule(config.get("schedule"), config.get("arch"), **knobs)
        self.schedule = config["schedule"]
        self.kernel = build_mla_decode(h_q, _dtype_name(q_nope), split=num_split > 1,
                                       softmax_scale=softmax_scale, **config)
        dev = q_nope.device
        self.lse = torch.empty(b, h_q, num_split, dtype=torch.float32, device=dev)
        # With num_split == 1 the kernel writes Output directly and never touches lse or
        # o_partial, but the signature still has them: (b, h_q, 1[, 512]) fp32.
        self.o_partial = torch.empty(b, h_q, num_split if num_split > 1 else 1, DIM_NOPE,
                                     dtype=torch.float32, device=dev)
        self.out = out if out is not None else torch.empty_like(q_nope)
        self.args = (q_nope, q_pe, kv_cache.view(-1, DIM_NOPE), pe_cache.view(-1, DIM_PE),
                     block_table, cache_seqlens, self.lse, self.o_partial, self.out)

    def launch(self):
        self.kernel(*self.args)
        return self.out


def mla_decode(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, num_split=None,
               softmax_scale: float | None = None, *, out=None, **config):
    """MLA decode attention over a paged latent cache (see the module docstring for shapes).

    ``num_split=None`` chooses the split-KV factor with :func:`choose_num_split`;
    ``softmax_scale=None`` means ``1/sqrt(576)``. Returns ``(batch, h_q, 512)`` in q's dtype.
    """
    b, h_q, max_len = validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table,
                                      cache_seqlens, num_split)
    runtime.require_gpu("mla_decode")
    if num_split is None:
        num_split = choose_num_split(b, h_q, max_len, sm_count=sm_count(),
                                     block_N=config.get("block_N", DEFAULT_CONFIG["block_N"]))
    return MLADecodeLaunch(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                           num_split=num_split, softmax_scale=softmax_scale, out=out,
                           **config).launch()
