"""The runtime mode: the one place that decides how kernels are built and whether they can run.

Two modes, one code path:

* a CUDA GPU is visible to torch -> kernels are compiled for *that* GPU's architecture,
  launched, checked against their references and timed;
* no GPU -> kernels are compiled for a named architecture (Hopper, ``sm_90a``, unless the
  reader picks another with :func:`set_arch` or ``TILELANG_TUTORIAL_ARCH``). nvcc still runs,
  so the generated CUDA, PTX and inferred layouts are real; only launching is impossible.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from typing import Any

ARCH_ENV = "TILELANG_TUTORIAL_ARCH"
DEFAULT_COMPILE_ONLY_ARCH = "sm_90a"
#: The architectures the tutorial's kernels are written and tested for.
ACCEPTED_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
_ARCH_NAMES = {
    "sm_80": "Ampere (A100)",
    "sm_86": "Ampere (RTX 30xx / A10)",
    "sm_89": "Ada (L4 / RTX 40xx)",
    "sm_90": "Hopper without the 'a' features (no wgmma / setmaxnreg)",
    "sm_90a": "Hopper (H100 / H200)",
}

_arch_override: str | None = None


class ArchError(ValueError):
    """An architecture name the tutorial does not know."""


class NoGPUError(RuntimeError):
    """Raised when something needs to launch a kernel and no CUDA GPU is visible."""


def validate_arch(arch: str) -> str:
    arch = str(arch).strip()
    if arch not in ACCEPTED_ARCHS:
        raise ArchError(
            f"unknown CUDA architecture {arch!r}; accepted values are: {', '.join(ACCEPTED_ARCHS)}"
            f" (set with tilelang_tutorial.set_arch(...) or the {ARCH_ENV} environment variable)"
        )
    return arch


def set_arch(arch: str | None) -> None:
    """Choose the architecture kernels are compiled for (``None`` restores the default)."""
    global _arch_override
    _arch_override = None if arch is None else validate_arch(arch)


@contextlib.contextmanager
def arch_override(arch: str):
    """Compile for ``arch`` inside a ``with`` block, then restore the previous choice."""
    global _arch_override
    previous = _arch_override
    set_arch(arch)
    try:
        yield arch
    finally:
        _arch_override = previous


def gpu_available() -> bool:
    """True when torch sees a CUDA GPU that kernels can be launched on."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return False
    return bool(torch.cuda.is_available())


def _gpu_arch() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    # Hopper's wgmma/TMA/setmaxnreg need the arch-specific "a" variant.
    return "sm_90a" if arch == "sm_90" else arch


def current_arch() -> str:
    """The architecture kernels are compiled for right now.

    Order: :func:`set_arch`, then ``TILELANG_TUTORIAL_ARCH``, then the visible GPU, then sm_90a.
    """
    if _arch_override is not None:
        return _arch_override
    env = os.environ.get(ARCH_ENV, "").strip()
    if env:
        return validate_arch(env)
    if gpu_available():
        return _gpu_arch()
    return DEFAULT_COMPILE_ONLY_ARCH


def target(arch: str | None = None) -> dict[str, str]:
    """The explicit TileLang target dict (auto-detection raises without a GPU)."""
    return {"kind": "cuda", "arch": validate_arch(arch) if arch else current_arch()}


@dataclass(frozen=True)
class Mode:
    can_run: bool
    arch: str
    device_name: str | None

    @property
    def name(self) -> str:
        return "gpu" if self.can_run else "compile-only"


def mode() -> Mode:
    """The current mode: whether kernels can run, and the architecture they are built for."""
    can_run = gpu_available()
    name = None
    if can_run:
        import torch

        name = torch.cuda.get_device_name()
    arch = current_arch()
    if can_run and arch != _gpu_arch():
        # Compiling for another chip than the one present: compile-only for that chip.
        can_run = False
    return Mode(can_run=can_run, arch=arch, device_name=name)


def describe_mode() -> str:
    """One sentence for a reader: what will and will not run here."""
    m = mode()
    label = _ARCH_NAMES.get(m.arch, m.arch)
    if m.can_run:
        return (
            f"GPU mode: kernels are compiled for {m.arch} ({label}) and run on this "
            f"{m.device_name}; results are checked against torch and latencies are measured here."
        )
    if m.device_name:
        return (
            f"Compile-only mode: a {m.device_name} is present but kernels are compiled for {m.arch} "
            f"({label}), so they are not launched; latencies shown are recorded ones."
        )
    return (
        f"Compile-only mode: no CUDA GPU is visible, so kernels are compiled for {m.arch} "
        f"({label}) with nvcc and their CUDA, PTX and layouts are real, but nothing is launched; "
        f"latencies shown are recorded GPU measurements from results/, labelled as such."
    )


def require_gpu(what: str = "this") -> None:
    """Raise a clear error when ``what`` needs a GPU run and the mode cannot run kernels."""
    m = mode()
    if not m.can_run:
        raise NoGPUError(f"{what} needs a CUDA GPU to launch kernels. {describe_mode()}")


def nvcc_path() -> str | None:
    """nvcc, where TileLang will find it."""
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home and os.path.exists(os.path.join(cuda_home, "bin", "nvcc")):
        return os.path.join(cuda_home, "bin", "nvcc")
    return shutil.which("nvcc")


def compile_kernel(
    program: Any,
    *,
    out_idx: list[int] | int | None = None,
    pass_configs: dict[str, Any] | None = None,
    arch: str | None = None,
):
    """Compile a TileLang ``T.prim_func`` for the current (or the given) architecture.

    Every kernel in the tutorial is built through here, so the GPU and compile-only modes share
    one code path: the only difference is the ``arch`` in the explicit target.
    """
    import tilelang

    return tilelang.compile(program, out_idx=out_idx, target=target(arch), pass_configs=pass_configs)


def probe_program(block: int = 256):
    """A tiny kernel, ``y = x + 1`` over a 1-D float32 tensor of any length, that ``doctor`` uses
    to check the toolchain (and, where it can, running it)."""
    import tilelang.language as T

    n = T.dynamic("n")

    @T.prim_func
    def add_one(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] + 1

    return add_one


def compile_parallel(jobs, build, *, workers: int | None = None, verbose: bool = True,
                     describe=str) -> dict:
    """Compile many kernels at once: ``{job: build(job) or the exception it raised}``.

    Threads are enough: TileLang's lowering releases the GIL and nvcc runs as a subprocess. A job
    whose build fails (a configuration the compiler rejects) is reported and kept as its exception.
    """
    import concurrent.futures
    import time

    import tilelang  # noqa: F401  -- import TileLang (and its TVM) once, before the threads start
    import tilelang.language  # noqa: F401

    jobs = list(dict.fromkeys(jobs))
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    done = {}
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(build, job): job for job in jobs}
        for fut in concurrent.futures.as_completed(futures):
            job = futures[fut]
            try:
                done[job] = fut.result()
            except Exception as exc:
                done[job] = exc
                if verbose:
                    first = (str(exc).strip().splitlines() or [""])[0][:160]
                    print(f"  compile FAILED {describe(job)}: {type(exc).__name__}: {first}", flush=True)
    if verbose:
        ok = sum(not isinstance(v, Exception) for v in done.values())
        print(f"compiled {ok}/{len(jobs)} kernels in {time.time() - t0:.0f} s with {workers} threads", flush=True)
    return done
