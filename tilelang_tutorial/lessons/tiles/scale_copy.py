"""Notebook 01's first kernel: a tiled copy-and-scale, ``y = alpha * x``.

It is the smallest program that shows TileLang's three ideas:

1. a tile is a first-class object (``T.copy`` moves a whole ``block_M x block_N`` tile);
2. you place buffers in the memory hierarchy yourself (shared memory, then a register fragment);
3. the compiler infers which thread owns which element (``T.Parallel`` over a fragment becomes
   per-thread code with 16-byte vectorised loads and stores).

The staging through shared memory is not needed for speed here; it is there because seeing the
same tile go global -> shared -> registers -> global is the mental model every later kernel uses.

:func:`scale_copy_eager` is the same kernel in TileLang's eager mode (``@tilelang.jit`` with
``T.const`` sizes); :mod:`tilelang_tutorial.eager` builds, compiles and runs it without a GPU.
"""

import functools

import tilelang
import torch
import tilelang.language as T

from ... import checks, runtime

DTYPES = ("float16", "bfloat16", "float32")


def scale_copy_program(N: int, block_M: int = 64, block_N: int = 128, threads: int = 128,
                       dtype: str = "float16"):
    """``y = alpha * x`` over an (M, N) matrix.

    M is dynamic (one build serves any number of rows); N is a compile-time constant so the
    compiler can prove every row starts 16-byte aligned and vectorise the accesses.
    """
    M = T.dynamic("M")

    @T.prim_func
    def scale_copy(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), alpha: T.float32):
        # One program instance ("block") per output tile; the grid covers ragged edges too.
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x_shared = T.alloc_shared((block_M, block_N), dtype)   # on-chip, visible to the block
            y_frag = T.alloc_fragment((block_M, block_N), dtype)    # registers, split over threads
            T.copy(X[by * block_M, bx * block_N], x_shared)        # whole tile, bounds handled
            for i, j in T.Parallel(block_M, block_N):               # compiler picks the thread map
                y_frag[i, j] = x_shared[i, j] * alpha
            T.copy(y_frag, Y[by * block_M, bx * block_N])

    return scale_copy


@tilelang.jit
def scale_copy_eager(X, Y, alpha: T.float32, block_M: int = 64, block_N: int = 128, threads: int = 128,
                     dtype: str = "float16"):
    # Sizes are read off the tensors at the call: one compiled kernel per (M, N).
    M, N = T.const("M, N")
    X: T.Tensor[[M, N], dtype]
    Y: T.Tensor[[M, N], dtype]
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        x_shared = T.alloc_shared((block_M, block_N), dtype)
        y_frag = T.alloc_fragment((block_M, block_N), dtype)
        T.copy(X[by * block_M, bx * block_N], x_shared)
        for i, j in T.Parallel(block_M, block_N):
            y_frag[i, j] = x_shared[i, j] * alpha
        T.copy(y_frag, Y[by * block_M, bx * block_N])


@functools.lru_cache(maxsize=None)
def _build(N: int, block_M: int, block_N: int, threads: int, dtype: str, arch: str):
    return runtime.compile_kernel(scale_copy_program(N, block_M, block_N, threads, dtype), arch=arch)


def build_scale_copy(N: int, block_M: int = 64, block_N: int = 128, threads: int = 128,
                     dtype: str = "float16", arch: str | None = None):
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return _build(int(N), block_M, block_N, threads, dtype, arch or runtime.current_arch())


def scale_copy_reference(x, alpha: float):
    """fp32 reference."""
    return x.float() * alpha


def _call_key(x, out, m, config):
    """What the checks and the build depend on, read cheaply (:class:`runtime.Launchers`).

    In GPU mode the compiled kernel's generated host code checks every tensor argument itself
    before it launches (dtype, number of dimensions, each dimension against N and against x's
    rows, strides, device type and device id): the key is what picks the kernel (the builder, x's
    dtype, its shape past the rows, whether ``out`` is given, the architecture, the knobs), and an
    argument the kernel refuses is then named by :func:`_check`. In the emulator nothing checks
    the arguments: the key holds every attribute :func:`_check` reads (each tensor's type, shape,
    dtype, device and contiguity), so two calls with one key pass or fail the same checks."""
    knobs = tuple(config.items()) if config else ()
    if m.name == "gpu":
        return (build_scale_copy, x.shape[1:], x.dtype, out is None, m.arch, knobs)
    return (build_scale_copy, type(x), x.shape, x.dtype, x.device, x.is_contiguous(),
            None if out is None else (type(out), out.shape, out.dtype, out.device, out.is_contiguous()),
            m.arch, knobs)


def _check(x, alpha, out, config) -> None:
    """Every check, from scratch: one line naming the first problem."""
    device = runtime.mode().device
    checks.check_tensor(x, "x", dtype=(torch.float16, torch.bfloat16, torch.float32), device_type=None, ndim=2)
    if out is not None:
        checks.check_tensor(out, "out", dtype=x.dtype, device_type=None, ndim=2, shape=tuple(x.shape))
    checks.check_tensor(x, "x", device_type=device)
    if out is not None:
        checks.check_tensor(out, "out", device_type=device)
        if out.device != x.device:
            raise ValueError(f"out must be on x's device ({x.device}), got {out.device}")


def _plan(x, alpha, out, config):
    """Check, build, and return the launch of every call with this key and its kernel."""
    _check(x, alpha, out, config)
    kernel = build_scale_copy(x.shape[1], dtype=str(x.dtype).replace("torch.", ""), **config)
    launch = runtime.launcher(kernel)

    def scale_into(x, alpha, out, config):
        y = torch.empty_like(x) if out is None else out
        launch(x, y, float(alpha))
        return y
    return scale_into, (kernel,)


#: The op's launchers, one per :func:`_call_key`.
_LAUNCHERS = runtime.Launchers(_plan, _check)


def scale_copy(x, alpha: float, *, out=None, **config):
    """``alpha * x`` for a contiguous 2-D fp16/bf16/fp32 tensor, through the TileLang kernel (on the
    GPU in GPU mode, in the emulator on CPU tensors otherwise).

    The checks and the build run once per key (:func:`_call_key`); a later call with the key looks
    up its launcher and launches, so a repeated call costs what the bare kernel call does. Bad
    input gets one line naming the problem either way."""
    m = runtime.mode()
    try:
        key = _call_key(x, out, m, config)
    except AttributeError:      # not a tensor: the checks name it
        key = None
    return _LAUNCHERS(m, key, x, alpha, out, config)
