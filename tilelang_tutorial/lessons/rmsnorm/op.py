"""The op: fused RMSNorm + SiLU as a user calls it, ``y = rmsnorm_silu(x, gamma, eps, out)``.

:mod:`.kernel` holds the kernels (notebook 05's cells) and the layout rule; this module picks a
layout for each width (:func:`config_for`: the rule, or warp segments (:mod:`.warp_segments`) in
three bf16 bands), compiles each (C, dtype, layout) once, checks the
inputs once per key and launches (:func:`_call`). :func:`rmsnorm_silu_from` is the same op built
from another kernel factory (notebook 05 passes it the reader's kernel cell).
"""
import functools

import torch as _torch                  # torch comes with TileLang
from torch import Tensor as _Tensor

from ... import runtime
from ...checks import check_tensor, first_problem
from .kernel import (CHANNEL_MULTIPLE, CONFIG_FIELDS, DEFAULT_EPS, RMSNormSiLUConfig, check_channel_width,
                     default_config, rmsnorm_silu_program)
from .warp_segments import SEGMENT_CONFIG_FIELDS, WarpSegmentConfig, warp_segment_rmsnorm_silu_program


def op_program(C: int, dtype: str, config):
    """The program the op builds for ``config``: :func:`rmsnorm_silu_program` for a power-of-two
    group (:class:`RMSNormSiLUConfig`), the warp-segment kernel for a :class:`.WarpSegmentConfig`."""
    if isinstance(config, WarpSegmentConfig):
        return warp_segment_rmsnorm_silu_program(C, dtype, config)
    return rmsnorm_silu_program(C, dtype, config)


def config_from_dict(d: dict):
    """The configuration a record stores (``config.as_dict()``, possibly with other keys), read back."""
    if d.get("layout") == "warp_segments":
        return WarpSegmentConfig(**{k: d[k] for k in SEGMENT_CONFIG_FIELDS})
    return RMSNormSiLUConfig(**{k: v for k, v in d.items() if k in CONFIG_FIELDS})


@functools.lru_cache(maxsize=None)
def _build(C: int, dtype: str, config, arch: str):
    return runtime.compile_kernel(op_program(C, dtype, config), arch=arch)


def build_rmsnorm_silu(C: int, dtype: str = "float16", config: RMSNormSiLUConfig | None = None,
                       arch: str | None = None):
    """Compiled kernel for (C, dtype[, config]) -- cached; every M shares it (default: the rule).

    Call as ``kernel(x2d, gamma, y2d, eps)`` with contiguous CUDA tensors (the op does this).
    """
    check_channel_width(C)
    return _build(C, dtype, config or config_for(C, dtype), arch or runtime.current_arch())


#: (dtype, first C, last C, layout): the bf16 bands where every power-of-two group pads the row badly
#: and whole warps per row (:mod:`.warp_segments`) were measured faster than the rule.
SEGMENT_BANDS = (
    ("bfloat16", 3104, 3168, WarpSegmentConfig(warps=3, rows_per_block=2, min_blocks=6)),
    ("bfloat16", 4128, 4256, WarpSegmentConfig(warps=3, rows_per_block=2, min_blocks=5)),
    ("bfloat16", 6176, 6400, WarpSegmentConfig(warps=5, rows_per_block=1, min_blocks=6)),
)


def config_for(C: int, dtype: str = "float16"):
    """The layout the op builds for width C: warp segments inside a band of :data:`SEGMENT_BANDS`,
    the row-group rule (:func:`.kernel.default_config`) everywhere else."""
    for band_dtype, first, last, segments in SEGMENT_BANDS:
        if dtype == band_dtype and first <= C <= last:
            return segments
    return default_config(C, dtype)


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


#: Inputs that passed every check, by what the checks depend on (the key in
#: :func:`validate_rmsnorm_silu_inputs`):
#: ``{key: C}``. Bounded: cleared when it reaches _VALIDATED_MAX entries.
_VALIDATED: dict = {}
_VALIDATED_MAX = 4096


