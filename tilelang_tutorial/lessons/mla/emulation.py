"""A tile-level emulation of the MLA decode kernel in plain torch (runs on CPU).

It follows :mod:`.auto` step by step, with the same tiles and
the same division of work, so a reader without a GPU can watch the algorithm:

* one "CTA" = one sequence x a block of 64 query heads x one KV split (rows past ``h_q`` are
  zero padding, exactly the rows the kernel computes but never stores);
* per KV block of ``block_N`` tokens (gathered from a page through ``block_table``):
  ``S = Q_nope K^T + Q_pe K_pe^T`` computed as two warpgroup halves (FullCol: warpgroup ``w``
  owns score columns ``[w*block_N/2, (w+1)*block_N/2)``), masked past ``cache_seqlens``;
* the running row max is a reduction *across* the two halves (the kernel's cross-warpgroup
  ``AllReduce``); ``alpha = 2^((m_prev - m) * scale*log2 e)`` rescales the old state;
* each warpgroup writes its half of ``P`` into ``S_shared`` (rounded to fp16/bf16, as the
  kernel stores it), then computes its own 64 x 256 slice of ``acc_o += S_shared @ V``;
* the denominator is kept per element (``acc_p``) and reduced once at the end;
* split-KV: each split returns ``(o_partial, lse)`` and :func:`combine_splits` merges them.

:func:`emulate_cta_seesaw` is the same CTA under the hand-written seesaw schedule
(:mod:`.seesaw`): the two warpgroups take turns scoring
whole blocks, pass only the running max to each other, and keep one share of the denominator
each; ``emulate_mla_decode(..., schedule="seesaw")`` runs it.

All arithmetic is fp32 on the same values the GPU sees (inputs in fp16/bf16, P rounded to the
input dtype before P @ V), so the result matches the fp32 reference to fp16-level error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .common import (BLOCK_H, DIM_NOPE, DIM_PE, LOG2E, PAGE_SIZE,
                                 default_softmax_scale)

WARPGROUPS = 2                      # consumer warpgroups (FullCol split of N and of dim)
DV_PER_WG = DIM_NOPE // WARPGROUPS  # 256 output columns per warpgroup


@dataclass
class Step:
    """What one CTA saw at one KV block (for printing / plotting the online softmax)."""
    block: int
    tokens: tuple
    row_max_per_wg: list            # [w] -> (64,) local max of warpgroup w's half of S
    m: torch.Tensor                 # (64,) running max after this block (raw scores)
    alpha: torch.Tensor             # (64,) rescale factor applied to acc_o and acc_p
    denom: torch.Tensor             # (64,) running denominator (sum of acc_p)


@dataclass
class CTATrace:
    seq: int
    head_block: int
    split: int
    steps: list = field(default_factory=list)


def split_range(n_blocks: int, num_split: int, split: int) -> tuple[int, int, bool]:
    """The kernel's share of KV blocks for ``split``: (begin, end, is_empty).

    Whole blocks ``ceil(n_blocks / num_split)`` per split; an empty split still runs one step on
    the last block (so its loads complete) and then reports itself empty.
    """
    per = math.ceil(n_blocks / num_split)
    empty = split * per >= n_blocks
    begin = min(split * per, n_blocks - 1)
    end = max(min(split * per + per, n_blocks), begin + 1)
    return begin, end, empty


def _q_tile(q_nope, q_pe, seq: int, head_block: int):
    """The Q tile in "shared memory": 64 rows, the rows past h_q are zero padding."""
    valid_h = min(BLOCK_H, q_nope.shape[1])
    h0 = head_block * valid_h
    Q = torch.zeros(BLOCK_H, DIM_NOPE, dtype=torch.float32)
    Qpe = torch.zeros(BLOCK_H, DIM_PE, dtype=torch.float32)
    Q[:valid_h] = q_nope[seq, h0:h0 + valid_h].float()
    Qpe[:valid_h] = q_pe[seq, h0:h0 + valid_h].float()
    return Q, Qpe


def _kv_block(kv_cache, pe_cache, block_table, seq: int, tok0: int, block_N: int):
    """The TMA load of one KV block (``block_N`` tokens from ``tok0``) through the page table:
    ``(K (block_N, 512), K_pe (block_N, 64))`` in fp32."""
    row0 = int(block_table[seq, tok0 // PAGE_SIZE]) * PAGE_SIZE + tok0 % PAGE_SIZE
    return (kv_cache.reshape(-1, DIM_NOPE)[row0:row0 + block_N].float(),
            pe_cache.reshape(-1, DIM_PE)[row0:row0 + block_N].float())


def emulate_cta(q_nope, q_pe, kv_cache, pe_cache, block_table, seqlen: int, *, seq: int,
                head_block: int, split: int, num_split: int, softmax_scale: float,
                block_N: int = 64, trace: CTATrace | None = None):
    """One CTA of the split kernel. Returns ``(o (64, 512) fp32, lse (64,) log2 domain)``."""
    dtype = q_nope.dtype
    scale = softmax_scale * LOG2E
    half = block_N // WARPGROUPS
    Q, Qpe = _q_tile(q_nope, q_pe, seq, head_block)

    acc_o = [torch.zeros(BLOCK_H, DV_PER_WG) for _ in range(WARPGROUPS)]   # per warpgroup
    acc_p = [torch.zeros(BLOCK_H, half) for _ in range(WARPGROUPS)]
    m = torch.full((BLOCK_H,), -math.inf)

    n_blocks = math.ceil(seqlen / block_N)
    begin, end, empty = split_range(n_blocks, num_split, split)
    for blk in range(begin, end):
        tok0 = blk * block_N
        K, Kpe = _kv_block(kv_cache, pe_cache, block_table, seq, tok0, block_N)
        valid = (tok0 + torch.arange(block_N)) < seqlen
        # Q @ K^T, FullCol: warpgroup w computes its half of the score columns
        s_wg = []
        for w in range(WARPGROUPS):
            cols = slice(w * half, (w + 1) * half)
            s = Q @ K[cols].T + Qpe @ Kpe[cols].T
            s = torch.where(valid[cols], s, torch.tensor(-math.inf))
            s_wg.append(s)
        # row max: local per warpgroup, then across warpgroups (the AllReduce)
        local_max = [s.max(dim=1).values for s in s_wg]
        m_prev = m
        m = torch.maximum(m_prev, torch.stack(local_max).max(dim=0).values)
        alpha = torch.exp2((m_prev - m) * scale)
        S_shared = torch.empty(BLOCK_H, block_N, dtype=dtype)
        for w in range(WARPGROUPS):
            p = torch.exp2(s_wg[w] * scale - (m * scale)[:, None])
            acc_p[w] = acc_p[w] * alpha[:, None] + p
            S_shared[:, w * half:(w + 1) * half] = p.to(dtype)   # T.copy(acc_s, S_shared)
        # P @ V, FullCol: warpgroup w owns output columns [256 w, 256 (w+1)), reads all of P
        for w in range(WARPGROUPS):
            V = K[:, w * DV_PER_WG:(w + 1) * DV_PER_WG]
            acc_o[w] = acc_o[w] * alpha[:, None] + S_shared.float() @ V
        if trace is not None:
            trace.steps.append(Step(blk, (tok0, min(tok0 + block_N, seqlen)), local_max, m.clone(),
                                    alpha.clone(), sum(a.sum(dim=1) for a in acc_p)))
    denom = sum(a.sum(dim=1) for a in acc_p)         # the one reduce_sum after the loop
    o = torch.cat(acc_o, dim=1)
    if empty:
        return torch.zeros(BLOCK_H, DIM_NOPE), torch.full((BLOCK_H,), -math.inf)
    return o / denom[:, None], torch.log2(denom) + m * scale


@dataclass
class SeesawShares:
    """What each warpgroup of one seesaw CTA ends with (for printing)."""
    blocks_scored: list             # [w] -> KV blocks warpgroup w scored
    denom_share: list               # [w] -> (64,) its share of the softmax denominator
    m: list                         # [w] -> (64,) its running max at the end (both equal)


def emulate_cta_seesaw(q_nope, q_pe, kv_cache, pe_cache, block_table, seqlen: int, *, seq: int,
                       head_block: int, split: int, num_split: int, softmax_scale: float,
                       shares: list | None = None):
    """One CTA under the seesaw schedule. Returns ``(o (64, 512) fp32, lse (64,) log2 domain)``.

    Blocks are taken in pairs: warpgroup ``t`` scores block ``2j + t`` (the whole 64 x 64 ``S``,
    softmax on full rows) and publishes ``P`` (rounded to the input dtype, as the kernel writes
    it over the block's rotary keys) and its new running max; the other warpgroup adopts that
    max. Each warpgroup rescales its half of ``O`` *and its own share of the denominator* by the
    same ``alpha``, and adds ``P V`` for its 256 columns. The two shares are added at the end.
    """
    dtype = q_nope.dtype
    scale = softmax_scale * LOG2E
    block_N = PAGE_SIZE
    Q, Qpe = _q_tile(q_nope, q_pe, seq, head_block)

    acc_o = [torch.zeros(BLOCK_H, DV_PER_WG) for _ in range(WARPGROUPS)]
    l = [torch.zeros(BLOCK_H) for _ in range(WARPGROUPS)]           # each warpgroup's share
    m = [torch.full((BLOCK_H,), -math.inf) for _ in range(WARPGROUPS)]
    scored = [[] for _ in range(WARPGROUPS)]

    begin, end, empty = split_range(math.ceil(seqlen / block_N), num_split, split)
    for k in range(end - begin):
        blk = begin + k
        scorer = k % 2                    # stage k % 2 of the pair; warpgroup k % 2 scores it
        K, Kpe = _kv_block(kv_cache, pe_cache, block_table, seq, blk * block_N, block_N)
        valid = (blk * block_N + torch.arange(block_N)) < seqlen
        for w in (scorer, 1 - scorer):    # the scorer first; the other waits for its max
            m_prev = m[w]
            if w == scorer:
                s = torch.where(valid, Q @ K.T + Qpe @ Kpe.T, torch.tensor(-math.inf))
                m[w] = torch.maximum(m_prev, s.max(dim=1).values)
                p = torch.exp2(s * scale - (m[w] * scale)[:, None])
                P = p.to(dtype)                                    # written over K_pe
                M_published = m[w]
                scored[w].append(blk)
            else:
                m[w] = M_published                                 # read from M_shared
            alpha = torch.exp2((m_prev - m[w]) * scale)
            l[w] = l[w] * alpha + (p.sum(dim=1) if w == scorer else 0)
            V = K[:, w * DV_PER_WG:(w + 1) * DV_PER_WG]
            acc_o[w] = acc_o[w] * alpha[:, None] + P.float() @ V
    assert torch.equal(m[0], m[1]), "both warpgroups end with the same running max"
    if shares is not None:
        shares.append(SeesawShares(scored, [x.clone() for x in l], [x.clone() for x in m]))
    denom = l[0] + l[1]
    if empty:
        return torch.zeros(BLOCK_H, DIM_NOPE), torch.full((BLOCK_H,), -math.inf)
    return torch.cat(acc_o, dim=1) / denom[:, None], torch.log2(denom) + m[0] * scale


def combine_splits(o_partial, lse):
    """Merge split-KV partial results: ``o_partial (..., S, D)`` normalised per split,
    ``lse (..., S)`` log2 of each split's denominator (``-inf`` = empty split)."""
    lse_max = lse.max(dim=-1, keepdim=True).values
    w = torch.exp2(lse - lse_max)                      # empty split -> 0
    w = w / w.sum(dim=-1, keepdim=True)
    return (w[..., None] * o_partial).sum(dim=-2)


def emulate_mla_decode(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *,
                       num_split: int = 1, softmax_scale: float | None = None, block_N: int = 64,
                       traces: list | None = None, schedule: str = "auto",
                       shares: list | None = None):
    """The whole kernel (all CTAs, then the combine) on CPU. Returns (b, h_q, 512) fp32.

    ``schedule``: ``"auto"`` (:func:`emulate_cta`; ``traces`` collects a :class:`CTATrace`
    per CTA) or ``"seesaw"`` (:func:`emulate_cta_seesaw`, one tile configuration: block_N =
    64; ``shares`` collects a :class:`SeesawShares` per CTA).
    """
    if schedule not in ("auto", "seesaw"):
        raise ValueError(f"schedule must be 'auto' or 'seesaw', got {schedule!r}")
    if schedule == "seesaw" and (block_N != PAGE_SIZE or traces is not None):
        raise ValueError("the seesaw emulation has one tile configuration (block_N = 64) and no traces")
    scale = softmax_scale if softmax_scale is not None else default_softmax_scale()
    b, h_q, _ = q_nope.shape
    valid_h = min(BLOCK_H, h_q)
    head_blocks = math.ceil(h_q / BLOCK_H)
    out = torch.empty(b, h_q, DIM_NOPE)
    for seq in range(b):
        seqlen = int(cache_seqlens[seq])
        for hb in range(head_blocks):
            parts, lses = [], []
            for sp in range(num_split):
                tr = CTATrace(seq, hb, sp) if traces is not None else None
                where = dict(seq=seq, head_block=hb, split=sp, num_split=num_split, softmax_scale=scale)
                if schedule == "seesaw":
                    o, lse = emulate_cta_seesaw(q_nope, q_pe, kv_cache, pe_cache, block_table, seqlen,
                                                shares=shares, **where)
                else:
                    o, lse = emulate_cta(q_nope, q_pe, kv_cache, pe_cache, block_table, seqlen,
                                         block_N=block_N, trace=tr, **where)
                if tr is not None:
                    traces.append(tr)
                parts.append(o[:valid_h])
                lses.append(lse[:valid_h])
            o_partial = torch.stack(parts, dim=1)      # (valid_h, S, 512)
            lse_all = torch.stack(lses, dim=1)        # (valid_h, S)
            out[seq, hb * valid_h:(hb + 1) * valid_h] = combine_splits(o_partial, lse_all)
    return out
