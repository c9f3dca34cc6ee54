"""Host cost per call: what a Python callable costs above the bare compiled-kernel call.

Measured back to back (issue 24's method): ``calls`` calls in a row, one synchronisation at the
end, the median over ``repeats`` such loops, divided by ``calls``. For a tiny kernel the GPU
finishes each launch before the host issues the next one, so the figure is the host's time per
call: the launch path's price, not the kernel's.

``python -m tilelang_tutorial host-cost`` measures the tutorial's own layers on this machine's
GPU (the bare call of a compiled tiny kernel, :func:`runtime.run` around it, the plan-style
:func:`runtime.launcher`, and :func:`runtime.mode` alone). Any op can be measured the same way::

    from tilelang_tutorial import host_cost
    host_cost.print_table(host_cost.compare({"bare": lambda: kernel(x, out), "op": lambda: op(x)}))
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def _cuda_sync():
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else None


def per_call_us(fn: Callable[[], object], *, calls: int = 2000, repeats: int = 7, warmup: int = 100,
                sync: Callable[[], object] | None | str = "cuda") -> float:
    """Median microseconds per call of ``fn()`` over ``repeats`` loops of ``calls`` back-to-back
    calls, each loop ended by ``sync()`` (``"cuda"``: torch.cuda.synchronize where a GPU is
    visible; ``None``: no synchronisation, for host-only callables)."""
    if sync == "cuda":
        sync = _cuda_sync()
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    loops = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync:
            sync()
        loops.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(loops)


def compare(callables: dict[str, Callable[[], object]], **kwargs) -> dict[str, float]:
    """``{name: microseconds per call}`` for each callable, measured one after the other with
    :func:`per_call_us` (keyword arguments go to it)."""
    return {name: per_call_us(fn, **kwargs) for name, fn in callables.items()}


def print_table(costs: dict[str, float], *, bare: str = "bare") -> None:
    """One line per callable: its time per call and, where ``bare`` is measured, the excess."""
    base = costs.get(bare)
    for name, us in costs.items():
        extra = f"   {us - base:+7.2f} us above {bare}" if base is not None and name != bare else ""
        print(f"  {name:<34} {us:8.2f} us per call{extra}", flush=True)


def main(calls: int = 5000) -> int:
    """Measure the runtime's layers around a tiny compiled kernel (GPU), or only the mode check."""
    import torch

    from . import runtime

    m = runtime.mode()
    print(runtime.describe_mode(), flush=True)
    if not m.can_run:
        costs = compare({"runtime.mode()": runtime.mode}, calls=calls, sync=None)
        print_table(costs)
        print("the kernel-call figures need a CUDA GPU: run this again on one", flush=True)
        return 0
    kernel = runtime.compile_kernel(runtime.probe_program())
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    launch = runtime.launcher(kernel)
    costs = compare({
        "bare": lambda: kernel(x, y),
        "runtime.run(kernel, x, y)": lambda: runtime.run(kernel, x, y),
        "runtime.launcher(kernel)(x, y)": lambda: launch(x, y),
        "torch add_ (a torch launch)": lambda: y.add_(1.0),
    }, calls=calls)
    costs["runtime.mode() (host only)"] = per_call_us(runtime.mode, calls=calls, sync=None)
    print(f"host cost per call, {calls} calls back to back, median of 7 loops, on {m.device_name}:", flush=True)
    print_table(costs)
    return 0
