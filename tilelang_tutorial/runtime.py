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

A GPU the tutorial cannot build for (an architecture missing from :data:`ARCHS`, e.g. a Pascal
card or one newer than the table, or one the installed nvcc dropped, e.g. Volta with CUDA 13)
never raises: kernels are compiled for the nearest target that can be built and run in the
emulator, and :func:`describe_mode` says so in one sentence.

:func:`mode` is decided once and cached; the cache is keyed on what can change it (the
:func:`set_arch` / :func:`force_emulation` choices and the environment variables
``TILELANG_TUTORIAL_ARCH``, ``TILELANG_TUTORIAL_EMULATE``, ``CUDA_HOME``, ``CUDA_PATH``, ``PATH``),
read in a few hundred nanoseconds, so every op may ask for it on every call.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import logging
from dataclasses import dataclass
from typing import Any

# TileLang sets its own logger to INFO when imported, after this package is, and then logs two
# lines per compile ("begins to compile", "completes") and nvcc's command line: a level on the
# child loggers holds whatever TileLang does to its parent. Warnings and errors still show.
for _name in ("tilelang.jit", "tilelang.contrib", "tilelang.cache"):
    logging.getLogger(_name).setLevel(logging.WARNING)

# Triton 3.9 warns on every first compile that TRITON_DEFAULT_FP_FUSION is unset (its default,
# fusion on, turns off in 3.10). The tutorial's Triton peers were measured with fusion on: say so
# once here, for every kernel the package compiles (a reader's own setting wins).
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

ARCH_ENV = "TILELANG_TUTORIAL_ARCH"
EMULATE_ENV = "TILELANG_TUTORIAL_EMULATE"
DEFAULT_COMPILE_ONLY_ARCH = "sm_90a"


from .archs import ARCHS, Arch  # noqa: E402,F401  (the table lives apart: the emulator reads it too)

ACCEPTED_ARCHS = tuple(ARCHS)
_ARCH_NAMES = {name: a.label for name, a in ARCHS.items()}


def arch_for_capability(major: int, minor: int) -> str:
    """The target for a GPU of compute capability ``(major, minor)``: the arch-specific ``a``
    variant from Hopper on (what TileLang's own detection does), e.g. (9, 0) -> sm_90a,
    (10, 0) -> sm_100a, (12, 0) -> sm_120a."""
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def capability_of(arch: str) -> tuple[int, int]:
    """``"sm_90a"`` -> ``(9, 0)``, ``"sm_75"`` -> ``(7, 5)``."""
    digits = arch.removeprefix("sm_").rstrip("af")
    return int(digits[:-1]), int(digits[-1])


def _nvcc_version(nvcc: str) -> str:
    out = _nvcc_query(nvcc, "--version")
    for word in reversed(out.replace(",", " ").split()):
        if word[:1].isdigit() and "." in word:
            return word
    return "?"


