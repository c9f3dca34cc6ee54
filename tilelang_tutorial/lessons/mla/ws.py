"""MLA decode with a hand-written warp-specialized schedule (sm_90a only).

:mod:`.auto` lets TileLang derive everything: ``GemmWarpPolicy.FullCol`` splits *both*
matmuls between the two consumer warpgroups, so each computes half of the scores (a 64 x 32
``wgmma`` reading all of Q from shared memory) and every row max crosses warpgroups through
shared memory and named barriers. This module writes the schedule by hand instead, with
different jobs for the three warpgroups of one CTA:

* **score warpgroup** (threads 0-127): the whole ``S = Q K^T`` of a 64-token block
  (one 64 x 64 ``wgmma`` chain over the 576-wide dot), the online softmax on full rows -- so the
  row max and row sum are reductions inside a warp, with no cross-warpgroup step -- then it
  publishes ``P`` and the rescale factor ``alpha`` in shared memory and computes the left half
  of ``O += P V`` (output columns 0-255);
* **value warpgroup** (threads 128-255): waits for ``P`` / ``alpha``, rescales and computes the
  right half of ``O += P V`` (columns 256-511) -- while the score warpgroup already works on the
  next block's ``Q K^T``;
* **producer warpgroup** (threads 256-383): looks up each block's page in ``block_table`` and
  issues its TMA loads into a two-stage ring.

They synchronise on mbarriers, all written in the program (``q_full``, ``kv_full`` / ``kv_empty``
per stage, ``p_full`` / ``p_empty`` for the one ``P`` buffer, ``stats_ready`` for the final row
sums), and ``set_max_nreg`` gives the registers to the warpgroups that hold accumulators.

Per 64-token block this reads Q from shared memory once instead of twice and removes the
cross-warpgroup reductions; the price is that the schedule (who waits for whom, which parity)
is now the author's job, not the compiler's. The arguments, the split-KV workspaces and the
combine kernel are those of :mod:`.common`, so :func:`.op.mla_decode` runs any schedule
(``schedule="ws"`` here). The macros of :mod:`.hand_scheduled` also serve :mod:`.seesaw`,
where both consumer warpgroups compute scores: the sm_90a default.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from .common import BLOCK_H, DIM_NOPE, DIM_PE, PAGE_SIZE, decode_dims, decode_prim_func, split_range_macro
from .hand_scheduled import REGS_PER_CTA_THREAD_SLOT, check_inputs, hand_scheduled_parts

BLOCK_N = PAGE_SIZE     # one page per step: each KV block is one rectangular TMA load
STAGES = 2              # Q 72 KiB + 2 x KV 72 KiB + P 8 KiB + alpha and 1/l 0.5 KiB of shared memory
THREADS = 384           # score + value + producer warpgroups
#: registers per thread after ``setmaxnreg`` (at most REGS_PER_CTA_THREAD_SLOT = 504 in all)
REGS_SCORE, REGS_VALUE, REGS_PRODUCER = 240, 200, 64


def mla_decode_ws_program(h_q: int, dtype: str = "float16", *, split: bool = False,
                          softmax_scale: float | None = None):
    """The hand-scheduled MLA decode ``T.prim_func``; same arguments as
    :func:`.auto.mla_decode_program` (see there), one tile configuration."""
    import tilelang  # noqa: F401  (sets up TileLang's TVM before the language module)
    import tilelang.language as T

    scale = check_inputs(h_q, dtype, softmax_scale)
    assert REGS_SCORE + REGS_VALUE + REGS_PRODUCER <= REGS_PER_CTA_THREAD_SLOT
    accum = "float32"
    dv, dpe, half = DIM_NOPE, DIM_PE, DIM_NOPE // 2
    valid_h = min(BLOCK_H, h_q)
    head_blocks = math.ceil(h_q / BLOCK_H)
    dims = decode_dims(split)
    batch, _, _, num_split = dims

    @T.macro
    def issue_scores(Q_l, Q_r, Q_pe_s, KV_l, KV_r, K_pe_s, acc_s, stage):
        # S = Q_nope K^T + Q_pe K_pe^T: one 64 x 64 wgmma chain over the 576-wide dot
        T.wgmma_gemm(Q_l, KV_l[stage, :, :], acc_s, transpose_B=True, clear_accum=True)
        T.wgmma_gemm(Q_r, KV_r[stage, :, :], acc_s, transpose_B=True)
        T.wgmma_gemm(Q_pe_s, K_pe_s[stage, :, :], acc_s, transpose_B=True)

    online_softmax, rescale, store_half, load_q = hand_scheduled_parts(h_q, split=split, scale=scale)
    split_range = split_range_macro(num_split, BLOCK_N)

    @T.macro
    def softmax_and_publish(acc_s, acc_o_l, m_i, m_prev, alpha, l_i, row_sum, alpha_shared, P_shared,
                            p_full, p_empty, blk_begin, seqlen, rescale_flag, k):
        online_softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, (blk_begin + k) * BLOCK_N, seqlen)
        # P and alpha go to shared memory once the value warpgroup has used the last ones
        if k > 0:
            T.barrier_wait(p_empty, (k - 1) % 2)
        T.copy(alpha, alpha_shared)
        T.copy(acc_s, P_shared)
        T.fence_proxy_async()
        T.barrier_arrive(p_full)
        rescale(acc_o_l, alpha, rescale_flag)

    @T.macro
    def attention(Q, Q_pe, KV, K_pe, block_table, cache_seqlens, lse, o_partial, Output):
        with T.Kernel(head_blocks, num_split, batch, threads=THREADS) as (hb, sp, bx):
            Q_l = T.alloc_shared([BLOCK_H, half], dtype)
            Q_r = T.alloc_shared([BLOCK_H, half], dtype)
            Q_pe_s = T.alloc_shared([BLOCK_H, dpe], dtype)
            KV_l = T.alloc_shared([STAGES, BLOCK_N, half], dtype)     # keys / values, cols 0-255
            KV_r = T.alloc_shared([STAGES, BLOCK_N, half], dtype)     # cols 256-511
            K_pe_s = T.alloc_shared([STAGES, BLOCK_N, dpe], dtype)
            P_shared = T.alloc_shared([BLOCK_H, BLOCK_N], dtype)
            alpha_shared = T.alloc_shared([BLOCK_H], accum)
            l_shared = T.alloc_shared([BLOCK_H], accum)     # 1 / row sums, for the value warpgroup

            acc_s = T.alloc_fragment([BLOCK_H, BLOCK_N], accum)
            acc_o_l = T.alloc_fragment([BLOCK_H, half], accum)
            acc_o_r = T.alloc_fragment([BLOCK_H, half], accum)
            m_i = T.alloc_fragment([BLOCK_H], accum)
            m_prev = T.alloc_fragment([BLOCK_H], accum)
            alpha = T.alloc_fragment([BLOCK_H], accum)
            l_i = T.alloc_fragment([BLOCK_H], accum)
            row_sum = T.alloc_fragment([BLOCK_H], accum)
            lse_r = T.alloc_fragment([BLOCK_H], accum)
            rescale_flag = T.alloc_local([1], "int32")
            rescale_flag_v = T.alloc_local([1], "int32")
            alpha_v = T.alloc_fragment([BLOCK_H], accum)    # value warpgroup's copy of alpha
            inv_l = T.alloc_fragment([BLOCK_H], accum)      # 1 / softmax denominator
            inv_l_v = T.alloc_fragment([BLOCK_H], accum)    # value warpgroup's copy

            q_full = T.alloc_barrier(128)                   # producer: Q landed
            kv_full = T.alloc_barrier([128] * STAGES)       # producer: TMA bytes landed
            kv_empty = T.alloc_barrier([256] * STAGES)      # both consumers done with the stage
            p_full = T.alloc_barrier(128)                   # score wg: P and alpha written
            p_empty = T.alloc_barrier(128)                  # value wg: done reading P and alpha
            stats_ready = T.alloc_barrier(128)              # score wg: final row sums written

            tx = T.get_thread_binding()
            seqlen = cache_seqlens[bx]
            h0 = hb * valid_h
            is_empty, blk_begin, n_steps = split_range(seqlen, sp)

            if tx < 128:
                # ---------------- score warpgroup: S, softmax, O[:, :256] ----------------
                T.set_max_nreg(REGS_SCORE, 1)
                T.fill(acc_o_l, 0)
                T.fill(m_i, -T.infinity(accum))
                T.fill(l_i, 0)
                T.barrier_wait(q_full, 0)
                for k in T.serial(n_steps):
                    T.barrier_wait(kv_full[k % STAGES], (k // STAGES) % 2)
                    issue_scores(Q_l, Q_r, Q_pe_s, KV_l, KV_r, K_pe_s, acc_s, k % STAGES)
                    T.wait_wgmma(0)
                    softmax_and_publish(acc_s, acc_o_l, m_i, m_prev, alpha, l_i, row_sum, alpha_shared,
                                        P_shared, p_full, p_empty, blk_begin, seqlen, rescale_flag, k)
                    T.gemm(P_shared, KV_l[k % STAGES, :, :], acc_o_l)
                    # release the stage now: the producer refills it while block k+1 is computed
                    T.barrier_arrive(kv_empty[k % STAGES])
                # final row sums for the value warpgroup's normalisation
                for i in T.Parallel(BLOCK_H):
                    lse_r[i] = T.if_then_else(is_empty, -T.infinity(accum), T.log2(l_i[i]) + m_i[i] * scale)
                for i in T.Parallel(BLOCK_H):
                    inv_l[i] = 1 / l_i[i]
                T.copy(inv_l, l_shared)
                T.barrier_arrive(stats_ready)
                store_half(acc_o_l, inv_l, lse_r, 0, is_empty, bx, h0, sp, lse, o_partial, Output, True)
            elif tx < 256:
                # ---------------- value warpgroup: O[:, 256:] ----------------
                T.set_max_nreg(REGS_VALUE, 1)
                T.fill(acc_o_r, 0)
                for k in T.serial(n_steps):
                    stage = k % STAGES
                    T.barrier_wait(p_full, k % 2)
                    T.copy(alpha_shared, alpha_v)       # this warpgroup's rows, in registers
                    rescale(acc_o_r, alpha_v, rescale_flag_v)
                    T.gemm(P_shared, KV_r[stage, :, :], acc_o_r)
                    T.barrier_arrive(p_empty)
                    T.barrier_arrive(kv_empty[stage])
                T.barrier_wait(stats_ready, 0)
                T.copy(l_shared, inv_l_v)   # (inv_l lives in the score warpgroup's registers)
                store_half(acc_o_r, inv_l_v, lse_r, half, is_empty, bx, h0, sp, lse, o_partial, Output, False)
            else:
                # ---------------- producer warpgroup: paged TMA loads ----------------
                T.set_max_nreg(REGS_PRODUCER, 0)
                load_q(Q, Q_pe, Q_l, Q_r, Q_pe_s, q_full, bx, h0)
                for k in T.serial(n_steps):
                    stage = k % STAGES
                    T.barrier_wait(kv_empty[stage], 1 - (k // STAGES) % 2)   # first pass: no wait
                    row0 = block_table[bx, blk_begin + k] * PAGE_SIZE
                    T.tma_copy(KV[row0:row0 + BLOCK_N, 0:half], KV_l[stage, :, :], barrier=kv_full[stage])
                    T.tma_copy(KV[row0:row0 + BLOCK_N, half:dv], KV_r[stage, :, :], barrier=kv_full[stage])
                    T.tma_copy(K_pe[row0:row0 + BLOCK_N, :], K_pe_s[stage, :, :], barrier=kv_full[stage])
                    T.barrier_arrive(kv_full[stage])

    return decode_prim_func(attention, h_q=h_q, dtype=dtype, split=split, dims=dims)
