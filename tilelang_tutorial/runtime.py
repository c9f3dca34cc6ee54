"""The runtime mode: the one place that decides how kernels are built and where they run.

Three modes, one code path (:func:`compile_kernel` to build, :func:`run` to run):

* **gpu** -- a CUDA GPU is visible to torch: kernels are compiled for *that* GPU's
  architecture, launched on it, checked against their references and timed;
* **emulated** -- no GPU: kernels are still compiled for a named architecture (Hopper,
  ``sm_90a``, unless the reader picks another with :func:`set_arch` or
  ``TILELANG_TUTORIAL_ARCH``), so the generated CUDA, PTX and inferred layouts are real, and
  :func:`run` executes them in the tile emulator (:mod:`tilelang_tutorial.emulate`) on CPU
  tensors: correctness only, no timing;
* **emulated on a GPU machine** -- ``TILELANG_TUTORIAL_EMULATE=1`` (or :func:`force_emulation`)
  makes a GPU machine emulate too, so the two can be compared.

Where no nvcc exists at all (macOS), :func:`compile_kernel` returns an :class:`UncompiledKernel`
that still runs in the emulator and says plainly that there is no generated code.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
from dataclasses import dataclass
from typing import Any

ARCH_ENV = "TILELANG_TUTORIAL_ARCH"
EMULATE_ENV = "TILELANG_TUTORIAL_EMULATE"
DEFAULT_COMPILE_ONLY_ARCH = "sm_90a"


@dataclass(frozen=True)
class Arch:
    """What the tutorial knows about one target architecture."""

    name: str                     # the TileLang / nvcc target, e.g. "sm_90a"
    label: str                    # the GPUs it means
    smem_per_block: int           # bytes of shared memory one block may use (opt-in maximum)
    sm_count: int                 # SMs of the GPU the tutorial assumes when none is visible
    pass_configs: tuple = ()      # TileLang pass configs every build for this arch gets
    note: str = ""


#: The architectures the tutorial compiles for. Where a GPU is visible its compute capability
#: picks one (:func:`arch_for_capability`); without one, ``sm_90a`` unless the reader chooses.
#: Shared memory per block: the CUDA programming guide's opt-in maxima (the same figures CUTLASS
#: ships as ``smXX_smem_capacity_bytes``).
ARCHS = {
    "sm_80": Arch("sm_80", "Ampere (A100)", 166912, 108),
    "sm_86": Arch("sm_86", "Ampere (RTX 30xx / A10)", 101376, 84),
    "sm_89": Arch("sm_89", "Ada (L4 / RTX 40xx)", 101376, 58),
    "sm_90a": Arch("sm_90a", "Hopper (H100 / H200)", 232448, 132),
    "sm_100a": Arch("sm_100a", "Blackwell (B200 / GB200)", 232448, 148),
    "sm_120a": Arch("sm_120a", "Blackwell (RTX 50xx / RTX PRO)", 101376, 170),
    # The plain name, without the arch-specific features: TileLang 0.1.15 warp-specializes every
    # pipelined loop on a TMA-capable target and then emits setmaxnreg, which only the 'a'
    # targets have; without warp specialization the same loops become cp.async pipelines.
    "sm_120": Arch("sm_120", "Blackwell (RTX 50xx), portable sm_120 code", 101376, 170,
                   pass_configs=(("tl.disable_warp_specialized", True),),
                   note="no setmaxnreg: warp specialization is switched off"),
}
ACCEPTED_ARCHS = tuple(ARCHS)
_ARCH_NAMES = {name: a.label for name, a in ARCHS.items()}


def arch_for_capability(major: int, minor: int) -> str:
    """The target for a GPU of compute capability ``(major, minor)``: the arch-specific ``a``
    variant from Hopper on (what TileLang's own detection does), e.g. (9, 0) -> sm_90a,
    (10, 0) -> sm_100a, (12, 0) -> sm_120a."""
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")

_arch_override: str | None = None
_force_emulation: bool | None = None


class ArchError(ValueError):
    """An architecture name the tutorial does not know."""


class NoGPUError(RuntimeError):
    """Raised when something needs to launch a kernel and no CUDA GPU is visible."""


def validate_arch(arch: str) -> str:
    arch = str(arch).strip()
    if arch not in ACCEPTED_ARCHS:
        hint = ""
        if arch in ("sm_90", "sm_100"):
            hint = (f" ({arch} without 'a' lacks setmaxnreg, which TileLang's pipelined kernels emit "
                    f"on every TMA-capable target: use {arch}a)")
        raise ArchError(
            f"unknown CUDA architecture {arch!r}{hint}; accepted values are: {', '.join(ACCEPTED_ARCHS)}"
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


@functools.lru_cache(maxsize=None)
def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name()


@functools.lru_cache(maxsize=None)
def _gpu_arch() -> str:
    import torch

    return arch_for_capability(*torch.cuda.get_device_capability())


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
        return validate_arch(_gpu_arch())
    return DEFAULT_COMPILE_ONLY_ARCH


def target(arch: str | None = None) -> dict[str, str]:
    """The explicit TileLang target dict (auto-detection raises without a GPU)."""
    return {"kind": "cuda", "arch": validate_arch(arch) if arch else current_arch()}


@dataclass(frozen=True)
class Mode:
    name: str                 # "gpu" or "emulated"
    arch: str                 # what kernels are compiled for
    device_name: str | None   # the GPU present, if any
    can_compile: bool         # nvcc found: generated CUDA / PTX are available
    why_emulated: str = ""    # "no GPU", "forced", "another architecture"

    @property
    def can_run(self) -> bool:
        """True when kernels launch on a GPU here (timing is possible)."""
        return self.name == "gpu"

    @property
    def device(self) -> str:
        """Where the notebooks put their tensors: ``"cuda"`` or ``"cpu"`` (for the emulator)."""
        return "cuda" if self.name == "gpu" else "cpu"


def force_emulation(on: bool | None = True) -> None:
    """Run kernels in the emulator even where a GPU is present (``None``: back to the default,
    which follows ``TILELANG_TUTORIAL_EMULATE``)."""
    global _force_emulation
    _force_emulation = on


def _emulation_forced() -> bool:
    if _force_emulation is not None:
        return _force_emulation
    return os.environ.get(EMULATE_ENV, "").strip() not in ("", "0")


def mode() -> Mode:
    """The current mode: where kernels run, and the architecture they are compiled for."""
    gpu = gpu_available()
    name = _device_name() if gpu else None
    arch = current_arch()
    can_compile = nvcc_path() is not None
    if gpu and _emulation_forced():
        return Mode("emulated", arch, name, can_compile, "forced")
    if gpu and arch != _gpu_arch():
        return Mode("emulated", arch, name, can_compile, "another architecture")
    if gpu:
        return Mode("gpu", arch, name, can_compile)
    return Mode("emulated", arch, None, can_compile, "no GPU")


def describe_mode() -> str:
    """One sentence for a reader: where kernels run here, and what that means for the numbers."""
    m = mode()
    label = _ARCH_NAMES.get(m.arch, m.arch)
    if m.can_run:
        return (f"GPU mode: kernels are compiled for {m.arch} ({label}) and run on this {m.device_name}; "
                f"results are checked against torch and latencies are measured here.")
    built = (f"kernels are compiled for {m.arch} ({label}) with nvcc, so their CUDA, PTX and layouts are real, "
             "and they run"
             if m.can_compile else
             "no nvcc was found, so kernels are not compiled (no generated CUDA or PTX here; set CUDA_HOME or "
             "run ./tutorial setup to install NVIDIA's nvcc from PyPI), but they still run")
    why = {"no GPU": "no CUDA GPU is visible",
           "forced": f"{EMULATE_ENV}=1 asks for emulation although a {m.device_name} is present",
           "another architecture": f"a {m.device_name} is present but kernels are built for {m.arch}"}[m.why_emulated]
    return (f"Emulated mode: {why}; {built} in the tile emulator on the CPU -- emulated on CPU, "
            f"correctness only, no timing. Latencies shown are recorded GPU measurements, labelled as such.")


def require_gpu(what: str = "this") -> None:
    """Raise a clear error when ``what`` needs a GPU (timing, a real launch) and there is none."""
    m = mode()
    if not m.can_run:
        raise NoGPUError(f"{what} needs a CUDA GPU. {describe_mode()}")


class UncompiledKernel:
    """What :func:`compile_kernel` returns where nvcc is missing: the program, runnable in the
    emulator; asking for generated code says why there is none."""

    def __init__(self, program, arch: str, out_idx=None):
        self.prim_func = program
        self.arch = arch
        self.out_idx = out_idx

    def _missing(self, *_a, **_k):
        raise RuntimeError("this kernel was not compiled: no nvcc was found (set CUDA_HOME, or run "
                           "./tutorial setup to install NVIDIA's nvcc from PyPI); it can still run in the emulator")

    get_kernel_source = get_host_source = export_ptx = _missing

    def __call__(self, *args, **scalars):
        return run(self, *args, **scalars)


def launcher(kernel):
    """What :func:`run` would do with ``kernel``, decided once: a callable taking the kernel's
    arguments. Plans keep one, so their fast path pays no mode check per call."""
    m = mode()
    if m.can_run and not isinstance(kernel, UncompiledKernel) and hasattr(kernel, "get_kernel_source"):
        return kernel
    from . import emulate

    return functools.partial(emulate.run, kernel)


def run(kernel, *args, **scalars):
    """Run a kernel the way this machine can: launched on the GPU in GPU mode (CUDA tensors), in
    the tile emulator otherwise (CPU tensors; the kernel's ``T.prim_func`` runs unchanged).

    ``kernel`` is what :func:`compile_kernel` / ``tilelang.compile`` returned, or a ``T.prim_func``
    (emulated mode only). Returns what the kernel returns (its outputs when it has ``out_idx``).
    """
    m = mode()
    if m.can_run and not isinstance(kernel, UncompiledKernel) and hasattr(kernel, "get_kernel_source"):
        return kernel(*args, **scalars) if not scalars else kernel(*args, *scalars.values())
    from . import emulate

    return emulate.run(kernel, *args, **scalars)


def nvcc_path() -> str | None:
    """nvcc, where TileLang will find it."""
    return _nvcc_lookup(os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _nvcc_lookup(cuda_home: str | None, path: str) -> str | None:
    # cached per (CUDA_HOME, PATH): every op call asks for the mode, and a PATH walk is slow.
    # The order is TileLang 0.1.15's (tilelang/env.py): CUDA_HOME, nvcc on PATH, then NVIDIA's
    # PyPI compiler (nvidia-cuda-nvcc >= 13, what ./tutorial setup installs where no toolkit is).
    if cuda_home and os.path.exists(os.path.join(cuda_home, "bin", "nvcc")):
        return os.path.join(cuda_home, "bin", "nvcc")
    return shutil.which("nvcc", path=path) or pypi_nvcc()


def pypi_nvcc() -> str | None:
    """nvcc from the ``nvidia-cuda-nvcc`` wheel (``site-packages/nvidia/cu13/bin/nvcc``), if installed."""
    import importlib.metadata

    try:
        files = importlib.metadata.files("nvidia-cuda-nvcc") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "nvcc" and os.access(str(f.locate()), os.X_OK):
            return str(f.locate())
    return None


def compile_kernel(
    program: Any,
    *,
    out_idx: list[int] | int | None = None,
    pass_configs: dict[str, Any] | None = None,
    arch: str | None = None,
):
    """Compile a TileLang ``T.prim_func`` for the current (or the given) architecture.

    Every kernel in the tutorial is built through here, so all modes share one code path: the
    only difference is the ``arch`` in the explicit target. Without nvcc it returns an
    :class:`UncompiledKernel` (the emulator can still run it).
    """
    import tilelang

    arch = arch or current_arch()
    if nvcc_path() is None:
        return UncompiledKernel(program, arch, out_idx)
    configs = dict(ARCHS[arch].pass_configs) if arch in ARCHS else {}
    configs.update(pass_configs or {})
    return tilelang.compile(program, out_idx=out_idx, target=target(arch), pass_configs=configs or None)


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


def _run_build(target: str, job):
    import importlib

    module, _, name = target.partition(":")
    getattr(importlib.import_module(module), name)(job)


def precompile(jobs, target: str, *, workers: int | None = None) -> dict:
    """Compile many kernels in worker *processes*: ``{job: None or the exception it raised}``.

    ``target`` is ``"package.module:function"``; each worker imports it and calls it with a job.
    The compiled kernels land in TileLang's disk cache (``TILELANG_CACHE_DIR``), so building the
    same kernel afterwards in this process loads it instead of compiling. Processes, not threads:
    TileLang's lowering holds the GIL (measured: 2 threads compile 8 kernels no faster than 1).
    """
    import concurrent.futures
    import multiprocessing

    jobs = list(dict.fromkeys(jobs))
    if not jobs:
        return {}
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    out = {}
    ctx = multiprocessing.get_context("spawn")       # never fork a process that may hold CUDA
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        futures = {pool.submit(_run_build, target, job): job for job in jobs}
        for fut in concurrent.futures.as_completed(futures):
            try:
                fut.result()
                out[futures[fut]] = None
            except Exception as exc:
                out[futures[fut]] = exc
    return out


def compile_parallel(jobs, build, *, workers: int | None = None, verbose: bool = True,
                     describe=str) -> dict:
    """Compile many kernels at once: ``{job: build(job) or the exception it raised}``.

    Threads overlap nvcc (a subprocess) but not TileLang's lowering, which holds the GIL: for many
    small kernels use :func:`precompile` first. A job whose build fails (a configuration the
    compiler rejects) is reported and kept as its exception.
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