@functools.lru_cache(maxsize=8)
def _nvcc_query(nvcc: str, flag: str) -> str:
    import subprocess

    try:
        return subprocess.run([nvcc, flag], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def why_not_buildable(arch: str) -> str | None:
    """``None`` where ``arch`` can be compiled here, else one line saying why not (an
    architecture the tutorial does not know, or one the installed nvcc cannot target). Without
    nvcc nothing is compiled at all (:class:`UncompiledKernel`), so only the table is checked."""
    if arch not in ARCHS:
        return f"the tutorial has no entry for {arch} (it knows {', '.join(ACCEPTED_ARCHS)})"
    nvcc = nvcc_path()
    if nvcc is None:
        return None
    listed = _nvcc_query(nvcc, "--list-gpu-arch").split()
    major, minor = capability_of(arch)
    if listed and f"compute_{major}{minor}" not in listed:
        note = f" ({ARCHS[arch].note})" if ARCHS[arch].note else ""
        return f"nvcc {_nvcc_version(nvcc)} at {nvcc} cannot compile for {arch}{note}"
    return None


def can_build(arch: str) -> bool:
    """True where kernels for ``arch`` can be compiled here (see :func:`why_not_buildable`)."""
    return why_not_buildable(arch) is None


def nearest_buildable_arch(major: int, minor: int, among=None) -> str:
    """The target closest to a GPU of capability ``(major, minor)`` that can be built here: the
    newest one not newer than the GPU, else the oldest one (``among``: the candidates, by default
    every entry of :data:`ARCHS`; the ``a`` variants from Hopper on, as for a real GPU)."""
    names = [n for n in (among or ACCEPTED_ARCHS) if can_build(n)] or list(among or ACCEPTED_ARCHS)
    # one target per capability: the arch-specific one a GPU of that capability would get
    by_cap = {}
    for n in names:
        cap = capability_of(n)
        if cap not in by_cap or n == arch_for_capability(*cap):
            by_cap[cap] = n
    older = [c for c in by_cap if c <= (major, minor)]
    return by_cap[max(older)] if older else by_cap[min(by_cap)]

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


def use_arch_among(archs, why: str) -> str:
    """For a notebook whose kernels build only for ``archs``: where the current architecture is
    not one of them, print one line and compile for the nearest of them (the kernels then run
    in the emulator); return the architecture kernels are compiled for now.

    >>> use_arch_among(("sm_90a",), "the hand-written schedules are Hopper code")  # doctest: +SKIP
    """
    arch = current_arch()
    if arch in archs:
        return arch
    chosen = nearest_buildable_arch(*capability_of(arch), among=tuple(archs))
    print(f"{arch}: {why}; compiling for {chosen} and running in the emulator instead")
    set_arch(chosen)
    return chosen


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


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    """True when torch sees a CUDA GPU that kernels can be launched on (asked once per process;
    :func:`invalidate_mode` asks again)."""
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
def _gpu_capability() -> tuple[int, int]:
    import torch

    return tuple(torch.cuda.get_device_capability())


def _gpu_arch() -> str:
    """The visible GPU's own target (which may be one the tutorial cannot build for)."""
    return arch_for_capability(*_gpu_capability())


def gpu_target() -> tuple[str, str]:
    """``(arch, why)`` for the visible GPU: its own target and ``""`` where that can be built
    here, else the nearest target that can, and one line saying why its own cannot."""
    own = _gpu_arch()
    why = why_not_buildable(own)
    if why is None:
        return own, ""
    return nearest_buildable_arch(*_gpu_capability()), why


def current_arch() -> str:
    """The architecture kernels are compiled for right now.

    Order: :func:`set_arch`, then ``TILELANG_TUTORIAL_ARCH``, then the visible GPU (its own
    target, or the nearest buildable one where its own cannot be built), then sm_90a. Read from
    the cached :func:`mode` (ops ask on every call).
    """
    return mode().arch


def _choose_arch() -> str:
    if _arch_override is not None:
        return _arch_override
    env = os.environ.get(ARCH_ENV, "").strip()
    if env:
        return validate_arch(env)
    if gpu_available():
        return gpu_target()[0]
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
    why_emulated: str = ""    # "no GPU", "forced", "another architecture", "unsupported GPU"
    detail: str = ""          # for "unsupported GPU": why the GPU's own target cannot be built

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


@contextlib.contextmanager
def emulated():
    """Run kernels in the emulator inside the ``with`` block, GPU or not (:func:`force_emulation`
    for the block), then go back to the choice made before it."""
    global _force_emulation
    previous = _force_emulation
    force_emulation(True)
    try:
        yield
    finally:
        _force_emulation = previous


def _emulation_forced() -> bool:
    if _force_emulation is not None:
        return _force_emulation
    return os.environ.get(EMULATE_ENV, "").strip() not in ("", "0")


# What the mode depends on, read cheaply: the process environment's own mapping (os.environ's
# ``_data``, keys encoded the platform's way) answers in ~30 ns where os.environ.get takes
# 250-600 ns. The mode is recomputed whenever one of these, or a set_arch / force_emulation
# choice, differs from when it was cached.
_MODE_ENV = (ARCH_ENV, EMULATE_ENV, "CUDA_HOME", "CUDA_PATH", "PATH")
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEYS = tuple(os.environ.encodekey(k) for k in _MODE_ENV) if _ENV_DATA is not None else ()
_mode_cache: tuple | None = None       # (key, Mode)


if _ENV_DATA is not None:
    _K0, _K1, _K2, _K3, _K4 = _ENV_KEYS
    _env_get = _ENV_DATA.get

    def _mode_key() -> tuple:
        return (_arch_override, _force_emulation, _env_get(_K0), _env_get(_K1), _env_get(_K2), _env_get(_K3),
                _env_get(_K4))

    def _run_key() -> tuple:
        """What decides whether a compiled kernel launches on the GPU (nvcc's whereabouts do not)."""
        return (_arch_override, _force_emulation, _env_get(_K0), _env_get(_K1))
else:  # pragma: no cover - an os.environ without its mapping
    def _mode_key() -> tuple:
        return (_arch_override, _force_emulation) + tuple(os.environ.get(k) for k in _MODE_ENV)

    def _run_key() -> tuple:
        return (_arch_override, _force_emulation) + tuple(os.environ.get(k) for k in _MODE_ENV[:2])

#: run()'s fast path: the _run_key() under which the mode was last decided to be "gpu" (None: not
#: GPU mode, or not decided yet), and the kernel types known to be compiled kernels.
_gpu_run_key: tuple | None = None
_LAUNCHABLE_TYPES: set = set()


def invalidate_mode() -> None:
    """Forget the cached mode and what was asked of the GPU and nvcc (tests that fake a GPU call
    this; a reader never needs to)."""
    global _mode_cache, _gpu_run_key
    _mode_cache = None
    _gpu_run_key = None
    for cached in (gpu_available, _device_name, _gpu_capability, _nvcc_query, _nvcc_lookup):
        getattr(cached, "cache_clear", lambda: None)()   # a test may have replaced one


def _decide_mode() -> Mode:
    gpu = gpu_available()
    name = _device_name() if gpu else None
    arch = _choose_arch()
    can_compile = nvcc_path() is not None
    if gpu and _emulation_forced():
        return Mode("emulated", arch, name, can_compile, "forced")
    if gpu:
        built_for, why = gpu_target()
        if why and arch == built_for:   # no choice made: the GPU's own target cannot be built here
            return Mode("emulated", arch, name, can_compile, "unsupported GPU", why)
        if arch != _gpu_arch():
            return Mode("emulated", arch, name, can_compile, "another architecture")
        return Mode("gpu", arch, name, can_compile)
    return Mode("emulated", arch, None, can_compile, "no GPU")


def mode() -> Mode:
    """The current mode: where kernels run, and the architecture they are compiled for (decided
    once, recomputed only when a choice or environment variable it depends on changes)."""
    global _mode_cache, _gpu_run_key
    key = _mode_key()
    cached = _mode_cache
    if cached is not None and cached[0] == key:
        return cached[1]
    if _ENV_DATA is not None and os.environ._data is not _ENV_DATA:  # pragma: no cover - os.environ replaced
        raise RuntimeError("os.environ was replaced; tilelang_tutorial.runtime reads the original mapping")
    decided = _decide_mode()
    _mode_cache = (key, decided)
    _gpu_run_key = _run_key() if decided.name == "gpu" else None
    return decided


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
    if m.why_emulated == "unsupported GPU":
        own = _gpu_arch()
        why = (f"a {m.device_name} ({own}) is present, but {m.detail}, so the nearest target that can be "
               f"built stands in")
    else:
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


class Launchers:
    """An op's launchers, one per key: the one fast path every op of the tutorial calls through.

    ``plan(*args) -> (launch, kernels)`` checks the op's inputs in full (one line naming the first
    problem, before any compiler runs), builds, and returns ``launch(*args)``, which runs every
    later call with the same key, and the compiled kernels it launches. ``check(*args)`` checks the
    inputs from scratch. Calling ``launchers(m, key, *args)`` (``m``: :func:`mode`) plans once per
    key, then costs a dictionary lookup and the launch: a repeated call's host cost stays at the
    bare compiled-kernel call's.

    What goes in a key is the op's decision. In GPU mode, where each compiled kernel checks every
    tensor argument itself (:func:`checks_its_arguments`), the key is what picks the kernels, and
    an argument a kernel refuses is then named by ``check`` (``checks.first_problem``); where a
    kernel checks nothing (another backend, or no kernel at all) ``check`` runs on every call. In
    the emulator nothing checks the arguments: the key holds every attribute ``check`` reads; a
    plan whose key holds them in GPU mode too (a kernel of another library, which checks nothing)
    says so by returning ``kernels=None``. A
    key of ``None`` (inputs that could not be keyed) is planned on every call, which names the
    problem. An entry serves only under the mode it was planned in. Bounded: it starts over when
    ``maxsize`` entries are held (a caller cycling through many shapes)."""

    __slots__ = ("plan", "check", "maxsize", "entries")

    def __init__(self, plan, check, maxsize: int = 1024):
        self.plan, self.check, self.maxsize = plan, check, maxsize
        self.entries: dict = {}

    def __call__(self, m: "Mode", key, *args):
        try:
            entry = self.entries.get(key)
        except TypeError:                                   # an unhashable knob: planned every call
            key = entry = None
        if entry is None or entry[2] is not m:
            launch, kernels = self.plan(*args)
            trusted = m.name != "gpu" or kernels is None or (
                bool(kernels) and all(checks_its_arguments(k) for k in kernels))
            entry = (launch, trusted, m)
            if key is not None:
                if len(self.entries) >= self.maxsize:
                    self.entries.clear()
                self.entries[key] = entry
        elif not entry[1]:
            self.check(*args)
        try:
            return entry[0](*args)
        except Exception:
            from .checks import first_problem

            problem = first_problem(self.check, *args)      # the argument a kernel refused
            if problem is None:
                raise
            raise problem from None

    def clear(self) -> None:
        self.entries.clear()


def launcher(kernel, emulator_checks: str | None = None):
    """What :func:`run` would do with ``kernel``, decided once: a callable taking the kernel's
    arguments. Plans keep one, so their fast path pays no mode check per call. ``emulator_checks``:
    the emulator's checks for this kernel where it is emulated (default: all; ``emulate.run``)."""
    if mode().name == "gpu" and _launchable(type(kernel)):
        return kernel
    from . import emulate

    if emulator_checks is None:
        return functools.partial(emulate.run, kernel)
    return functools.partial(emulate.run, kernel, checks=emulator_checks)


def checks_its_arguments(kernel) -> bool:
    """True where calling ``kernel`` checks every tensor argument before it launches: a kernel
    TileLang compiled with its default ``tvm_ffi`` backend, whose generated host code asserts each
    tensor's dtype, number of dimensions, every dimension (static ones against their values,
    dynamic ones against each other), strides, device type and device id, and raises naming the
    argument. False for a program, an :class:`UncompiledKernel` or any other callable (the
    emulator checks none of these). Ops use it to skip their own per-call checks on the GPU."""
    return _launchable(type(kernel)) and getattr(kernel, "execution_backend", None) == "tvm_ffi"


@functools.lru_cache(maxsize=64)
def _launchable(kind: type) -> bool:
    """A compiled kernel (TileLang's JITKernel and alike) rather than a program or an
    :class:`UncompiledKernel`: decided once per type, not per call."""
    return not issubclass(kind, UncompiledKernel) and hasattr(kind, "get_kernel_source")


def run(kernel, *args, **scalars):
    """Run a kernel the way this machine can: launched on the GPU in GPU mode (CUDA tensors), in
    the tile emulator otherwise (CPU tensors; the kernel's ``T.prim_func`` runs unchanged).

    ``kernel`` is what :func:`compile_kernel` / ``tilelang.compile`` returned, or a ``T.prim_func``
    (emulated mode only). Returns what the kernel returns (its outputs when it has ``out_idx``).
    The GPU path is a cached mode and a type check: well under a microsecond above the call.
    """
    if type(kernel) in _LAUNCHABLE_TYPES and _gpu_run_key is not None and _run_key() == _gpu_run_key:
        return kernel(*args, *scalars.values()) if scalars else kernel(*args)       # the fast path
    if mode().name == "gpu" and _launchable(type(kernel)):
        _LAUNCHABLE_TYPES.add(type(kernel))
        return kernel(*args, *scalars.values()) if scalars else kernel(*args)
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

    arch = validate_arch(arch) if arch else current_arch()
    if nvcc_path() is None:
        return UncompiledKernel(program, arch, out_idx)
    why = why_not_buildable(arch)
    if why is not None:     # one line, before any compiler runs
        raise ArchError(f"cannot compile for {arch}: {why}")
    configs = dict(ARCHS[arch].pass_configs) if arch in ARCHS else {}
    configs.update(pass_configs or {})
    # A cached kernel loads in a fraction of a second; a cold one can take a minute of lowering
    # and nvcc. Say so when it does, rather than sit silent.
    attrs = getattr(program, "attrs", None)
    name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "a kernel"
    with _notice_after(f"[compile] {name} for {arch}: lowering and nvcc, once (then loaded from the kernel cache) ..."):
        kernel = tilelang.compile(program, out_idx=out_idx, target=target(arch), pass_configs=configs or None)
    # In GPU mode, about to launch on this GPU: a kernel that needs more shared memory than a block
    # may have would fail at its first launch with a CUDA error; say it in one line here instead.
    # (Only where this process has already found its mode to be GPU: compile workers never touch CUDA.)
    m = mode() if _gpu_run_key is not None and _run_key() == _gpu_run_key else None
    if m is not None and m.name == "gpu" and m.arch == arch and arch in ARCHS:
        need, limit = dynamic_shared_memory(kernel), ARCHS[arch].smem_per_block
        if need is not None and need > limit:
            raise ArchError(f"this kernel needs {need // 1024} KiB of shared memory per block and a {m.device_name} "
                            f"({arch}) offers {limit // 1024} KiB: choose a smaller tile or fewer stages, or compile for "
                            f"another target (tt.set_arch) to run it in the emulator")
    return kernel


def dynamic_shared_memory(kernel) -> int | None:
    """Bytes of dynamic shared memory the kernel's largest device function is launched with,
    read from the host code TileLang generated (the last launch argument of the ``tvm_ffi``
    backend's calls); ``None`` where that code has another shape."""
    import re

    try:
        host = kernel.get_host_source()
    except Exception:
        return None
    sizes, start = [], 0
    for call in re.finditer(r"TVMFFIFunctionCall\((\w+)_packed, \(TVMFFIAny\*\) \w+, (\d+),", host):
        # the arguments of this call are set between the previous call and this one
        segment, start = host[start:call.start()], call.end()
        if call.group(1).startswith("__tvm"):
            continue
        last = int(call.group(2)) - 1
        found = re.findall(rf"\[{last}\]\.v_int64\) = \(\(int64_t\)(\d+)\);", segment)
        if found:
            sizes.append(int(found[-1]))
    return max(sizes) if sizes else None


#: seconds a compile may take before :func:`compile_kernel` (or :func:`precompile`) prints a line
#: saying it is compiling (``None``: never)
COMPILE_NOTICE_S: float | None = 5.0


@contextlib.contextmanager
def _notice_after(text: str):
    """Print ``text`` if the block is still running after :data:`COMPILE_NOTICE_S` seconds."""
    if COMPILE_NOTICE_S is None:
        yield
        return
    import threading

    timer = threading.Timer(COMPILE_NOTICE_S, print, (text,), {"flush": True})
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


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
    with _notice_after(f"[compile] {len(jobs)} kernel configurations in {workers} worker processes: lowering and "
                       f"nvcc, once (then loaded from the kernel cache) ..."), \
            concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
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


from . import archs as _archs  # noqa: E402

_archs.current_arch_provider = current_arch
