"""The MLA decode reference in plain torch (fp32, any device) and random paged inputs."""
from __future__ import annotations

import math

from .common import DIM_NOPE, DIM_PE, LOG2E, PAGE_SIZE, default_softmax_scale


def _sequence_scores(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, scale: float, dtype):
    """For each sequence ``i``: ``(i, c, s)``, its ``n = cache_seqlens[i]`` tokens gathered through
    ``block_table`` (``c (n, 512)``: keys and values) and its scores ``s = q k^T * scale (h_q, n)``,
    in ``dtype``."""
    page = kv_cache.shape[1]
    kv = kv_cache.reshape(kv_cache.shape[0], page, -1)
    pe = pe_cache.reshape(pe_cache.shape[0], page, -1)
    for i, n in enumerate(int(x) for x in cache_seqlens.tolist()):
        pages = block_table[i, : math.ceil(n / page)].long()
        c = kv[pages].reshape(-1, kv.shape[-1])[:n].to(dtype)          # (n, 512): keys and values
        k_pe = pe[pages].reshape(-1, pe.shape[-1])[:n].to(dtype)       # (n, 64)
        yield i, c, (q_nope[i].to(dtype) @ c.T + q_pe[i].to(dtype) @ k_pe.T) * scale


def mla_decode_reference(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                         softmax_scale: float | None = None):
    """Plain torch MLA decode over the paged cache, in fp32, one sequence at a time.

    Gathers each sequence's pages through ``block_table``, keeps its first ``cache_seqlens[b]``
    tokens and computes ``softmax(q k^T * scale) @ c``. Runs on any device (CPU included).
    """
    import torch

    scale = softmax_scale if softmax_scale is not None else default_softmax_scale()
    out = torch.empty(q_nope.shape, dtype=torch.float32, device=q_nope.device)
    for i, c, s in _sequence_scores(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, scale,
                                    torch.float32):
        out[i] = torch.softmax(s, dim=-1) @ c
    return out


def split_lse_reference(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *, num_split: int,
                        softmax_scale: float | None = None):
    """Each split's log-sum-exp of the scores, as the split kernels write ``lse (b, h_q, num_split)``:
    in fp64, in log2 units (``log2 sum_j 2^(s_j * log2 e)``), ``-inf`` for an empty split. A
    split's share is the one of :func:`.common.split_range_macro`: whole pages, ``ceil(pages /
    num_split)`` to a split."""
    import torch

    scale = softmax_scale if softmax_scale is not None else default_softmax_scale()
    page = kv_cache.shape[1]
    lse = torch.full((*q_nope.shape[:2], num_split), -math.inf, dtype=torch.float64, device=q_nope.device)
    for i, _, s in _sequence_scores(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, scale,
                                    torch.float64):
        n_pages = math.ceil(s.shape[1] / page)
        per_split = math.ceil(n_pages / num_split)
        for sp in range(num_split):
            if sp * per_split < n_pages:
                share = s[:, sp * per_split * page:(sp + 1) * per_split * page]
                lse[i, :, sp] = torch.logsumexp(share, dim=-1) * LOG2E     # log2 sum 2^(s log2 e)
    return lse


#: the rotary offsets of :func:`make_paged_inputs`' sequences 1, 5, 9, ... (scores far below zero)
#: and 3, 7, 11, ... (scores past fp16's 65,504)
NEGATIVE_PE, LARGE_PE = 16.0, 40.0
#: the values of :func:`make_paged_inputs`' flat last sequence: 64 tokens of them sum past 65,504
FLAT_LARGE_VALUE = 1500.0