def validate_rmsnorm_silu_inputs(x, gamma, out=None, *, what: str = "rmsnorm_silu") -> int:
    """Check everything that can be checked without a GPU; return C. Raises TypeError/ValueError
    with one line naming the problem, before any compiler runs.

    Non-contiguous ``x`` is an error (not a silent copy, which would double the memory traffic):
    pass ``x.contiguous()``, or a channels-last activation viewed as (..., C), which is contiguous.

    The checks run in full once per combination of dtypes, shapes, devices and contiguity (and the
    mode's device); a later call with the same combination only rebuilds that key and checks that
    ``out`` is not ``x`` (the one check that depends on the data pointers): 1.7 against 3.6 us on
    this project's 2-core CPU with ``out`` (``test_rmsnorm.py`` checks that it stays cheaper).
    """
    device = runtime.mode().device      # cuda on a GPU; cpu where kernels run in the emulator
    # The key: everything the full checks read except the data pointers (the in-place check is
    # made on every call below): each tensor's shape, dtype, device and contiguity, the mode's
    # device. Only for real tensors; anything else gets the full checks, which name it.
    key = None
    if isinstance(x, _Tensor) and isinstance(gamma, _Tensor) and (out is None or isinstance(out, _Tensor)):
        key = (x.shape, x.dtype, x.device, x.is_contiguous(), gamma.shape, gamma.dtype, gamma.device,
               gamma.is_contiguous(), None if out is None else (out.shape, out.dtype, out.device, out.is_contiguous()),
               device, what)
    C = _VALIDATED.get(key) if key is not None else None
    if C is None:
        C = _validate_fully(x, gamma, out, what, device)
        if key is not None:
            if len(_VALIDATED) >= _VALIDATED_MAX:
                _VALIDATED.clear()
            _VALIDATED[key] = C
    elif out is not None and out.numel() and out.data_ptr() == x.data_ptr():
        raise ValueError(f"{what}: out must not be x itself (in-place is not supported)")
    return C


def _validate_fully(x, gamma, out, what: str, device: str) -> int:
    """Every check of :func:`validate_rmsnorm_silu_inputs`, from scratch."""
    import torch

    check_tensor(x, "x", dtype=(torch.float16, torch.bfloat16), device_type=None, contiguous=False)
    if x.dim() < 1:
        raise ValueError(f"{what}: x must have at least one dimension (the channels), got a scalar")
    C = int(x.shape[-1])
    if C % CHANNEL_MULTIPLE != 0 or C == 0:
        raise ValueError(
            f"{what}: channel width C = x.shape[-1] = {C} is not a multiple of {CHANNEL_MULTIPLE}; "
            f"supported widths are 32, 64, 96, ... (use F.silu(F.rms_norm(x, (C,), gamma, eps)) for others)"
        )
    check_tensor(gamma, "gamma", device_type=None, contiguous=False)
    if gamma.dtype != x.dtype:
        raise TypeError(f"{what}: gamma must have the dtype of x ({_dtype_name(x)}), got {_dtype_name(gamma)}")
    if gamma.dim() != 1 or gamma.shape[0] != C:
        raise ValueError(f"{what}: gamma must have shape ({C},) to match x.shape[-1], got {tuple(gamma.shape)}")
    if not x.is_contiguous():
        raise ValueError(
            f"{what}: x must be contiguous (channels-last, C innermost); got shape {tuple(x.shape)} with "
            f"strides {x.stride()}. Pass x.contiguous() (a copy) -- the kernel does not copy silently."
        )
    if not gamma.is_contiguous():
        raise ValueError(f"{what}: gamma must be contiguous, got stride {gamma.stride()}")
    if out is not None:
        check_tensor(out, "out", device_type=None, contiguous=False)
        if out.dtype != x.dtype:
            raise TypeError(f"{what}: out must have the dtype of x ({_dtype_name(x)}), got {_dtype_name(out)}")
        if tuple(out.shape) != tuple(x.shape):
            raise ValueError(f"{what}: out must have the shape of x {tuple(x.shape)}, got {tuple(out.shape)}")
        if not out.is_contiguous():
            raise ValueError(f"{what}: out must be contiguous, got strides {out.stride()}")
        if out.numel() and out.data_ptr() == x.data_ptr():
            raise ValueError(f"{what}: out must not be x itself (in-place is not supported)")
    for name, t in (("x", x), ("gamma", gamma)) + ((("out", out),) if out is not None else ()):
        if t.device.type != device:
            raise ValueError(f"{what}: {name} must be on a {device} device, got {t.device} (move it with .to('{device}'))")
    if gamma.device != x.device or (out is not None and out.device != x.device):
        raise ValueError(f"{what}: x, gamma and out must be on the same device")
    return C


#: The op's calls that passed every check, by what the checks and the kernel choice depend on
#: (see :func:`_call`) -> ``(mode, kernel, C, how, trusted)``. Bounded like ``_VALIDATED``.
_CALLS = runtime.CallCache(_VALIDATED_MAX)


def _full_key(x, gamma, out):
    """Every attribute the full checks read but the data pointers: each tensor's shape, dtype,
    device and contiguity."""
    return (x.shape, x.dtype, x.device, x.is_contiguous(), gamma.shape, gamma.dtype, gamma.device,
            gamma.is_contiguous()) if out is None else (
            x.shape, x.dtype, x.device, x.is_contiguous(), gamma.shape, gamma.dtype, gamma.device,
            gamma.is_contiguous(), out.shape, out.dtype, out.device, out.is_contiguous())


