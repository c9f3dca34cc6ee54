"""Pieces every MLA decode schedule shares: the problem's sizes, the softmax scale, the split-KV
heuristic, the kernel signature (:func:`decode_prim_func`), each split's share of the KV blocks
(:func:`split_range_macro`) and the combine kernel (:func:`combine_macro`).

Imports run one way: this module -> the schedules (:mod:`.auto`, :mod:`.ws`, :mod:`.seesaw`)
-> the op (:mod:`.op`).
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

#: Sizes fixed by the DeepSeek-V2/V3 MLA architecture (absorbed form): the latent width (K's first
#: part, and V), the rotary part of K, the tokens per page of the paged cache; and the query heads
#: one CTA computes (wgmma's M).
DIM_NOPE, DIM_PE, PAGE_SIZE, BLOCK_H = 512, 64, 64, 64   # latent (K and V), rotary (K), page, heads per CTA
SUPPORTED_HEADS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634                                 # exp(x) = exp2(x * LOG2E)

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

    Shares are rounded up, so the last splits can find nothing left (5 blocks in 4 splits: 2, 2, 1
    and none). A split whose share is empty still runs one step on the last block -- so its TMA
    loads are waited for before the CTA exits -- and reports itself empty (it then writes
    lse = -inf, which the combine weighs by 0).
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


#: splits whose partial outputs one combine thread loads at once (the loads of a chunk are all
#: in flight together; a batch of 8 with 8 splits is one chunk)
COMBINE_CHUNK = 16


def combine_macro(h_q: int, batch, num_split):
    """The split-KV combine kernel as a ``T.macro`` (shared by all schedules):
    ``out = sum_s 2^(lse_s - lse_max) * o_s / sum_s 2^(lse_s - lse_max)`` for every (head, sequence).

    One CTA per (head, sequence), 128 threads, 4 output columns each. Each thread works through
    the splits in chunks of :data:`COMBINE_CHUNK`: it first loads the chunk's log-sum-exps and
    partial outputs (16 independent loads in flight; a split past ``num_split`` re-reads the
    last one and gets weight 0), then folds them in with a running maximum, so there is no
    shared memory, no barrier and no pass over the splits before the loads start.
    """
    import tilelang.language as T

    accum = "float32"
    chunk = COMBINE_CHUNK

    @T.macro
    def combine(lse, o_partial, Output):
        with T.Kernel(h_q, batch, threads=128) as (hx, bx):
            part = T.alloc_local([chunk * 4], accum)     # the chunk's partial outputs, 4 columns each
            lse_c = T.alloc_local([chunk], accum)
            o = T.alloc_local([4], accum)
            lse_max = T.alloc_var(accum)
            new_max = T.alloc_var(accum)
            total = T.alloc_var(accum)
            weight = T.alloc_var(accum)
            tx = T.get_thread_binding()
            lse_max = -T.infinity(accum)
            total = 0
            for c in T.unroll(4):
                o[c] = 0
            for k in T.serial(T.ceildiv(num_split, chunk)):
                for u in T.unroll(chunk):
                    s = T.min(k * chunk + u, num_split - 1)
                    lse_c[u] = T.if_then_else(k * chunk + u < num_split, lse[bx, hx, s], -T.infinity(accum))
                    for c in T.vectorized(4):
                        part[u * 4 + c] = o_partial[bx, hx, s, tx * 4 + c]
                new_max = lse_max
                for u in T.unroll(chunk):
                    new_max = T.max(new_max, lse_c[u])
                weight = T.exp2(lse_max - new_max)       # 0 on the first chunk (2^-inf)
                total *= weight
                for c in T.unroll(4):
                    o[c] *= weight
                lse_max = new_max
                for u in T.unroll(chunk):
                    weight = T.exp2(lse_c[u] - lse_max)  # an empty or absent split: 2^-inf = 0
                    total += weight
                    for c in T.unroll(4):
                        o[c] += weight * part[u * 4 + c]
            total = 1 / total
            for c in T.vectorized(4):
                Output[bx, hx, tx * 4 + c] = o[c] * total

    return combine
