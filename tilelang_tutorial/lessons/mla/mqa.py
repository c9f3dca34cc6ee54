"""The ramp into MLA: decode attention where a group of query heads shares one key/value head.

One decode step of one sequence: ``heads`` query vectors (one per head) attend over the
sequence's ``seqlen`` keys and values, which all heads share (multi-query attention; a KV head of
grouped-query attention looks the same). Because the heads share K and V, the scores of one block
of tokens are a real matrix product, ``S = Q K^T`` with ``M = heads``, so the tensor cores do the
work, as they will in MLA.

The kernel is the FlashAttention loop with an online softmax, one CTA per sequence, one
warpgroup of 128 threads, no paging, no split. Notebook 04 builds MLA from it.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

LOG2E = 1.4426950408889634


def mqa_decode_program(heads: int = 64, dim: int = 128, dtype: str = "float16", *, block_N: int = 64,
                       num_stages: int = 2, softmax_scale: float | None = None):
    """``Out[b] = softmax(Q[b] K[b]^T * scale) V[b]`` over the first ``seqlens[b]`` tokens.

    ``Q (batch, heads, dim)``, ``K, V (batch, max_len, dim)``, ``seqlens (batch,) int32``,
    ``Out (batch, heads, dim)``; ``batch`` and ``max_len`` are dynamic.
    """
    import tilelang.language as T

    scale = float((softmax_scale if softmax_scale is not None else 1 / math.sqrt(dim)) * LOG2E)
    accum = "float32"
    batch, max_len = T.dynamic("batch"), T.dynamic("max_len")

    @T.prim_func
    def mqa_decode(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, max_len, dim], dtype),
                   V: T.Tensor([batch, max_len, dim], dtype), seqlens: T.Tensor([batch], "int32"),
                   Out: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(batch, threads=128) as bx:                     # one CTA per sequence
            Q_shared = T.alloc_shared([heads, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            P_shared = T.alloc_shared([heads, block_N], dtype)       # the block's probabilities, for P @ V
            acc_s = T.alloc_fragment([heads, block_N], accum)        # this block's scores
            acc_o = T.alloc_fragment([heads, dim], accum)            # the output, rescaled as we go
            m_i = T.alloc_fragment([heads], accum)                   # running max of each row
            m_prev = T.alloc_fragment([heads], accum)
            alpha = T.alloc_fragment([heads], accum)                 # exp(m_prev - m_i)
            l_i = T.alloc_fragment([heads], accum)                   # running softmax denominator
            row_sum = T.alloc_fragment([heads], accum)

            seqlen = seqlens[bx]
            T.copy(Q[bx, :, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -T.infinity(accum))

            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=num_stages):
                T.copy(K[bx, k * block_N, 0], K_shared)
                T.copy(V[bx, k * block_N, 0], V_shared)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(heads, block_N):              # tokens past the end do not exist
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j], -T.infinity(accum))
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)        # max(running max, this block's max)
                for i in T.Parallel(heads):
                    alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(heads):
                    l_i[i] = l_i[i] * alpha[i] + row_sum[i]
                T.copy(acc_s, P_shared)
                for i, j in T.Parallel(heads, dim):
                    acc_o[i, j] *= alpha[i]
                T.gemm(P_shared, V_shared, acc_o)

            for i, j in T.Parallel(heads, dim):
                acc_o[i, j] /= l_i[i]
            T.copy(acc_o, Out[bx, :, :])

    return mqa_decode


def mqa_decode_reference(q, k, v, seqlens, softmax_scale: float | None = None):
    """fp32 torch: each sequence's softmax(q k^T * scale) v over its first ``seqlens[b]`` tokens."""
    import torch

    scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(q.shape[-1])
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    for b, n in enumerate(seqlens.tolist()):
        s = q[b].float() @ k[b, :n].float().T * scale
        out[b] = torch.softmax(s, dim=-1) @ v[b, :n].float()
    return out

