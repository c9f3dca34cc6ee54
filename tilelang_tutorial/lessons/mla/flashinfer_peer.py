"""FlashInfer's MLA decode, the peer a serving engineer would pick, fed the lesson's inputs.

FlashInfer (``flashinfer-python``) is optional: the benchmark records it when it imports and
says why not otherwise. Its MLA wrapper plans once per batch and runs many times, like
:class:`.op.MLADecodePlan`. The inputs are the lesson's paged cache, unchanged: FlashInfer reads
the latent cache as ``(pages, page_size, 512)`` and the rope cache as ``(pages, page_size, 64)``
(views of ours), and a CSR page list built from our block table.
"""
from __future__ import annotations

from .common import DIM_NOPE, DIM_PE, PAGE_SIZE, default_softmax_scale

#: FlashInfer's Hopper backend for MLA (the one its docs recommend on sm_90a)
BACKEND = "fa3"
WORKSPACE_BYTES = 128 << 20


def available() -> tuple[bool, str]:
    """(True, version) when FlashInfer imports, else (False, the reason)."""
    try:
        import flashinfer
    except Exception as exc:                     # not installed, or its native part fails to load
        return False, f"flashinfer not importable: {type(exc).__name__}: {str(exc)[:160]}"
    return True, getattr(flashinfer, "__version__", "unknown")


def csr_metadata(block_table, cache_seqlens):
    """FlashInfer's CSR form of a paged batch: query offsets (one token per sequence), page
    offsets, the pages each sequence uses, and the lengths (built on the host: planning time)."""
    import torch

    lens = cache_seqlens.to("cpu", torch.int64)
    pages = (lens + PAGE_SIZE - 1) // PAGE_SIZE
    bt = block_table.to("cpu")
    kv_indices = torch.cat([bt[i, : int(pages[i])] for i in range(bt.shape[0])]).to(torch.int32)
    kv_indptr = torch.zeros(bt.shape[0] + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(pages, 0).to(torch.int32)
    qo_indptr = torch.arange(bt.shape[0] + 1, dtype=torch.int32)
    device = block_table.device
    return (qo_indptr.to(device), kv_indptr.to(device), kv_indices.to(device),
            cache_seqlens.to(torch.int32))


class FlashInferMLA:
    """``plan`` at construction (host work, once), ``run()`` per call (what is timed)."""

    def __init__(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, softmax_scale=None):
        import flashinfer
        import torch
        from flashinfer.mla import BatchMLAPagedAttentionWrapper

        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.int8, device=q_nope.device)
        self.wrapper = BatchMLAPagedAttentionWrapper(self.workspace, backend=BACKEND)
        qo_indptr, kv_indptr, kv_indices, kv_len = csr_metadata(block_table, cache_seqlens)
        self.wrapper.plan(
            metadata=flashinfer.mla.MLAPlanMetadata.csr(qo_indptr, kv_indptr, kv_indices, kv_len),
            num_heads=q_nope.shape[1], head_dim_ckv=DIM_NOPE, head_dim_kpe=DIM_PE, page_size=PAGE_SIZE,
            causal=False, sm_scale=float(softmax_scale or default_softmax_scale()),
            q_data_type=q_nope.dtype, kv_data_type=kv_cache.dtype,
            query_layout="split", kv_cache_layout="split",
        )
        self.query = (q_nope, q_pe)
        self.kv = (kv_cache.view(kv_cache.shape[0], PAGE_SIZE, DIM_NOPE),
                   pe_cache.view(pe_cache.shape[0], PAGE_SIZE, DIM_PE))
        self.out = torch.empty_like(q_nope)

    def run(self):
        return self.wrapper.run(query=self.query, kv_cache=self.kv, out=self.out)