def make_paged_inputs(batch: int, h_q: int, seqlens, *, dtype=None, device="cpu",
                      seed: int = 0, extra_pages: int = 3, flat_large_last: bool = False):
    """Random MLA decode inputs with a *shuffled* page table (pages of a sequence are not
    contiguous), so indexing mistakes show up. Returns a dict of tensors for ``mla_decode``;
    ``dtype`` defaults to float16.

    Every second sequence has scores of extreme size, with the usual spread of about one unit
    between tokens: its rotary parts are ``k_pe = c + N(0, 1/64)`` and ``q_pe = -c + N(0, 1/64)``
    (sequences 1, 5, ..., ``c`` = 16) or ``q_pe = c + N(0, 1/64)`` (sequences 3, 7, ..., ``c`` =
    40), so ``q_pe . k_pe`` is about ``-64 c^2`` = -16384 (-683 after the scale) or ``64 c^2`` =
    102400. Far below zero, a running max started at 0 instead of -inf weighs every token
    ``2^-985`` = 0 (0 / 0), and a score, a max or a log-sum-exp kept in fp16 is off by up to 8
    (half a unit in the last place of 16384; a third of a unit after the scale): visibly wrong
    softmax weights. Past 65,504, a score or a max kept in fp16 is inf (inf - inf = NaN). The other
    sequences are plain N(0, 1).

    ``flat_large_last`` (for the checks): the last sequence's values are of one sign, near
    :data:`FLAT_LARGE_VALUE`, and its scores are flat page by page: every head's query is zero but
    for one rotary component, 16, whose key is 11.5 over the sequence's first page and 0 after it,
    so each head scores 184 on the first page's tokens (softmax weight 1) and 0 on every later
    token (weight ``exp(-184 / sqrt(576))`` = 4.7e-4). The first page's ``P V`` passes fp16's
    65,504 while the output stays near the values, so an output accumulator narrowed to fp16
    gives inf; and each later page adds 0.03 to a softmax denominator of 64, less than half a unit
    in fp16's last place there (0.0625), so a denominator narrowed to fp16 drops every later page
    (4.7e-4 of it per page: past fp16's tolerance of 2e-3 after five full pages in one split)."""
    import torch

    dtype = dtype or torch.float16
    gen = torch.Generator().manual_seed(seed)
    seqlens = [int(s) for s in seqlens]
    assert len(seqlens) == batch
    pages_per_seq = [math.ceil(s / PAGE_SIZE) for s in seqlens]
    max_pages = max(pages_per_seq)
    num_pages = sum(pages_per_seq) + extra_pages
    perm = torch.randperm(num_pages, generator=gen)
    block_table = torch.zeros(batch, max_pages, dtype=torch.int32)
    pos = 0
    for i, n in enumerate(pages_per_seq):
        block_table[i, :n] = perm[pos:pos + n].to(torch.int32)
        pos += n

    from ...checks import random_tensor

    def rnd(shape, k):  # drawn directly on ``device`` (a 5 GB cache must not go through the CPU)
        return random_tensor(shape, dtype, device, seed=seed * 16 + k)

    q_pe, pe_cache = rnd((batch, h_q, DIM_PE), 2), rnd((num_pages, PAGE_SIZE, 1, DIM_PE), 4)
    for i in range(1, batch, 2):   # scores of extreme size (see above)
        pages = block_table[i, :pages_per_seq[i]].long().to(device)
        q_offset = -NEGATIVE_PE if i % 4 == 1 else LARGE_PE
        q_pe[i] = (q_pe[i].float() / 8 + q_offset).to(dtype)
        pe_cache[pages] = (pe_cache[pages].float() / 8 + abs(q_offset)).to(dtype)
    q_nope, kv_cache = rnd((batch, h_q, DIM_NOPE), 1), rnd((num_pages, PAGE_SIZE, 1, DIM_NOPE), 3)
    if flat_large_last:
        pages = block_table[-1, :pages_per_seq[-1]].long().to(device)
        q_nope[-1], q_pe[-1], pe_cache[pages] = 0, 0, 0
        q_pe[-1, :, 0], pe_cache[pages[0], :, :, 0] = 16, 11.5
        kv_cache[pages] = (kv_cache[pages].float() * FLAT_LARGE_VALUE / 16 + FLAT_LARGE_VALUE).to(dtype)
    return {
        "q_nope": q_nope,
        "q_pe": q_pe,
        "kv_cache": kv_cache,
        "pe_cache": pe_cache,
        "block_table": block_table.to(device),
        "cache_seqlens": torch.tensor(seqlens, dtype=torch.int32).to(device),
    }
