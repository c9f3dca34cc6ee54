"""``mla_pairmax_unserialized.py`` with the loads of every pair after the first issued by the consumer
warpgroup that frees each half (FlashMLA's way: "launch the corresponding TMA instructions right after
data is no longer needed"), not by the producer in one fixed order. Each half has one last user
(warpgroup 0: K0's and K1's left halves, P1's rotary tile; warpgroup 1: both right halves, P0's
tile); it arrives on the half's empty barrier with its 128 threads, waits on it (so every warp of
the warpgroup is done), and one elected thread issues the next block's TMA into it. The
producer loads Q and the first pair only. Page ids of the next pair are read at the top of each
pair. The profile of ``mla_pairmax_unserialized.py`` (``mla_unserialized_source_sass_h100.csv.xz``)
had warpgroup 1 waiting 26 % of its samples for the odd block's two halves while the producer
waited in its fixed order for halves freed later.

From here on, ``mla_pairmax_unserialized.py``'s docstring:

``../2026-12-06d/mla_pairmax.py`` with its two ``wgmma`` waits of warpgroup 1 taken out of their
``if has_k1`` (2026-12-06, sixth session). As written there, ptxas reported "(C7514) Potential
Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading
accumulator registers of a wgmma between start and end of the pipeline stage" and waited after
every ``wgmma`` of the kernel (the Nsight Compute profile, ``mla_pairmax_source_sass_h100.csv.xz``:
a ``WARPGROUP.DEPBAR`` after each one). Everything else as there:

Probe (not the lesson): a seesaw MLA decode in which each warpgroup's own ``P V`` goes first and
each half of a KV block is freed as soon as the products on it are done (issue 24, goal 4).

The package's seesaw (lessons/mla/seesaw.py) frees a block only when both warpgroups are done with
it; the diagnostic ``mla_reload_probe_h100.log`` measured that waiting for those loads costs it
17-21 %. Here, for a pair of blocks (k0 in stage 0, k1 in stage 1), with m the running max:

* warpgroup 0 scores k0: ``S0 = Q K0^T``; ``m0 = max(m, rowmax S0)``; ``P0 = exp(S0 - m0)``;
  publishes m0; ``O_l = O_l * exp(m - m0) + P0 V0_l`` with P0 from registers (its own product,
  first); frees K0's left half. Then it takes ``c = exp(m0 - m1)`` from warpgroup 1, stores
  ``P0 c`` (P0 against the pair's max m1) over K0's rotary keys for warpgroup 1, ``O_l *= c``, and
  ``O_l += P1 V1_l`` with P1 from shared memory; frees K1's left half and P1.
* warpgroup 1 scores k1: ``S1 = Q K1^T``; with m0: ``m1 = max(m0, rowmax S1)``, ``P1 = exp(S1 - m1)``;
  publishes m1 and c; stores P1 over K1's rotary keys; ``O_r = O_r * exp(m - m1) + P1 V1_r`` from
  registers (first), then ``O_r += (P0 c) V0_r``; frees K1's right half as soon as its own product
  is done, then K0's right half and P0.

So each warpgroup's own product needs nothing from the other but the max, and the producer
reloads a half (left of k0, right of k1) while the pair is still in flight; each ``Q K^T`` reads
first the half that was freed first. Each warpgroup keeps its share of the denominator against
the same max as its half of O, and the shares are added at the end (as in the package).

Shared memory as in the package (Q, two 64 x 576 stages; P over the rotary keys).
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from tilelang_tutorial.lessons.mla.common import BLOCK_H, DIM_NOPE, DIM_PE, PAGE_SIZE, decode_dims, decode_prim_func, split_range_macro
from tilelang_tutorial.lessons.mla.hand_scheduled import REGS_PER_CTA_THREAD_SLOT, check_inputs, hand_scheduled_parts

BLOCK_N = PAGE_SIZE
THREADS = 384
REGS_CONSUMER, REGS_PRODUCER = 232, 40


def mla_decode_pairmax_program(h_q: int, dtype: str = "float16", *, split: bool = False,
                               softmax_scale: float | None = None):
    import tilelang  # noqa: F401
    import tilelang.language as T

    scale = check_inputs(h_q, dtype, softmax_scale)
    assert 2 * REGS_CONSUMER + REGS_PRODUCER <= REGS_PER_CTA_THREAD_SLOT
    accum = "float32"
    dv, dpe, half = DIM_NOPE, DIM_PE, DIM_NOPE // 2
    valid_h = min(BLOCK_H, h_q)
    head_blocks = math.ceil(h_q / BLOCK_H)
    dims = decode_dims(split)
    batch, _, _, num_split = dims

    _, rescale, store_half, load_q = hand_scheduled_parts(h_q, split=split, scale=scale)
    split_range = split_range_macro(num_split, BLOCK_N)

    @T.macro
    def mask_tail(acc_s, tok0, seqlen):
        if tok0 + BLOCK_N > seqlen:      # only a sequence's last block has tokens past its end
            for i, j in T.Parallel(BLOCK_H, BLOCK_N):
                acc_s[i, j] = T.if_then_else(tok0 + j < seqlen, acc_s[i, j], -T.infinity(accum))

    @T.macro
    def finish(w, acc_o, m_i, l_i, l_other, lse_r, l_shared, stats, is_empty, bx, h0, sp, lse,
               o_partial, Output):
        # the two shares of the denominator (against the same final max), then this half of O
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
            KV_l = T.alloc_shared([2, BLOCK_N, half], dtype)
            KV_r = T.alloc_shared([2, BLOCK_N, half], dtype)
            K_pe_s = T.alloc_shared([2, BLOCK_N, dpe], dtype)    # rotary keys, then P of the block
            M0_s = T.alloc_shared([BLOCK_H], accum)              # m0 (warpgroup 0 -> 1)
            M1_s = T.alloc_shared([BLOCK_H], accum)              # m1 (warpgroup 1 -> 0)
            C1_s = T.alloc_shared([BLOCK_H], accum)              # c = exp(m0 - m1) (1 -> 0)
            l_shared = T.alloc_shared([2, BLOCK_H], accum)

            acc_s0 = T.alloc_fragment([BLOCK_H, BLOCK_N], accum)
            acc_s1 = T.alloc_fragment([BLOCK_H, BLOCK_N], accum)
            p0 = T.alloc_fragment([BLOCK_H, BLOCK_N], dtype)
            p1 = T.alloc_fragment([BLOCK_H, BLOCK_N], dtype)
            acc_o0 = T.alloc_fragment([BLOCK_H, half], accum)
            acc_o1 = T.alloc_fragment([BLOCK_H, half], accum)
            m_i0 = T.alloc_fragment([BLOCK_H], accum)
            m_i1 = T.alloc_fragment([BLOCK_H], accum)
            m_prev0 = T.alloc_fragment([BLOCK_H], accum)
            m_prev1 = T.alloc_fragment([BLOCK_H], accum)
            m0_1 = T.alloc_fragment([BLOCK_H], accum)            # warpgroup 1's copy of m0
            alpha0 = T.alloc_fragment([BLOCK_H], accum)
            alpha1 = T.alloc_fragment([BLOCK_H], accum)
            c0 = T.alloc_fragment([BLOCK_H], accum)              # warpgroup 0's copy of c
            c1 = T.alloc_fragment([BLOCK_H], accum)
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
            page0 = T.alloc_var("int32")
            page1 = T.alloc_var("int32")
            next0_w0 = T.alloc_var("int32")     # warpgroup 0: the next pair's even block's page
            next1_w0 = T.alloc_var("int32")     # ... and its odd block's
            next0_w1 = T.alloc_var("int32")
            next1_w1 = T.alloc_var("int32")

            q_full = T.alloc_barrier(128)
            full_l = T.alloc_barrier([128] * 2)
            full_r = T.alloc_barrier([128] * 2)
            full_pe = T.alloc_barrier([128] * 2)
            empty_l = T.alloc_barrier([128] * 2)     # stage t's left half free (warpgroup 0 frees both)
            empty_r = T.alloc_barrier([128] * 2)     # stage t's right half free (warpgroup 1 frees both)
            empty_pe = T.alloc_barrier([128] * 2)    # rotary keys / P free: 0 by warpgroup 1, 1 by warpgroup 0
            m0_ready = T.alloc_barrier(128)
            c_ready = T.alloc_barrier(128)
            p0_ready = T.alloc_barrier(128)
            p1_ready = T.alloc_barrier(128)
            stats = T.alloc_barrier([128] * 2)

            tx = T.get_thread_binding()
            seqlen = cache_seqlens[bx]
            h0 = hb * valid_h
            is_empty, blk_begin, n_steps = split_range(seqlen, sp)

            if tx < 128:
                T.set_max_nreg(REGS_CONSUMER, 1)
                T.fill(acc_o0, 0)
                T.fill(m_i0, -T.infinity(accum))
                T.fill(l_i0, 0)
                T.barrier_wait(q_full, 0)
                for jp in T.serial(T.ceildiv(n_steps, 2)):
                    par = jp % 2
                    has_k1 = 2 * jp + 1 < n_steps
                    next0_w0 = block_table[bx, blk_begin + T.min(2 * jp + 2, n_steps - 1)]
                    next1_w0 = block_table[bx, blk_begin + T.min(2 * jp + 3, n_steps - 1)]
                    # S0 = Q K0^T, the half freed first (left) first
                    T.barrier_wait(full_l[0], par)
                    T.wgmma_gemm(Q_l, KV_l[0, :, :], acc_s0, transpose_B=True, clear_accum=True)
                    T.barrier_wait(full_r[0], par)
                    T.wgmma_gemm(Q_r, KV_r[0, :, :], acc_s0, transpose_B=True)
                    T.barrier_wait(full_pe[0], par)
                    T.wgmma_gemm(Q_pe_s, K_pe_s[0, :, :], acc_s0, transpose_B=True)
                    T.wait_wgmma(0)
                    mask_tail(acc_s0, (blk_begin + 2 * jp) * BLOCK_N, seqlen)
                    T.copy(m_i0, m_prev0)
                    T.reduce_max(acc_s0, m_i0, dim=1, clear=False)              # m0
                    T.copy(m_i0, M0_s)
                    T.barrier_arrive(m0_ready)
                    for i in T.Parallel(BLOCK_H):
                        alpha0[i] = T.exp2((m_prev0[i] - m_i0[i]) * scale)
                    for i, j in T.Parallel(BLOCK_H, BLOCK_N):
                        acc_s0[i, j] = T.exp2(acc_s0[i, j] * scale - m_i0[i] * scale)
                    T.reduce_sum(acc_s0, row_sum0, dim=1)
                    for i in T.Parallel(BLOCK_H):
                        l_i0[i] = l_i0[i] * alpha0[i] + row_sum0[i]
                    T.copy(acc_s0, p0)
                    rescale(acc_o0, alpha0, flag0)
                    T.wgmma_gemm(p0, KV_l[0, :, :], acc_o0)                      # own P0 V0_l, first
                    # c = exp(m0 - m1) and m1 from warpgroup 1 (1 and m0 when the pair has no k1)
                    T.barrier_wait(c_ready, par)
                    T.copy(C1_s, c0)
                    T.copy(M1_s, m_i0)
                    for i, j in T.Parallel(BLOCK_H, BLOCK_N):
                        acc_s0[i, j] *= c0[i]
                    T.copy(acc_s0, K_pe_s[0, :, :])                             # P0 c, for warpgroup 1
                    T.fence_proxy_async()
                    T.barrier_arrive(p0_ready)
                    T.wait_wgmma(0)
                    T.barrier_arrive(empty_l[0])
                    if 2 * jp + 2 < n_steps:      # K0's left half, last read: the next even block's
                        T.barrier_wait(empty_l[0], par)
                        T.tma_copy(KV[next0_w0 * PAGE_SIZE:next0_w0 * PAGE_SIZE + BLOCK_N, 0:half], KV_l[0, :, :],
                                   barrier=full_l[0])
                        T.barrier_arrive(full_l[0])
                    for i in T.Parallel(BLOCK_H):
                        l_i0[i] *= c0[i]
                    rescale(acc_o0, c0, flag0)
                    if has_k1:
                        T.barrier_wait(p1_ready, par)
                        T.gemm(K_pe_s[1, :, :], KV_l[1, :, :], acc_o0)           # P1 V1_l
                        T.barrier_arrive(empty_l[1])
                        T.barrier_arrive(empty_pe[1])
                        if 2 * jp + 3 < n_steps:  # K1's left half and P1's tile: the next odd block's
                            T.barrier_wait(empty_l[1], par)
                            T.tma_copy(KV[next1_w0 * PAGE_SIZE:next1_w0 * PAGE_SIZE + BLOCK_N, 0:half],
                                       KV_l[1, :, :], barrier=full_l[1])
                            T.barrier_arrive(full_l[1])
                            T.barrier_wait(empty_pe[1], par)
                            T.tma_copy(K_pe[next1_w0 * PAGE_SIZE:next1_w0 * PAGE_SIZE + BLOCK_N, :], K_pe_s[1, :, :],
                                       barrier=full_pe[1])
                            T.barrier_arrive(full_pe[1])
                finish(0, acc_o0, m_i0, l_i0, l_other0, lse_r0, l_shared, stats, is_empty, bx, h0, sp,
                       lse, o_partial, Output)
            elif tx < 256:
                T.set_max_nreg(REGS_CONSUMER, 1)
                T.fill(acc_o1, 0)
                T.fill(m_i1, -T.infinity(accum))
                T.fill(l_i1, 0)
                T.barrier_wait(q_full, 0)
                for jp in T.serial(T.ceildiv(n_steps, 2)):
                    par = jp % 2
                    has_k1 = 2 * jp + 1 < n_steps
                    next0_w1 = block_table[bx, blk_begin + T.min(2 * jp + 2, n_steps - 1)]
                    next1_w1 = block_table[bx, blk_begin + T.min(2 * jp + 3, n_steps - 1)]
                    T.copy(m_i1, m_prev1)
                    if has_k1:
                        # S1 = Q K1^T, the right half (freed first) first
                        T.barrier_wait(full_r[1], par)
                        T.wgmma_gemm(Q_r, KV_r[1, :, :], acc_s1, transpose_B=True, clear_accum=True)
                        T.barrier_wait(full_l[1], par)
                        T.wgmma_gemm(Q_l, KV_l[1, :, :], acc_s1, transpose_B=True)
                        T.barrier_wait(full_pe[1], par)
                        T.wgmma_gemm(Q_pe_s, K_pe_s[1, :, :], acc_s1, transpose_B=True)
                    T.barrier_wait(m0_ready, par)
                    T.copy(M0_s, m0_1)
                    T.copy(m0_1, m_i1)
                    # unconditional: a wgmma issued under one `if has_k1` and waited under another
                    # is a path ptxas cannot rule out, so it serializes every wgmma of the kernel
                    T.wait_wgmma(0)
                    if has_k1:
                        mask_tail(acc_s1, (blk_begin + 2 * jp + 1) * BLOCK_N, seqlen)
                        T.reduce_max(acc_s1, m_i1, dim=1, clear=False)           # m1
                    T.copy(m_i1, M1_s)
                    for i in T.Parallel(BLOCK_H):
                        c1[i] = T.exp2((m0_1[i] - m_i1[i]) * scale)
                    T.copy(c1, C1_s)
                    T.barrier_arrive(c_ready)
                    for i in T.Parallel(BLOCK_H):
                        alpha1[i] = T.exp2((m_prev1[i] - m_i1[i]) * scale)
                    for i in T.Parallel(BLOCK_H):
                        l_i1[i] *= alpha1[i]
                    rescale(acc_o1, alpha1, flag1)
                    if has_k1:
                        for i, j in T.Parallel(BLOCK_H, BLOCK_N):
                            acc_s1[i, j] = T.exp2(acc_s1[i, j] * scale - m_i1[i] * scale)
                        T.reduce_sum(acc_s1, row_sum1, dim=1)
                        for i in T.Parallel(BLOCK_H):
                            l_i1[i] += row_sum1[i]
                        T.copy(acc_s1, p1)
                        T.copy(acc_s1, K_pe_s[1, :, :])                         # P1, for warpgroup 0
                        T.fence_proxy_async()
                        T.barrier_arrive(p1_ready)
                        T.wgmma_gemm(p1, KV_r[1, :, :], acc_o1)                  # own P1 V1_r, first
                    T.barrier_wait(p0_ready, par)
                    T.wgmma_gemm(K_pe_s[0, :, :], KV_r[0, :, :], acc_o1)          # (P0 c) V0_r
                    T.wait_wgmma(1)
                    if has_k1:
                        T.barrier_arrive(empty_r[1])
                        if 2 * jp + 3 < n_steps:  # K1's right half, last read: the next odd block's
                            T.barrier_wait(empty_r[1], par)
                            T.tma_copy(KV[next1_w1 * PAGE_SIZE:next1_w1 * PAGE_SIZE + BLOCK_N, half:dv],
                                       KV_r[1, :, :], barrier=full_r[1])
                            T.barrier_arrive(full_r[1])
                    T.wait_wgmma(0)
                    T.barrier_arrive(empty_r[0])
                    T.barrier_arrive(empty_pe[0])
                    if 2 * jp + 2 < n_steps:      # K0's right half and P0's tile: the next even block's
                        T.barrier_wait(empty_r[0], par)
                        T.tma_copy(KV[next0_w1 * PAGE_SIZE:next0_w1 * PAGE_SIZE + BLOCK_N, half:dv], KV_r[0, :, :],
                                   barrier=full_r[0])
                        T.barrier_arrive(full_r[0])
                        T.barrier_wait(empty_pe[0], par)
                        T.tma_copy(K_pe[next0_w1 * PAGE_SIZE:next0_w1 * PAGE_SIZE + BLOCK_N, :], K_pe_s[0, :, :],
                                   barrier=full_pe[0])
                        T.barrier_arrive(full_pe[0])
                finish(1, acc_o1, m_i1, l_i1, l_other1, lse_r1, l_shared, stats, is_empty, bx, h0, sp,
                       lse, o_partial, Output)
            else:
                T.set_max_nreg(REGS_PRODUCER, 0)
                load_q(Q, Q_pe, Q_l, Q_r, Q_pe_s, q_full, bx, h0)
                for jp in T.serial(T.min(T.ceildiv(n_steps, 2), 1)):     # the first pair; the consumers load the rest
                    has_k1 = 2 * jp + 1 < n_steps
                    page0 = block_table[bx, blk_begin + 2 * jp]
                    page1 = block_table[bx, blk_begin + T.min(2 * jp + 1, n_steps - 1)]
                    # in the order the halves are freed in the pair before
                    T.barrier_wait(empty_l[0], 1 - jp % 2)
                    T.tma_copy(KV[page0 * PAGE_SIZE:page0 * PAGE_SIZE + BLOCK_N, 0:half], KV_l[0, :, :],
                               barrier=full_l[0])
                    T.barrier_arrive(full_l[0])
                    if has_k1:
                        T.barrier_wait(empty_r[1], 1 - jp % 2)
                        T.tma_copy(KV[page1 * PAGE_SIZE:page1 * PAGE_SIZE + BLOCK_N, half:dv], KV_r[1, :, :],
                                   barrier=full_r[1])
                        T.barrier_arrive(full_r[1])
                    T.barrier_wait(empty_r[0], 1 - jp % 2)
                    T.tma_copy(KV[page0 * PAGE_SIZE:page0 * PAGE_SIZE + BLOCK_N, half:dv], KV_r[0, :, :],
                               barrier=full_r[0])
                    T.barrier_arrive(full_r[0])
                    T.barrier_wait(empty_pe[0], 1 - jp % 2)
                    T.tma_copy(K_pe[page0 * PAGE_SIZE:page0 * PAGE_SIZE + BLOCK_N, :], K_pe_s[0, :, :],
                               barrier=full_pe[0])
                    T.barrier_arrive(full_pe[0])
                    if has_k1:
                        T.barrier_wait(empty_l[1], 1 - jp % 2)
                        T.tma_copy(KV[page1 * PAGE_SIZE:page1 * PAGE_SIZE + BLOCK_N, 0:half], KV_l[1, :, :],
                                   barrier=full_l[1])
                        T.barrier_arrive(full_l[1])
                        T.barrier_wait(empty_pe[1], 1 - jp % 2)
                        T.tma_copy(K_pe[page1 * PAGE_SIZE:page1 * PAGE_SIZE + BLOCK_N, :], K_pe_s[1, :, :],
                                   barrier=full_pe[1])
                        T.barrier_arrive(full_pe[1])

    return decode_prim_func(attention, h_q=h_q, dtype=dtype, split=split, dims=dims)
