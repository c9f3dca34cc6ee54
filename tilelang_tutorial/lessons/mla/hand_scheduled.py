"""Pieces both hand-written MLA schedules (:mod:`.ws` and :mod:`.seesaw`) use: argument checks,
the register-budget rule for ``setmaxnreg``, and macros for one block's online softmax, the
rescale of O, the store of one half of the output and the producer's Q load.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

from .common import BLOCK_H, DIM_NOPE, DIM_PE, LOG2E, PAGE_SIZE, SUPPORTED_HEADS, default_softmax_scale

BLOCK_N = PAGE_SIZE     # one page per step: each KV block is one rectangular TMA load
#: A 384-thread CTA (two consumer warpgroups + a producer) starts with 168 registers per thread
#: (65536 / 384, rounded down to a multiple of 8), and ``setmaxnreg.inc`` waits until the pool
#: has the registers: the three warpgroups' budgets must add up to at most 3 x 168 = 504, or the
#: consumers wait forever.
REGS_PER_CTA_THREAD_SLOT = 3 * 168


def check_inputs(h_q: int, dtype: str, softmax_scale: float | None) -> float:
    """Validate the hand-scheduled programs' arguments; the softmax scale in the log2 domain."""
    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"h_q must be one of {SUPPORTED_HEADS}, got {h_q}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    return float((softmax_scale if softmax_scale is not None else default_softmax_scale()) * LOG2E)


def hand_scheduled_parts(h_q: int, *, split: bool, scale: float):
    """Macros both hand-written schedules (:mod:`.ws` and :mod:`.seesaw`) use:
    ``online_softmax`` (one block, full rows), ``rescale`` (``O *= alpha`` with the warp-vote
    skip), ``store_half`` (normalise and store 256 output columns) and ``load_q`` (the
    producer's Q load, then ``q_full``). ``scale`` is the softmax scale times log2(e)."""
    import tilelang.language as T

    accum = "float32"
    half, dv, dpe = DIM_NOPE // 2, DIM_NOPE, DIM_PE
    valid_h = min(BLOCK_H, h_q)

    @T.macro
    def online_softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, tok0, seqlen):
        # S -> P = exp2(S - max) in place, with the running max m_i, the rescale factor alpha of
        # the previous block's state and the denominator l_i. Full rows live in one warpgroup,
        # so max and sum are shuffles inside a quad of threads.
        if tok0 + BLOCK_N > seqlen:      # only a sequence's last block has tokens past its end
            for i, j in T.Parallel(BLOCK_H, BLOCK_N):
                acc_s[i, j] = T.if_then_else(tok0 + j < seqlen, acc_s[i, j], -T.infinity(accum))
        T.copy(m_i, m_prev)
        T.reduce_max(acc_s, m_i, dim=1, clear=False)
        for i in T.Parallel(BLOCK_H):
            alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
        for i, j in T.Parallel(BLOCK_H, BLOCK_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
        T.reduce_sum(acc_s, row_sum, dim=1)
        for i in T.Parallel(BLOCK_H):
            l_i[i] = l_i[i] * alpha[i] + row_sum[i]

    @T.macro
    def rescale(acc_o, alpha, flag):
        # O *= alpha row by row -- skipped by a whole warp when none of its 16 rows got a new
        # maximum (alpha == 1 exactly, so the result is unchanged), which gets more common as
        # the running maxima settle over a long sequence: a vote of the warp's 32 lanes
        flag[0] = 0
        for i in T.Parallel(BLOCK_H):
            if alpha[i] != 1:
                flag[0] = 1
        if T.any_sync(flag[0]):
            for i, j in T.Parallel(BLOCK_H, half):
                acc_o[i, j] *= alpha[i]

    @T.macro
    def store_half(acc_o, inv_l, lse_row, col0, is_empty, bx, h0, sp, lse, o_partial, Output, writes_lse):
        # each consumer normalises (one reciprocal per row, not an IEEE division per element)
        # and stores its own 256 output columns
        if split:
            if writes_lse:
                for i in T.Parallel(BLOCK_H):
                    if i < valid_h:
                        lse[bx, h0 + i, sp] = lse_row[i]
            for i, j in T.Parallel(BLOCK_H, half):
                if i < valid_h:
                    o_partial[bx, h0 + i, sp, col0 + j] = T.if_then_else(is_empty, 0, acc_o[i, j] * inv_l[i])
        else:
            for i, j in T.Parallel(BLOCK_H, half):
                if i < valid_h:
                    Output[bx, h0 + i, col0 + j] = acc_o[i, j] * inv_l[i]

    @T.macro
    def load_q(Q, Q_pe, Q_l, Q_r, Q_pe_s, q_full, bx, h0):
        # TMA (an all-thread T.copy here would be 384 threads on 64 x 256 halves: not a
        # multiple of the vector width, so scalar loads)
        if valid_h == BLOCK_H:
            T.tma_copy(Q[bx, h0:h0 + BLOCK_H, 0:half], Q_l, barrier=q_full)
            T.tma_copy(Q[bx, h0:h0 + BLOCK_H, half:dv], Q_r, barrier=q_full)
            T.tma_copy(Q_pe[bx, h0:h0 + BLOCK_H, :], Q_pe_s, barrier=q_full)
        else:
            # h_q = 16 / 32: the tile still has 64 rows (wgmma M); zero the padding rows
            for i, j in T.Parallel(BLOCK_H, half):
                Q_l[i, j] = T.if_then_else(i < valid_h, Q[bx, T.min(i, valid_h - 1), j], 0)
            for i, j in T.Parallel(BLOCK_H, half):
                Q_r[i, j] = T.if_then_else(i < valid_h, Q[bx, T.min(i, valid_h - 1), half + j], 0)
            for i, j in T.Parallel(BLOCK_H, dpe):
                Q_pe_s[i, j] = T.if_then_else(i < valid_h, Q_pe[bx, T.min(i, valid_h - 1), j], 0)
            T.fence_proxy_async()   # generic-proxy stores, read by wgmma (async proxy)
        T.barrier_arrive(q_full)

    return online_softmax, rescale, store_half, load_q