def _call(calls, kernel_for, x, gamma, eps, out):
    """One call of the op: the checks and the kernel lookup done once per key, then only what
    depends on this call's data (``out`` is not ``x``, the output buffer, the launch).

    The key, in GPU mode, is what picks the kernel and the way it is launched: x's shape and dtype
    and whether ``out`` is given. The compiled kernel checks every tensor argument itself before it
    launches (dtype, dimensions, each dimension, strides, device; :func:`runtime.checks_its_arguments`),
    so a later call with a wrong ``gamma`` or ``out`` is refused by the kernel and then named by the
    full checks in one line. Where the kernel checks nothing (another backend, or an empty input,
    which launches nothing) the full checks run on every call. In the emulator nothing checks the
    arguments: the key holds every attribute the checks read (:func:`_full_key`). An entry is used
    only while :func:`runtime.mode` is still the one it was made under. Anything but tensors misses
    the key and gets the full checks, which name the problem.
    """
    m = runtime.mode()
    try:
        key = (x.shape, x.dtype, out is None) if m.name == "gpu" else _full_key(x, gamma, out)
        hit = calls.get(key)
    except (AttributeError, TypeError):      # not tensors: the full checks say what is wrong
        key = hit = None
    if hit is None or hit[0] is not m:
        C = validate_rmsnorm_silu_inputs(x, gamma, out)
        if x.numel() == 0:
            how = "empty"
        elif m.name != "gpu":
            how = "run"                       # runtime.run: the emulator on CPU tensors
        elif _torch.cuda.device_count() > 1:
            how = "guarded"                   # launch on x's GPU, whichever is current
        else:
            how = "direct" if x.dim() == 2 else "view"
        kernel = None if how == "empty" else kernel_for(C, _dtype_name(x))
        trusted = m.name != "gpu" or (how in ("direct", "view") and runtime.checks_its_arguments(kernel))
        hit = (m, kernel, C, how, trusted)
        calls.remember(key, hit)
    elif not hit[4]:                          # GPU mode, and nothing else checks these arguments
        validate_rmsnorm_silu_inputs(x, gamma, out)
    elif out is not None and out.data_ptr() == x.data_ptr() and hit[3] != "empty":
        raise ValueError("rmsnorm_silu: out must not be x itself (in-place is not supported)")
    _, kernel, C, how, _ = hit
    y = _torch.empty_like(x) if out is None else out
    try:
        if how == "direct":
            kernel(x, gamma, y, float(eps))       # runtime.run's GPU path, without asking again
        elif how == "view":
            kernel(x.view(-1, C), gamma, y.view(-1, C), float(eps))
        elif how == "guarded":
            with _torch.cuda.device(x.device):
                kernel(x.view(-1, C), gamma, y.view(-1, C), float(eps))
        elif how == "run":
            runtime.run(kernel, x.view(-1, C), gamma, y.view(-1, C), float(eps))
    except Exception:
        problem = first_problem(_validate_fully, x, gamma, out, "rmsnorm_silu", m.device)
        if problem is None:                   # not an argument the checks refuse: the kernel's own error
            raise
        raise problem from None
    return y


def _op_kernel(C: int, dtype: str):
    return build_rmsnorm_silu(C, dtype)


def rmsnorm_silu(x, gamma, eps: float = DEFAULT_EPS, out=None):
    """y = silu(rms_norm(x) * gamma) over the last dim; returns ``out`` (allocated if None). Runs on
    the GPU in GPU mode, in the tile emulator on CPU tensors otherwise. The checks and the kernel
    lookup run once per combination of shapes, dtypes, devices and contiguity (:func:`_call`)."""
    return _call(_CALLS, _op_kernel, x, gamma, eps, out)


@functools.lru_cache(maxsize=None)
def _build_from(program, C: int, dtype: str, config: RMSNormSiLUConfig, arch: str):
    return runtime.compile_kernel(program(C, dtype, config), arch=arch)


def rmsnorm_silu_from(program):
    """The op :func:`rmsnorm_silu`, built from another kernel factory: ``program(C, dtype, config)
    -> T.prim_func`` with the signature of :func:`rmsnorm_silu_program`. Returns ``op(x, gamma,
    eps=DEFAULT_EPS, out=None)``, which validates its inputs as the op does and compiles each
    (factory, C, dtype) once, with the rule's layout (:func:`default_config`) at every width: the
    factory is a power-of-two-group kernel like the lesson's (the op itself uses warp segments in
    three bf16 bands). Notebook 05 passes the factory its kernel cell defines, so its later cells
    run the reader's kernel. (A separate function, so that the op's own code, which the benchmark
    records fingerprint, stays as measured.)
    """
    calls = runtime.CallCache(_VALIDATED_MAX)

    def kernel_for(C: int, dtype: str):
        return _build_from(program, C, dtype, default_config(C, dtype), runtime.current_arch())

    def op(x, gamma, eps: float = DEFAULT_EPS, out=None):
        return _call(calls, kernel_for, x, gamma, eps, out)

    op.__name__ = op.__qualname__ = f"rmsnorm_silu_from({getattr(program, '__name__', 'program')})"
    return op
