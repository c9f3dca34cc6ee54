"""Run TileLang 0.1.15 programs on the CPU: a tile-level emulator for readers without a GPU.

The emulator executes the *pre-lowering* TIR of a ``@T.prim_func`` -- what a kernel factory
returns, before ``tilelang.compile`` -- on CPU torch tensors, unchanged from what compiles for the
GPU. It checks correctness, not speed: blocks run one after another, tile operators run on whole
tiles with numpy, ``T.Parallel`` nests are vectorised, and warp-specialised branches run as
cooperatively scheduled roles with mbarrier semantics. See ``docs/emulator.md`` for the semantics
and the limits.

Public API
----------
``run(program, *args, **scalars)``
    Run ``program`` (a ``T.prim_func``, or a compiled ``tilelang.jit.kernel.JITKernel``, whose
    ``.prim_func`` is used) on CPU tensors, in place, like a GPU launch. Positional arguments follow
    the parameters; scalar parameters may also be passed by name. Dynamic sizes (``T.dynamic``) are
    bound from the tensor shapes. For a ``JITKernel`` compiled with ``out_idx`` the outputs are
    allocated (poisoned with NaN / 0xA5 bytes) and returned, as the real call does; otherwise
    returns None. The compiled emulation is cached by program identity.

``compile(program) -> EmulatedKernel``
    The cached emulated kernel of ``program``: call it like the kernel. It has ``.signature()``,
    ``.source`` (the generated Python, for debugging) and ``.last_stats``.

``run(..., checks="all", strict=False, arch=None, registers=None)``
    Checks (on by default; ``$TILELANG_TUTORIAL_EMULATE_CHECKS`` or ``checks="none"`` turns them
    off): ``uninit`` (the first read of a never-written on-chip element: buffer, element, line),
    ``races`` (lanes of one step writing one element with different values; a statement reading
    what another thread writes in the same step; warp-specialised roles touching one shared region
    without mbarrier / barrier ordering: both roles, both lines; a ``T.tma_copy`` whose barrier
    phase nothing waits for before the block ends, still in flight on a GPU), ``limits`` (threads and shared
    memory per block of ``arch``, registers when given; :class:`LimitExceeded` before running).
    Findings are one-line warnings kept in :func:`last_findings`; ``strict=True`` raises the first.

``check(program, *args, checks="races,uninit") -> list[Finding]``
    Run and return the findings without warnings (``print(report(check(...)))`` in a notebook).

``last_stats() -> dict``
    Counters of the most recent run: kernels, blocks, tile_ops, gemm_flops, parallel_loops, roles,
    role_switches, guarded_loads (tile reads / element loads that touched out-of-range global
    memory), dropped_stores, mbarrier_arrivals, printed_lines.

Errors (all subclasses of :class:`EmulationError`)
    :class:`UnsupportedConstruct` (names the op / statement and where), :class:`OutOfBounds`
    (buffer, scope, shape, index, and where: source line, TIR statement, block, role, loop
    variables), :class:`Deadlock` (every waiting role with its threads, barrier, phase, arrivals
    and the parity it waits for), :class:`ArgumentError` (also a ``ValueError``: one line naming
    the parameter).

``PERFORMANCE_ONLY``
    The op names that are accepted and do nothing (layout/swizzle annotations and pipeline stages
    are annotations, not ops, and are ignored too).

Example::

    from tilelang_tutorial import emulate
    prog = scale_copy_program(N=200)                  # a T.prim_func
    x = torch.randn(100, 200).half()
    y = torch.full_like(x, float("nan"))
    emulate.run(prog, x, y, 1.5)                      # y == 1.5 * x, computed on the CPU
"""
from __future__ import annotations

import os as _os

from .checks import (ALL_CHECKS, EmulatorWarning, Finding, LimitExceeded, Race, RaceWarning, UninitialisedRead,
                     UninitialisedReadWarning)
