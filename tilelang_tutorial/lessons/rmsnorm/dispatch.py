"""One call site for fused RMSNorm + SiLU: keep the existing fast paths, fill the gaps with TileLang.

    from tilelang_tutorial.lessons.rmsnorm.dispatch import fused_rmsnorm_silu
    y = fused_rmsnorm_silu(x, gamma, eps=1e-5, out=None)     # x: (..., C) channels-last
    drop_in = fused_rmsnorm_silu_from(my_factory)            # the same, the TileLang path building my_factory

Routing is by channel width C = x.shape[-1]:

* C registered in ``FAST_PATHS`` (the pre-existing, hand-tuned kernels: Triton for 96, 192 and
  384) -> that kernel, unchanged;
* any other C that is a multiple of 8 (whole 16-byte vectors) -> the TileLang kernel
  (:mod:`.kernel`);
* C not a multiple of 8 -> ``ValueError`` naming the width and the supported ones. There is no
  silent fallback: a caller who wants eager torch for odd widths asks for it explicitly
  (``F.silu(F.rms_norm(x, (C,), gamma, eps))``), so a slow path never hides behind this name.

``which_path(C)`` tells which path a width takes without running anything (it works on a CPU).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import op as _tilelang    # the TileLang path (the name the fingerprinted dispatch code uses)
from .kernel import CHANNEL_MULTIPLE, DEFAULT_EPS


@dataclass(frozen=True)
class NormPath:
    name: str            # short label: "triton" / "tilelang"
    description: str
    fn: Callable         # fn(x, gamma, eps=..., out=...) -> y


try:
    # imported with the dispatch, so that a call through it is one function call away from the
    # Triton op (a wrapper that imports on first use costs every call about a microsecond)
    from .triton_existing import rmsnorm_silu_triton as _triton_fn
except ImportError as missing:          # no triton here (e.g. a CPU-only torch): which_path still works
    _TRITON_MISSING = str(missing)

    def _triton_fn(x, gamma, eps=DEFAULT_EPS, out=None):
        raise RuntimeError(f"fused_rmsnorm_silu: width {x.shape[-1]} runs the pre-existing Triton kernel, "
                           f"and triton cannot be imported here ({_TRITON_MISSING})")


_TRITON = NormPath("triton", "pre-existing hand-tuned Triton kernel (lessons/rmsnorm/triton_existing.py)", _triton_fn)
TILELANG_PATH = NormPath("tilelang", "TileLang kernel for any C % 8 == 0 (lessons/rmsnorm/kernel.py)",
                         _tilelang.rmsnorm_silu)

#: The registry of existing fast paths, keyed by channel width: the Triton kernel at the widths it
#: was written for. A path that works is not touched, even where the TileLang kernel measures faster
#: (notebook 05 prints the figures): moving a width is a change of its own, on its own measurement.
FAST_PATHS: dict[int, NormPath] = {96: _TRITON, 192: _TRITON, 384: _TRITON}


def register_fast_path(C: int, path: NormPath) -> None:
    """Add (or replace) the kernel used for width C."""
    FAST_PATHS[int(C)] = path


def resolve(C: int) -> NormPath:
    """The path width C takes; ValueError when no path supports it."""
    C = int(C)
    if C in FAST_PATHS:
        return FAST_PATHS[C]
    if C > 0 and C % CHANNEL_MULTIPLE == 0:
        return TILELANG_PATH
    raise ValueError(
        f"fused_rmsnorm_silu: no kernel for channel width C = {C}: the fast paths cover "
        f"{sorted(FAST_PATHS)} and the TileLang kernel covers multiples of {CHANNEL_MULTIPLE}. "
        f"Use F.silu(F.rms_norm(x, (C,), gamma, eps)) for this width."
    )


def which_path(C: int) -> str:
    """'triton' or 'tilelang' for a supported width (raises ValueError for an unsupported one)."""
    return resolve(C).name


def _route(x) -> Callable:
    """The function of the path x's width takes (one dict lookup for a registered or TileLang width)."""
    try:
        C = x.shape[-1]
    except (AttributeError, IndexError, TypeError):
        raise TypeError(f"fused_rmsnorm_silu: x must be a tensor with a channel dimension, got "
                        f"{type(x).__name__}{' of shape ()' if hasattr(x, 'shape') else ''}") from None
    path = FAST_PATHS.get(C)
    if path is not None:
        return path.fn
    if C > 0 and C % CHANNEL_MULTIPLE == 0:
        return TILELANG_PATH.fn
    return resolve(C).fn                      # raises the one line naming the width


def fused_rmsnorm_silu(x, gamma, eps: float = DEFAULT_EPS, out=None):
    """y = silu(rms_norm(x) * gamma) over the last dim, through the path registered for C."""
    return _route(x)(x, gamma, eps, out)


def fused_rmsnorm_silu_from(program):
    """:func:`fused_rmsnorm_silu` whose TileLang path builds ``program`` (a kernel factory with the
    signature of :func:`.kernel.rmsnorm_silu_program`, e.g. the one notebook 05's kernel cell
    defines); the fast paths of ``FAST_PATHS`` are other kernels and stay as they are. Returns
    ``fused(x, gamma, eps=1e-5, out=None)``."""
    tilelang_op = _tilelang.rmsnorm_silu_from(program)

    def fused(x, gamma, eps: float = DEFAULT_EPS, out=None):
        fn = _route(x)
        return (tilelang_op if fn is TILELANG_PATH.fn else fn)(x, gamma, eps, out)

    return fused
