"""Probe (not the lesson): lessons/mla/seesaw.py with two changes FlashMLA's Hopper decode kernel
makes, each switchable, to test what limits the seesaw below 620 TFLOP/s (issue 24, goal 4):

* ``chunks``: each stage's K arrives as nine 64-column TMA loads, each with its own barrier
  (4 for KV_l, 4 for KV_r, 1 for K_pe), and the scoring warpgroup issues its ``Q K^T`` one 64-wide
  slice at a time as each slice lands, instead of waiting for 256 columns (then 320) at once;
* ``local_p``: the scoring warpgroup's own ``P V`` takes P from registers (fp16 fragment, wgmma's
  register-A form) instead of reading back the copy it wrote to shared memory for the other one.

Two more switches, after the diagnostic below showed the loads' waits cost up to a fifth:

* ``early_release``: warpgroup 1 waits for its ``P0 V0_r`` before its own softmax and frees the even
  block's right half (KV_r, and P0 in K_pe) then, not after that softmax: the next even block's
  right half starts loading one softmax earlier; the softmax no longer overlaps that product;
* ``eviction``: the KV loads' L2 policy (``evict_first`` / ``evict_last``; the two CTAs of a
  sequence read the same pages).

And one diagnostic, whose output is WRONG by design (never checked, only timed):

* ``skip_loads``: the stages (0: even blocks, 1: odd blocks), or halves of a stage ("0l", "0r",
  "1l", "1r"; the right half with the rotary keys), whose KV is loaded only in the first pair;
  later pairs compute on what the stage holds, with the barriers passed as if it had landed.
  It bounds what freeing that stage earlier could gain: the time with that load's wait gone.

The 2026-12-01 profile: tensor pipe 69 % busy, DRAM 52 %, 0.35 eligible warps per scheduler; with
every page L2-resident the same kernel ran 647-670 TFLOP/s against 571 (the KV stream).
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from tilelang_tutorial.lessons.mla.common import BLOCK_H, DIM_NOPE, DIM_PE, PAGE_SIZE, decode_dims, decode_prim_func, split_range_macro
from tilelang_tutorial.lessons.mla.hand_scheduled import REGS_PER_CTA_THREAD_SLOT, check_inputs, hand_scheduled_parts

BLOCK_N = PAGE_SIZE     # one page per step: each KV block is one rectangular TMA load
THREADS = 384           # two consumer warpgroups + a producer
#: registers per thread after ``setmaxnreg`` (at most REGS_PER_CTA_THREAD_SLOT = 504 in all)
REGS_CONSUMER, REGS_SEESAW_PRODUCER = 232, 40   # (ws.py has its own REGS_PRODUCER)


def mla_decode_seesaw_program(h_q: int, dtype: str = "float16", *, split: bool = False,
                              softmax_scale: float | None = None, chunks: bool = False,
                              local_p: bool = False, skip_loads: tuple = (), early_release: bool = False,
                              eviction: str | None = None):
    """The seesaw MLA decode ``T.prim_func``; same arguments as
    :func:`.auto.mla_decode_program` (see there), one tile configuration."""
    import tilelang  # noqa: F401  (sets up TileLang's TVM before the language module)
    import tilelang.language as T

    scale = check_inputs(h_q, dtype, softmax_scale)
    assert 2 * REGS_CONSUMER + REGS_SEESAW_PRODUCER <= REGS_PER_CTA_THREAD_SLOT
    accum = "float32"
    dv, dpe, half = DIM_NOPE, DIM_PE, DIM_NOPE // 2
    valid_h = min(BLOCK_H, h_q)
    head_blocks = math.ceil(h_q / BLOCK_H)
    dims = decode_dims(split)
    batch, _, _, num_split = dims

    online_softmax, rescale, store_half, load_q = hand_scheduled_parts(h_q, split=split, scale=scale)
    # the diagnostic: a stage's half is skipped after the first pair when its stage (0 / 1) or the
    # half ("0l", "0r", "1l", "1r"; "r" with the rotary keys) is listed
    skip_0l, skip_0r, skip_1l, skip_1r = (int(st in skip_loads or f"{st}{part}" in skip_loads)
                                          for st, part in ((0, "l"), (0, "r"), (1, "l"), (1, "r")))
    split_range = split_range_macro(num_split, BLOCK_N)

    @T.macro
    def qk_slice(w, acc_s, q_part, kv_part, full_k, bar, par, clear):
        T.barrier_wait(full_k[w * 9 + bar], par)
        T.wgmma_gemm(q_part, kv_part, acc_s, transpose_B=True, clear_accum=clear)

    @T.macro
    def scores(w, acc_s, Q_l, Q_r, Q_pe_s, KV_l, KV_r, K_pe_s, full_l, full_r, full_k, par):
        # S = Q K^T for the block in stage w, issued asynchronously
        if chunks:
            # one 64-wide slice of K at a time, each as soon as its own TMA load has landed
            qk_slice(w, acc_s, Q_l[:, 0:64], KV_l[w, :, 0:64], full_k, 0, par, True)
            qk_slice(w, acc_s, Q_l[:, 64:128], KV_l[w, :, 64:128], full_k, 1, par, False)
            qk_slice(w, acc_s, Q_l[:, 128:192], KV_l[w, :, 128:192], full_k, 2, par, False)
            qk_slice(w, acc_s, Q_l[:, 192:256], KV_l[w, :, 192:256], full_k, 3, par, False)
            qk_slice(w, acc_s, Q_r[:, 0:64], KV_r[w, :, 0:64], full_k, 4, par, False)
            qk_slice(w, acc_s, Q_r[:, 64:128], KV_r[w, :, 64:128], full_k, 5, par, False)
            qk_slice(w, acc_s, Q_r[:, 128:192], KV_r[w, :, 128:192], full_k, 6, par, False)
            qk_slice(w, acc_s, Q_r[:, 192:256], KV_r[w, :, 192:256], full_k, 7, par, False)
            qk_slice(w, acc_s, Q_pe_s, K_pe_s[w, :, :], full_k, 8, par, False)
        else:
            T.barrier_wait(full_l[w], par)
            T.wgmma_gemm(Q_l, KV_l[w, :, :], acc_s, transpose_B=True, clear_accum=True)
            T.barrier_wait(full_r[w], par)
            T.wgmma_gemm(Q_r, KV_r[w, :, :], acc_s, transpose_B=True)
            T.wgmma_gemm(Q_pe_s, K_pe_s[w, :, :], acc_s, transpose_B=True)

    @T.macro
    def load_slice(src, dst, full_k, t, bar):
        T.tma_copy(src, dst, barrier=full_k[t * 9 + bar])
        T.barrier_arrive(full_k[t * 9 + bar])

    @T.macro
    def own_pv(acc_s, p_local, K_pe_s, KV_mine, acc_o, w):
        # O_half += P V for the block this warpgroup scored
        if local_p:
            T.gemm(p_local, KV_mine[w, :, :], acc_o)
        else:
            T.gemm(K_pe_s[w, :, :], KV_mine[w, :, :], acc_o)

    @T.macro
    def take_max(m_i, m_prev, alpha, l_i, acc_o, M_shared, flag, t):
        # the other warpgroup scored block t of this pair: adopt its running max
        T.copy(m_i, m_prev)
        T.copy(M_shared[t, :], m_i)
        for i in T.Parallel(BLOCK_H):
            alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
        for i in T.Parallel(BLOCK_H):
            l_i[i] *= alpha[i]
        rescale(acc_o, alpha, flag)

    @T.macro
    def softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, K_pe_s, M_shared, p_full, w, tok0, seqlen, p_local):
        # my block's online softmax; the caller rescales O by alpha once no P V is in flight on it
        online_softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, tok0, seqlen)
        if local_p:
            T.copy(acc_s, p_local)
        # P over this block's rotary keys (read only by this warpgroup's finished Q K^T)
        T.copy(acc_s, K_pe_s[w, :, :])
        T.copy(m_i, M_shared[w, :])
        T.fence_proxy_async()
        T.barrier_arrive(p_full[w])

    @T.macro
    def consumer(w, acc_s, p_local, full_k, acc_o, m_i, m_prev, alpha, l_i, row_sum, l_other, lse_r, flag,
                 Q_l, Q_r, Q_pe_s, KV_l, KV_r, KV_mine, K_pe_s, M_shared, l_shared,
                 q_full, full_l, full_r, empty_l, empty_r, p_full, stats,
                 n_steps, blk_begin, seqlen, is_empty, bx, h0, sp, lse, o_partial, Output):
        # w: 0 scores the even blocks and owns O[:, :256] (KV_mine = KV_l); 1 the odd / O[:, 256:]
        T.fill(acc_o, 0)
        T.fill(m_i, -T.infinity(accum))
        T.fill(l_i, 0)
        T.barrier_wait(q_full, 0)
        for jp in T.serial(T.ceildiv(n_steps, 2)):
            par = jp % 2
            if 2 * jp + w < n_steps:
                # ---- my block (stage w): S = Q K^T, issued asynchronously ----
                scores(w, acc_s, Q_l, Q_r, Q_pe_s, KV_l, KV_r, K_pe_s, full_l, full_r, full_k, par)
                if w == 0:
                    T.wait_wgmma(0)
                    softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, K_pe_s, M_shared, p_full, 0,
                            (blk_begin + 2 * jp) * BLOCK_N, seqlen, p_local)
                    rescale(acc_o, alpha, flag)
                    own_pv(acc_s, p_local, K_pe_s, KV_mine, acc_o, 0)        # O_l += P0 V0_l
                    T.barrier_arrive(empty_l[0])
                    T.barrier_arrive(empty_r[0])
                else:
                    # block k0 comes first: adopt its max, and leave its P V running on the
                    # tensor cores while this warpgroup does its own softmax
                    T.barrier_wait(p_full[0], par)
                    take_max(m_i, m_prev, alpha, l_i, acc_o, M_shared, flag, 0)
                    T.wgmma_gemm(K_pe_s[0, :, :], KV_mine[0, :, :], acc_o)    # O_r += P0 V0_r
                    if early_release:
                        T.wait_wgmma(0)                                       # S and P0 V0_r done
                        T.barrier_arrive(empty_r[0])
                        softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, K_pe_s, M_shared, p_full, 1,
                                (blk_begin + 2 * jp + 1) * BLOCK_N, seqlen, p_local)
                    else:
                        T.wait_wgmma(1)                                       # S is ready
                        softmax(acc_s, m_i, m_prev, alpha, l_i, row_sum, K_pe_s, M_shared, p_full, 1,
                                (blk_begin + 2 * jp + 1) * BLOCK_N, seqlen, p_local)
                        T.wait_wgmma(0)
                        T.barrier_arrive(empty_r[0])
                    rescale(acc_o, alpha, flag)
                    own_pv(acc_s, p_local, K_pe_s, KV_mine, acc_o, 1)        # O_r += P1 V1_r
                    T.barrier_arrive(empty_r[1])
            else:
                # w == 1 and the pair has no odd block (odd number of blocks): add block k0
                T.barrier_wait(p_full[0], par)
                take_max(m_i, m_prev, alpha, l_i, acc_o, M_shared, flag, 0)
                T.gemm(K_pe_s[0, :, :], KV_mine[0, :, :], acc_o)
                T.barrier_arrive(empty_r[0])
            if w == 0:
                if 2 * jp + 1 < n_steps:
                    T.barrier_wait(p_full[1], par)
                    take_max(m_i, m_prev, alpha, l_i, acc_o, M_shared, flag, 1)
                    T.gemm(K_pe_s[1, :, :], KV_mine[1, :, :], acc_o)          # O_l += P1 V1_l
                    T.barrier_arrive(empty_l[1])
                    T.barrier_arrive(empty_r[1])
        # ---- the two shares of the softmax denominator, then this half of the output ----
        T.copy(l_i, l_shared[w, :])
        T.barrier_arrive(stats[w])
        T.barrier_wait(stats[1 - w], 0)
        T.copy(l_shared[1 - w, :], l_other)
        for i in T.Parallel(BLOCK_H):
            l_i[i] += l_other[i]
        for i in T.Parallel(BLOCK_H):
            lse_r[i] = T.if_then_else(is_empty, -T.infinity(accum), T.log2(l_i[i]) + m_i[i] * scale)
        for i in T.Parallel(BLOCK_H):
            l_i[i] = 1 / l_i[i]
        store_half(acc_o, l_i, lse_r, w * half, is_empty, bx, h0, sp, lse, o_partial, Output, w == 0)

    @T.macro
    def attention(Q, Q_pe, KV, K_pe, block_table, cache_seqlens, lse, o_partial, Output):
        with T.Kernel(head_blocks, num_split, batch, threads=THREADS) as (hb, sp, bx):
            Q_l = T.alloc_shared([BLOCK_H, half], dtype)
            Q_r = T.alloc_shared([BLOCK_H, half], dtype)
            Q_pe_s = T.alloc_shared([BLOCK_H, dpe], dtype)
            KV_l = T.alloc_shared([2, BLOCK_N, half], dtype)     # stage t holds block 2j + t
            KV_r = T.alloc_shared([2, BLOCK_N, half], dtype)
            K_pe_s = T.alloc_shared([2, BLOCK_N, dpe], dtype)    # rotary keys, then P
            M_shared = T.alloc_shared([2, BLOCK_H], accum)       # running max after block 2j + t
            l_shared = T.alloc_shared([2, BLOCK_H], accum)       # each warpgroup's share of l

            acc_s0 = T.alloc_fragment([BLOCK_H, BLOCK_N], accum)
            acc_s1 = T.alloc_fragment([BLOCK_H, BLOCK_N], accum)
            p_local0 = T.alloc_fragment([BLOCK_H, BLOCK_N], dtype)
            p_local1 = T.alloc_fragment([BLOCK_H, BLOCK_N], dtype)
            acc_o0 = T.alloc_fragment([BLOCK_H, half], accum)
            acc_o1 = T.alloc_fragment([BLOCK_H, half], accum)
            m_i0 = T.alloc_fragment([BLOCK_H], accum)
            m_i1 = T.alloc_fragment([BLOCK_H], accum)
            m_prev0 = T.alloc_fragment([BLOCK_H], accum)
            m_prev1 = T.alloc_fragment([BLOCK_H], accum)
            alpha0 = T.alloc_fragment([BLOCK_H], accum)
            alpha1 = T.alloc_fragment([BLOCK_H], accum)
            l_i0 = T.alloc_fragment([BLOCK_H], accum)
            l_i1 = T.alloc_fragment([BLOCK_H], accum)
            row_sum0 = T.alloc_fragment([BLOCK_H], accum)
            row_sum1 = T.alloc_fragment([BLOCK_H], accum)
            l_other0 = T.alloc_fragment([BLOCK_H], accum)
            l_other1 = T.alloc_fragment([BLOCK_H], accum)
            lse_r0 = T.alloc_fragment([BLOCK_H], accum)
            lse_r1 = T.alloc_fragment([BLOCK_H], accum)
            flag0 = T.alloc_local([1], "int32")
            flag1 = T.alloc_local([1], "int32")
            page = T.alloc_var("int32")             # producer: the next block's page id
            row0 = T.alloc_var("int32")             # producer: this block's first cache row

            q_full = T.alloc_barrier(128)
            full_l = T.alloc_barrier([128] * 2)     # producer: KV_l of stage t landed
            full_r = T.alloc_barrier([128] * 2)     # producer: KV_r and K_pe of stage t landed
            empty_l = T.alloc_barrier([128] * 2)    # warpgroup 0 done with KV_l[t]
            empty_r = T.alloc_barrier([256] * 2)    # both done with KV_r[t] and P (in K_pe[t])
            full_k = T.alloc_barrier([128] * 18)    # chunks: slice c of stage t landed (t * 9 + c)
            p_full = T.alloc_barrier([128] * 2)     # scorer of stage t: P and max published
            stats = T.alloc_barrier([128] * 2)      # warpgroup w's share of l published

            tx = T.get_thread_binding()
            seqlen = cache_seqlens[bx]
            h0 = hb * valid_h
            is_empty, blk_begin, n_steps = split_range(seqlen, sp)

            if tx < 128:
                T.set_max_nreg(REGS_CONSUMER, 1)
                consumer(0, acc_s0, p_local0, full_k, acc_o0, m_i0, m_prev0, alpha0, l_i0, row_sum0, l_other0, lse_r0,
                         flag0, Q_l, Q_r, Q_pe_s, KV_l, KV_r, KV_l, K_pe_s, M_shared, l_shared,
                         q_full, full_l, full_r, empty_l, empty_r, p_full, stats,
                         n_steps, blk_begin, seqlen, is_empty, bx, h0, sp, lse, o_partial, Output)
            elif tx < 256:
                T.set_max_nreg(REGS_CONSUMER, 1)
                consumer(1, acc_s1, p_local1, full_k, acc_o1, m_i1, m_prev1, alpha1, l_i1, row_sum1, l_other1, lse_r1,
                         flag1, Q_l, Q_r, Q_pe_s, KV_l, KV_r, KV_r, K_pe_s, M_shared, l_shared,
                         q_full, full_l, full_r, empty_l, empty_r, p_full, stats,
                         n_steps, blk_begin, seqlen, is_empty, bx, h0, sp, lse, o_partial, Output)
            else:
                T.set_max_nreg(REGS_SEESAW_PRODUCER, 0)
                # page ids are read one block ahead: each global load is in flight while the
                # producer waits for a free stage, so no TMA address waits on global memory
                page = block_table[bx, blk_begin]
                load_q(Q, Q_pe, Q_l, Q_r, Q_pe_s, q_full, bx, h0)
                for jp in T.serial(T.ceildiv(n_steps, 2)):
                    for t in T.unroll(2):
                        if 2 * jp + t < n_steps:
                            row0 = page * PAGE_SIZE
                            page = block_table[bx, blk_begin + T.min(2 * jp + t + 1, n_steps - 1)]
                            if chunks:
                                T.barrier_wait(empty_l[t], 1 - jp % 2)
                                load_slice(KV[row0:row0 + BLOCK_N, 0:64], KV_l[t, :, 0:64], full_k, t, 0)
                                load_slice(KV[row0:row0 + BLOCK_N, 64:128], KV_l[t, :, 64:128], full_k, t, 1)
                                load_slice(KV[row0:row0 + BLOCK_N, 128:192], KV_l[t, :, 128:192], full_k, t, 2)
                                load_slice(KV[row0:row0 + BLOCK_N, 192:256], KV_l[t, :, 192:256], full_k, t, 3)
                                T.barrier_wait(empty_r[t], 1 - jp % 2)
                                load_slice(KV[row0:row0 + BLOCK_N, 256:320], KV_r[t, :, 0:64], full_k, t, 4)
                                load_slice(KV[row0:row0 + BLOCK_N, 320:384], KV_r[t, :, 64:128], full_k, t, 5)
                                load_slice(KV[row0:row0 + BLOCK_N, 384:448], KV_r[t, :, 128:192], full_k, t, 6)
                                load_slice(KV[row0:row0 + BLOCK_N, 448:512], KV_r[t, :, 192:256], full_k, t, 7)
                                load_slice(K_pe[row0:row0 + BLOCK_N, :], K_pe_s[t, :, :], full_k, t, 8)
                            elif skip_loads:
                                skip_l = T.if_then_else(t == 0, skip_0l, skip_1l)
                                skip_r = T.if_then_else(t == 0, skip_0r, skip_1r)
                                T.barrier_wait(empty_l[t], 1 - jp % 2)
                                if jp * skip_l == 0:
                                    T.tma_copy(KV[row0:row0 + BLOCK_N, 0:half], KV_l[t, :, :], barrier=full_l[t])
                                T.barrier_arrive(full_l[t])
                                T.barrier_wait(empty_r[t], 1 - jp % 2)
                                if jp * skip_r == 0:
                                    T.tma_copy(KV[row0:row0 + BLOCK_N, half:dv], KV_r[t, :, :], barrier=full_r[t])
                                    T.tma_copy(K_pe[row0:row0 + BLOCK_N, :], K_pe_s[t, :, :], barrier=full_r[t])
                                T.barrier_arrive(full_r[t])
                            else:
                                T.barrier_wait(empty_l[t], 1 - jp % 2)     # first pass: no wait
                                T.tma_copy(KV[row0:row0 + BLOCK_N, 0:half], KV_l[t, :, :], barrier=full_l[t],
                                           eviction_policy=eviction)
                                T.barrier_arrive(full_l[t])
                                T.barrier_wait(empty_r[t], 1 - jp % 2)
                                T.tma_copy(KV[row0:row0 + BLOCK_N, half:dv], KV_r[t, :, :], barrier=full_r[t],
                                           eviction_policy=eviction)
                                T.tma_copy(K_pe[row0:row0 + BLOCK_N, :], K_pe_s[t, :, :], barrier=full_r[t],
                                           eviction_policy=eviction)
                                T.barrier_arrive(full_r[t])

    return decode_prim_func(attention, h_q=h_q, dtype=dtype, split=split, dims=dims)
