"""A Triton MLA decode kernel written for this tutorial: the peer the TileLang kernel is timed against.

Same problem and interface as :mod:`tilelang_tutorial.lessons.mla.op` (absorbed MLA,
paged latent cache of page size 64, ``block_table``, ragged ``cache_seqlens``), written the
straightforward FlashDecoding way:

1. ``_mla_split_kernel``: one program per (sequence, block of ``BLOCK_H`` heads, KV split).
   It loops over ``BLOCK_N``-token blocks of its split, gathers the rows through the page
   table (per-token page lookup), computes ``s = q_nope k^T + q_pe k_pe^T`` with ``tl.dot``,
   does the online softmax in fp32 and accumulates ``p @ c`` into a ``BLOCK_H x 512`` fp32
   accumulator. It writes the normalised partial output and its log2-sum-exp.
2. ``_mla_combine_kernel``: one program per (sequence, head) merges the splits with weights
   ``2^(lse_s - lse_total)``.

No warp specialization, no TMA: Triton picks the MMA instructions and the software pipeline
(``num_stages``) itself. The accumulator is the same size problem as in the TileLang kernel,
handled here by a small head block (``BLOCK_H = 16``, the minimum ``tl.dot`` M) instead of
two warpgroups; the price is that each KV block is re-read by every head block.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ... import runtime
from .common import DIM_NOPE, DIM_PE, LOG2E, MAX_SPLIT, PAGE_SIZE, default_softmax_scale
from .op import sm_count, validate_inputs

BLOCK_H = 16
BLOCK_N = 32


@triton.jit
def _mla_split_kernel(Q, QPE, KV, KPE, BT, SEQLENS, LSE, OPART,
                      stride_bt, num_split, scale_log2,
                      H: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                      DV: tl.constexpr, DPE: tl.constexpr, PAGE: tl.constexpr):
    b = tl.program_id(0)
    hb = tl.program_id(1)
    sp = tl.program_id(2)
    seqlen = tl.load(SEQLENS + b)
    per_split = tl.cdiv(tl.cdiv(seqlen, BLOCK_N), num_split) * BLOCK_N
    start = sp * per_split
    end = tl.minimum(start + per_split, seqlen)

    offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, DV)
    offs_p = tl.arange(0, DPE)
    hmask = offs_h < H
    q = tl.load(Q + (b * H + offs_h)[:, None] * DV + offs_d[None, :], mask=hmask[:, None], other=0.0)
    qpe = tl.load(QPE + (b * H + offs_h)[:, None] * DPE + offs_p[None, :], mask=hmask[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, DV], tl.float32)
    for tok0 in range(start, end, BLOCK_N):
        toks = tok0 + tl.arange(0, BLOCK_N)
        tmask = toks < end
        page = tl.load(BT + b * stride_bt + toks // PAGE, mask=tmask, other=0)
        rows = page.to(tl.int64) * PAGE + toks % PAGE
        c = tl.load(KV + rows[:, None] * DV + offs_d[None, :], mask=tmask[:, None], other=0.0)
        kpe = tl.load(KPE + rows[:, None] * DPE + offs_p[None, :], mask=tmask[:, None], other=0.0)
        s = tl.dot(q, tl.trans(c)) + tl.dot(qpe, tl.trans(kpe))
        s = tl.where(tmask[None, :], s * scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)
        m_i = m_new

    has = end > start
    acc = acc / tl.where(has, l_i, 1.0)[:, None]
    lse = tl.where(has, tl.log2(l_i) + m_i, float("-inf"))
    base = (b * H + offs_h) * num_split + sp
    tl.store(LSE + base, lse, mask=hmask)
    tl.store(OPART + base[:, None] * DV + offs_d[None, :], tl.where(has, acc, 0.0), mask=hmask[:, None])


@triton.jit
def _mla_combine_kernel(LSE, OPART, OUT, num_split, H: tl.constexpr, DV: tl.constexpr,
                        BLOCK_S: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    smask = offs_s < num_split
    row = b * H + h
    lse = tl.load(LSE + row * num_split + offs_s, mask=smask, other=float("-inf"))
    lse_max = tl.max(lse, axis=0)
    w = tl.exp2(lse - lse_max)
    w = w / tl.sum(w, axis=0)
    offs_d = tl.arange(0, DV)
    o = tl.load(OPART + (row * num_split + offs_s)[:, None] * DV + offs_d[None, :],
                mask=smask[:, None], other=0.0)
    out = tl.sum(w[:, None] * o, axis=0)
    tl.store(OUT + row * DV + offs_d, out.to(OUT.dtype.element_ty))


def choose_num_split_triton(batch: int, h_q: int, max_seqlen: int, *, sms: int | None = None) -> int:
    """Enough (sequence, head block, split) programs for ~2 per SM, each split >= 256 tokens."""
    sms = sms or sm_count()
    programs = batch * math.ceil(h_q / BLOCK_H)
    want = max(1, math.ceil(2 * sms / programs))
    return int(max(1, min(want, MAX_SPLIT, math.ceil(max_seqlen / 256))))


class TritonMLADecodeLaunch:
    """Prepared launch (buffers allocated once), for timing without the checks."""

    def __init__(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *,
                 num_split: int, softmax_scale: float | None = None, out=None,
                 num_warps: int = 4, num_stages: int = 2):
        b, h_q, _ = q_nope.shape
        self.num_split = num_split
        scale = softmax_scale if softmax_scale is not None else default_softmax_scale()
        self.scale_log2 = float(scale * LOG2E)
        dev = q_nope.device
        self.lse = torch.empty(b, h_q, num_split, dtype=torch.float32, device=dev)
        self.o_partial = torch.empty(b, h_q, num_split, DIM_NOPE, dtype=torch.float32, device=dev)
        self.out = out if out is not None else torch.empty_like(q_nope)
        self.t = (q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens)
        self.grid1 = (b, triton.cdiv(h_q, BLOCK_H), num_split)
        self.grid2 = (b, h_q)
        self.h_q = h_q
        self.num_warps, self.num_stages = num_warps, num_stages

    def launch(self):
        q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens = self.t
        _mla_split_kernel[self.grid1](
            q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, self.lse, self.o_partial,
            block_table.stride(0), self.num_split, self.scale_log2,
            H=self.h_q, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, DV=DIM_NOPE, DPE=DIM_PE, PAGE=PAGE_SIZE,
            num_warps=self.num_warps, num_stages=self.num_stages)
        _mla_combine_kernel[self.grid2](
            self.lse, self.o_partial, self.out, self.num_split, H=self.h_q, DV=DIM_NOPE,
            BLOCK_S=max(2, triton.next_power_of_2(self.num_split)), num_warps=4)
        return self.out


def mla_decode_triton(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                      num_split=None, softmax_scale: float | None = None, *, out=None):
    """Same contract as :func:`tilelang_tutorial.lessons.mla.op.mla_decode`, in Triton."""
    b, h_q, max_len = validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table,
                                      cache_seqlens, num_split)
    runtime.require_gpu("mla_decode_triton")
    if num_split is None:
        num_split = choose_num_split_triton(b, h_q, max_len)
    return TritonMLADecodeLaunch(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                                 num_split=num_split, softmax_scale=softmax_scale, out=out).launch()
