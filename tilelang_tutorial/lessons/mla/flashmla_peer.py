"""FlashMLA's own Hopper decode kernel, the kernel the ``seesaw`` schedule follows, fed the lesson's inputs.

Optional, like FlashInfer: the benchmark records it when ``libflashmla_peer.so`` is there (built
from FlashMLA's sources by ``tools/gpu/build_flashmla_peer.sh`` into ``.gpu/``, or
named by ``TUTORIAL_FLASHMLA_LIB``) and says why not otherwise. It is called as FlashMLA's users call
it: its scheduler once per batch of lengths (``get_mla_metadata``), then each step the kernel and its
combine (``flash_mla_with_kvcache``), through the C entry points of ``flashmla_peer.cu`` on torch's
tensors. FlashMLA wants one cache ``(pages, 64, 1, 576)`` and one query ``(b, h_q, 576)``: the
lesson's two of each concatenated, the same numbers (so the peer holds a second copy of the cache).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from ... import checks
from .common import DIM_NOPE, DIM_PE, default_softmax_scale

LIB_ENV = "TUTORIAL_FLASHMLA_LIB"
DEFAULT_LIB = Path(__file__).resolve().parents[3] / ".gpu" / "libflashmla_peer.so"
_lib = None


def library_path() -> Path:
    return Path(os.environ.get(LIB_ENV) or DEFAULT_LIB)


def _load():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(library_path()))
        # flashmla_decode(bf16, b, h_q, num_pages, max_pages, scale, q, kcache, block_table, seqlens,
        # meta, num_splits, num_sm_parts, out, lse, lse_accum, o_accum, stream): flashmla_peer.cu
        lib.flashmla_decode.argtypes = ([ctypes.c_int] * 5 + [ctypes.c_float] + [ctypes.c_void_p] * 6
                                        + [ctypes.c_int] + [ctypes.c_void_p] * 5)
        lib.flashmla_schedule.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p]
        lib.flashmla_peer_sources.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def available() -> tuple[bool, str]:
    """(True, what was built: FlashMLA's and CUTLASS's commits) when the library loads, else (False,
    the reason)."""
    path = library_path()
    if not path.exists():
        return False, f"FlashMLA not built ({path} missing: tools/gpu/build_flashmla_peer.sh)"
    try:
        return True, _load().flashmla_peer_sources().decode()
    except (OSError, AttributeError) as exc:
        return False, f"{path} does not load: {type(exc).__name__}: {str(exc)[:160]}"


class FlashMLADecode:
    """The scheduler run at construction (once per batch of lengths), ``run()`` per step (what is
    timed): kernel and combine into ``self.out`` ``(b, h_q, 512)``."""

    def __init__(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, softmax_scale=None):
        import torch

        lib, dev = _load(), q_nope.device
        self.q = torch.cat([q_nope, q_pe], dim=-1).contiguous()                    # (b, h_q, 576)
        self.kcache = torch.cat([kv_cache, pe_cache], dim=-1).contiguous()           # (pages, 64, 1, 576)
        b, h_q, _ = self.q.shape
        self.block_table, self.seqlens = block_table.contiguous(), cache_seqlens.contiguous()
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.parts = lib.flashmla_num_sm_parts(sms, h_q)
        self.meta = torch.empty(self.parts, lib.flashmla_sched_meta_ints(), dtype=torch.int32, device=dev)
        self.splits = torch.empty(b + 1, dtype=torch.int32, device=dev)
        self.out = checks.poisoned((b, h_q, DIM_NOPE), q_nope.dtype, dev)   # an unwritten element cannot pass
        self.lse = torch.empty(b, h_q, dtype=torch.float32, device=dev)
        self.lse_accum = torch.empty(b + self.parts, h_q, dtype=torch.float32, device=dev)
        self.o_accum = torch.empty(b + self.parts, h_q, DIM_NOPE, dtype=torch.float32, device=dev)
        assert self.q.shape[-1] == DIM_NOPE + DIM_PE
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())                                # noqa: E731
        self._lib = lib
        self._args = (int(q_nope.dtype == torch.bfloat16), b, h_q, self.kcache.shape[0], self.block_table.shape[1],
                      float(softmax_scale or default_softmax_scale()),
                      *map(ptr, (self.q, self.kcache, self.block_table, self.seqlens, self.meta, self.splits)),
                      self.parts, *map(ptr, (self.out, self.lse, self.lse_accum, self.o_accum)))
        rc = lib.flashmla_schedule(b, ptr(self.seqlens), ptr(self.meta), ptr(self.splits), self.parts, self._stream())
        if rc:
            raise RuntimeError(f"FlashMLA's scheduler returned {rc}")

    @staticmethod
    def _stream():
        import torch

        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def run(self):
        rc = self._lib.flashmla_decode(*self._args, self._stream())
        if rc:
            raise RuntimeError(f"FlashMLA's decode returned {rc}")
        return self.out
