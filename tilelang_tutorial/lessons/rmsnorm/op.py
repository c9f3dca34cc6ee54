"""The op: fused RMSNorm + SiLU as a user calls it, ``y = rmsnorm_silu(x, gamma, eps, out)``.

:mod:`.kernel` holds the kernels (notebook 05's cells) and the layout rule; this module picks a
layout for each width (:func:`config_for`: the rule, or warp segments (:mod:`.warp_segments`) in
three bf16 bands), compiles each (C, dtype, layout) once, and checks the inputs and plans the
launch once per key (:func:`_call`, through :class:`runtime.Launchers`). :func:`rmsnorm_silu_from`
is the same op built from another kernel factory (notebook 05 passes it the reader's kernel cell).
"""
import functools

import torch as _torch                  # torch comes with TileLang

from ... import runtime
from ...checks import check_tensor
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


#: The most launchers an op keeps (one per key, :func:`_call`); past it, it starts over.
MAX_PLANS = 4096


def validate_rmsnorm_silu_inputs(x, gamma, out=None, *, what: str = "rmsnorm_silu") -> int:
    """Check everything that can be checked without a GPU; return C. Raises TypeError/ValueError
    with one line naming the first problem, before any compiler runs.

    Non-contiguous ``x`` is an error (not a silent copy, which would double the memory traffic):
    pass ``x.contiguous()``, or a channels-last activation viewed as (..., C), which is contiguous.
    The op makes these checks once per key (:func:`_call`); this function makes them all, every time.
    """
    device = runtime.mode().device      # cuda on a GPU; cpu where kernels run in the emulator
    check_tensor(x, "x", dtype=(_torch.float16, _torch.bfloat16), device_type=None, contiguous=False)
    if x.dim() < 1:
        raise ValueError(f"{what}: x must have at least one dimension (the channels), got a scalar")
    C = int(x.shape[-1])
    if C % CHANNEL_MULTIPLE != 0 or C == 0:
        raise ValueError(
            f"{what}: channel width C = x.shape[-1] = {C} is not a multiple of {CHANNEL_MULTIPLE}; "
            f"supported widths are {CHANNEL_MULTIPLE}, {2 * CHANNEL_MULTIPLE}, {3 * CHANNEL_MULTIPLE}, ... "
            f"(use F.silu(F.rms_norm(x, (C,), gamma, eps)) for others)"
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


def _full_key(x, gamma, out):
    """Every attribute the full checks read but the data pointers: each tensor's shape, dtype,
    device and contiguity."""
    return (x.shape, x.dtype, x.device, x.is_contiguous(), gamma.shape, gamma.dtype, gamma.device,
            gamma.is_contiguous()) if out is None else (
            x.shape, x.dtype, x.device, x.is_contiguous(), gamma.shape, gamma.dtype, gamma.device,
            gamma.is_contiguous(), out.shape, out.dtype, out.device, out.is_contiguous())


_IN_PLACE = "rmsnorm_silu: out must not be x itself (in-place is not supported)"


def _plan(kernel_for, x, gamma, eps, out):
    """Check (one line naming the first problem, before anything compiles), build
    ``kernel_for(C, dtype)`` and return ``(launch, kernels)`` (:class:`runtime.Launchers`):
    ``launch(x, gamma, eps, out)`` runs every call with this key and returns y (``out``, or a new
    tensor where ``out`` is None), and the compiled kernel it launches (none for an empty x).

    The launch makes the one check that reads the data pointers (``out`` is not ``x``); a 2-D x
    is launched as it is, any other on (rows, C) views; on a machine with several GPUs, on x's GPU,
    whichever is current."""
    C = validate_rmsnorm_silu_inputs(x, gamma, out)
    if x.numel() == 0:                           # nothing to launch
        return (lambda x, gamma, eps, out: _torch.empty_like(x) if out is None else out), ()
    kernel = kernel_for(C, _dtype_name(x))
    run = runtime.launcher(kernel)               # the compiled kernel in GPU mode, the emulator otherwise

    # Each launch makes the one check that reads the data pointers (out is not x) inline: a
    # repeated call's host cost is the bare kernel call's plus a lookup.
    if runtime.mode().name == "gpu" and _torch.cuda.device_count() > 1:
        def launch(x, gamma, eps, out):
            if out is None:
                out = _torch.empty_like(x)
            elif out.data_ptr() == x.data_ptr():
                raise ValueError(_IN_PLACE)
            with _torch.cuda.device(x.device):
                run(x.view(-1, C), gamma, out.view(-1, C), float(eps))
            return out
    elif x.dim() == 2:
        def launch(x, gamma, eps, out):
            if out is None:
                out = _torch.empty_like(x)
            elif out.data_ptr() == x.data_ptr():
                raise ValueError(_IN_PLACE)
            run(x, gamma, out, float(eps))
            return out
    else:
        def launch(x, gamma, eps, out):
            if out is None:
                out = _torch.empty_like(x)
            elif out.data_ptr() == x.data_ptr():
                raise ValueError(_IN_PLACE)
            run(x.view(-1, C), gamma, out.view(-1, C), float(eps))
            return out
    return launch, (kernel,)


def _launchers(kernel_for) -> runtime.Launchers:
    """An op's launchers, one per key (:func:`_call`), building ``kernel_for(C, dtype)``. The
    plan and the checks are looked up when called, so a test that replaces either is seen at once."""
    return runtime.Launchers(lambda *args: _plan(kernel_for, *args),
                             lambda x, gamma, eps, out: validate_rmsnorm_silu_inputs(x, gamma, out), MAX_PLANS)


def _call(launchers, x, gamma, eps, out):
    """One call of the op through its ``launchers``: the checks and the build run once per key,
    and a later call with the key costs the lookup and the launch (:func:`_plan`).

    The key, in GPU mode, is what picks the kernel and the way it is launched: x's shape and dtype
    and whether ``out`` is given. The compiled kernel checks every tensor argument itself before it
    launches (dtype, dimensions, each dimension, strides, device; :func:`runtime.checks_its_arguments`),
    so a later call with a wrong ``gamma`` or ``out`` is refused by the kernel and then named by
    :func:`validate_rmsnorm_silu_inputs` in one line. Where nothing checks the arguments (an empty
    input, which launches nothing, or a kernel of another backend) the checks run on every call. In
    the emulator the key holds every attribute the checks read (:func:`_full_key`). Anything but
    tensors gets no key and the full checks, which name the problem.
    """
    m = runtime.mode()
    try:
        key = (x.shape, x.dtype, out is None) if m.name == "gpu" else _full_key(x, gamma, out)
    except (AttributeError, TypeError):      # not tensors: the checks say what is wrong
        key = None
    return launchers(m, key, x, gamma, eps, out)


#: The op's launchers; the builder is looked up when a key is planned (a test may replace it).
_LAUNCHERS = _launchers(lambda C, dtype: build_rmsnorm_silu(C, dtype))


def rmsnorm_silu(x, gamma, eps: float = DEFAULT_EPS, out=None):
    """y = silu(rms_norm(x) * gamma) over the last dim; returns ``out`` (allocated if None). Runs on
    the GPU in GPU mode, in the tile emulator on CPU tensors otherwise. The checks and the build
    run once per combination of shapes, dtypes, devices and contiguity (:func:`_call`)."""
    return _call(_LAUNCHERS, x, gamma, eps, out)


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
    def kernel_for(C: int, dtype: str):
        return _build_from(program, C, dtype, default_config(C, dtype), runtime.current_arch())

    launchers = _launchers(kernel_for)

    def op(x, gamma, eps: float = DEFAULT_EPS, out=None):
        return _call(launchers, x, gamma, eps, out)

    op.__name__ = op.__qualname__ = f"rmsnorm_silu_from({getattr(program, '__name__', 'program')})"
    return op