from .encoding import NOOP_OPS as PERFORMANCE_ONLY
from .errors import ArgumentError, Deadlock, EmulationError, OutOfBounds, UnsupportedConstruct
from .program import EmulatedKernel, clear_cache, get_kernel

_last: dict | None = None
_last_findings: list = []

#: environment variable with the default checks (e.g. ``none``, ``races,uninit``); unset: all
CHECKS_ENV = "TILELANG_TUTORIAL_EMULATE_CHECKS"


def _default_checks():
    v = _os.environ.get(CHECKS_ENV)
    return None if v is None or not v.strip() else v.strip()


def compile(program, *, checks=None, strict: bool = False) -> EmulatedKernel:  # noqa: A001
    """The emulated kernel of ``program`` (``T.prim_func`` or ``JITKernel``), cached by identity
    (and checks)."""
    return get_kernel(program, checks if checks is not None else _default_checks(), strict)


def run(program, *args, checks=None, strict: bool = False, arch: str | None = None, registers=None,
        **scalars):
    """Run ``program`` on CPU tensors in place; returns the allocated outputs of a JITKernel with
    ``out_idx``, else None. See the module docstring.

    ``checks``: which checks run (default: all, or ``$TILELANG_TUTORIAL_EMULATE_CHECKS``):
    ``"uninit"`` (uninitialised reads), ``"races"``, ``"limits"`` (threads and shared memory per
    block on ``arch``, default the tutorial's current architecture), comma-separated, or
    ``"all"`` / ``"none"``. Findings are issued as one-line warnings and kept in
    :func:`last_findings`; ``strict=True`` raises the first one instead (:class:`Race`,
    :class:`UninitialisedRead`). A limit that is exceeded always raises :class:`LimitExceeded`;
    ``registers`` (per-thread registers as ptxas reported them: an int or
    ``inspector.resource_usage(kernel)``) adds the register limits to the check."""
    global _last, _last_findings
    k = get_kernel(program, checks if checks is not None else _default_checks(), strict)
    try:
        arrays, outputs = k._bind(args, scalars)
        return k._launch(arrays, outputs, arch, registers)
    finally:
        _last = k.last_stats
        _last_findings = list(k.last_findings)


def check(program, *args, checks="races,uninit", arch: str | None = None, **scalars) -> list:
    """Run ``program`` like :func:`run` with ``checks`` and return its :class:`Finding` objects
    instead of issuing warnings (for a debugging cell: ``print(emulate.report(emulate.check(...)))``).
    Errors (out of bounds, deadlocks, refused constructs, limits) still raise."""
    import warnings as _w
    with _w.catch_warnings():
        _w.simplefilter("ignore", EmulatorWarning)
        run(program, *args, checks=checks, arch=arch, **scalars)
    return last_findings()


def last_findings() -> list:
    """The :class:`Finding` objects (uninitialised reads, races) of the most recent :func:`run`:
    ``kind``, ``buffer``, ``element``, ``block``, ``lines``, ``who``, ``message`` (one line)."""
    return list(_last_findings)


def report(findings=None) -> str:
    """The findings of the last run (or ``findings``) as text, one line each; ``"no findings"``."""
    fs = last_findings() if findings is None else list(findings)
    return "\n".join(f.message for f in fs) if fs else "no findings"


def last_stats() -> dict | None:
    """Counters of the most recent :func:`run` (or None before the first)."""
    return None if _last is None else dict(_last)


__all__ = ["run", "check", "compile", "last_stats", "last_findings", "report", "clear_cache", "EmulatedKernel",
           "EmulationError", "UnsupportedConstruct", "OutOfBounds", "Deadlock", "ArgumentError", "LimitExceeded",
           "Race", "UninitialisedRead", "Finding", "EmulatorWarning", "RaceWarning", "UninitialisedReadWarning",
           "ALL_CHECKS", "CHECKS_ENV", "PERFORMANCE_ONLY"]
