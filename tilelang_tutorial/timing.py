"""Timing on the GPU and the ceilings every figure is compared with.

Medians of CUDA-event timings after warm-up (``triton.testing.do_bench`` flushes L2 between
runs and returns the median). Ceilings are measured in the same run as the kernels they judge:
device-to-device copy bandwidth (the floor for memory-bound kernels) and torch matmul throughput
(cuBLAS; the floor for compute-bound ones).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .runtime import require_gpu


def median_ms(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median latency of ``fn()`` in milliseconds (CUDA events, after warm-up, L2 flushed)."""
    require_gpu("timing")
    try:
        from triton.testing import do_bench
    except ImportError:
        return _median_ms_events(fn, warmup=10, rep=50)
    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def _median_ms_events(fn, *, warmup: int, rep: int) -> float:
    import statistics

    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rep):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def kernel_timeline(fn: Callable[[], object], *, iterations: int = 30, flush_bytes: int = 256 << 20) -> list[list[dict]]:
    """The kernels of each call of ``fn()`` as the GPU ran them (torch profiler, device clocks).

    Like :func:`median_ms`, each call follows an L2 flush (a ``flush_bytes`` memset, as
    ``do_bench`` does), so caches start as cold as in the timed runs. Returns one list per call,
    one ``{"name", "start_us", "end_us"}`` per kernel, times relative to the end of that call's
    flush -- so the first kernel's ``start_us`` is the launch gap a CUDA-event timing also sees.
    A call is recognised by its flush (torch's fill kernel), so ``fn`` must not launch one itself.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    require_gpu("a kernel timeline")
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    calls = []
    for e in kernels:
        if "elementwise" in e.name or "fill" in e.name.lower():      # the flush: a new call begins
            calls.append({"t0": e.time_range.end, "kernels": []})
        elif calls:
            calls[-1]["kernels"].append({"name": e.name, "start_us": e.time_range.start - calls[-1]["t0"],
                                         "end_us": e.time_range.end - calls[-1]["t0"]})
    return [c["kernels"] for c in calls if c["kernels"]]


@dataclass(frozen=True)
class Ceilings:
    copy_gbps: float          # device-to-device copy, bytes read + written per second / 1e9
    matmul_tflops: dict       # dtype name -> torch matmul TFLOP/s at matmul_size^3
    matmul_size: int

    def as_dict(self) -> dict:
        return {"copy_gbps": self.copy_gbps, "matmul_tflops": dict(self.matmul_tflops),
                "matmul_size": self.matmul_size}


def measure_copy_gbps(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth, counting bytes read and written (GB/s)."""
    import torch

    require_gpu("measuring copy bandwidth")
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


def measure_matmul_tflops(dtype: str = "float16", n: int = 8192) -> float:
    """torch (cuBLAS) ``a @ b`` throughput at n^3 on fresh random data (TFLOP/s)."""
    import torch

    require_gpu("measuring matmul throughput")
    tdt = getattr(torch, dtype)
    a = torch.randn(n, n, device="cuda", dtype=tdt)
    b = torch.randn(n, n, device="cuda", dtype=tdt)
    ms = median_ms(lambda: a @ b)
    return 2 * n**3 / (ms * 1e-3) / 1e12


_cached: Ceilings | None = None


def measure_ceilings(dtypes=("float16", "bfloat16"), n: int = 8192) -> Ceilings:
    """Measure (once per process) the copy-bandwidth and matmul ceilings of this GPU."""
    global _cached
    if _cached is None or set(dtypes) - set(_cached.matmul_tflops):
        _cached = Ceilings(
            copy_gbps=measure_copy_gbps(),
            matmul_tflops={d: measure_matmul_tflops(d, n) for d in dtypes},
            matmul_size=n,
        )
    return _cached


def roofline_floor_ms(*, nbytes: float = 0.0, flops: float = 0.0, copy_gbps: float, matmul_tflops: float) -> float:
    """The roofline floor: the larger of bytes / copy bandwidth and FLOPs / matmul peak."""
    return max(nbytes / (copy_gbps * 1e9), flops / (matmul_tflops * 1e12)) * 1e3
