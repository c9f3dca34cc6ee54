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


#: The op's fast path: ``{key: (builder, launcher, trusted)}`` for every combination of inputs
#: that passed the full checks (:func:`_call_key` says what a key holds), with the compiled
#: kernel's launcher (:func:`runtime.launcher`: the kernel itself on the GPU, the emulator
#: otherwise); ``trusted``: a later call with the key may skip the checks. Bounded: cleared when it
#: reaches _FAST_MAX entries.
_FAST_MAX = 1024
_FAST = runtime.CallCache(_FAST_MAX)


def _call_key(x, out, m, config):
    """What the checks and the build depend on, read cheaply.

    In GPU mode the launcher is the compiled kernel, whose generated host code checks every
    tensor argument itself before it launches (dtype, number of dimensions, each dimension against
    N and against x's rows, strides, device type and device id): the key is what picks the kernel
    (x's dtype, its shape past the rows, whether ``out`` is given, the architecture, the knobs), and
    an argument the kernel refuses is then named by :func:`_check`. In the emulator nothing checks
    the arguments: the key holds every attribute :func:`_check` reads (each tensor's type, shape,
    dtype, device and contiguity), so two calls with one key pass or fail the same checks."""
    knobs = tuple(config.items()) if config else ()
    if m.name == "gpu":
        return (x.shape[1:], x.dtype, out is None, m.arch, knobs)
    return (type(x), x.shape, x.dtype, x.device, x.is_contiguous(),
            None if out is None else (type(out), out.shape, out.dtype, out.device, out.is_contiguous()),
            m.name, m.arch, knobs)


def _check(x, out, device: str) -> None:
    """Every check, from scratch: one line naming the first problem."""
    checks.check_tensor(x, "x", dtype=(torch.float16, torch.bfloat16, torch.float32), device_type=None, ndim=2)
    if out is not None:
        checks.check_tensor(out, "out", dtype=x.dtype, device_type=None, ndim=2, shape=tuple(x.shape))
    checks.check_tensor(x, "x", device_type=device)
    if out is not None:
        checks.check_tensor(out, "out", device_type=device)
        if out.device != x.device:
            raise ValueError(f"out must be on x's device ({x.device}), got {out.device}")


def scale_copy(x, alpha: float, *, out=None, **config):
    """``alpha * x`` for a contiguous 2-D fp16/bf16/fp32 tensor, through the TileLang kernel (on the
    GPU in GPU mode, in the emulator on CPU tensors otherwise).

    The checks and the build lookup run once per key (:func:`_call_key`); a later call with the
    key looks up its launcher in one dict and launches (issue 24: the op's host cost at the bare
    kernel call's). Bad input gets one line naming the problem either way."""
    m = runtime.mode()
    try:
        key = _call_key(x, out, m, config)
        fast = _FAST.get(key)
    except Exception:       # not a tensor, or an unhashable knob: the full checks name it
        key = fast = None
    if fast is None or fast[0] is not build_scale_copy:   # first call with this key (or a new builder)
        _check(x, out, m.device)
        kernel = build_scale_copy(x.shape[1], dtype=str(x.dtype).replace("torch.", ""), **config)
        launch = runtime.launcher(kernel)
        trusted = m.name != "gpu" or (launch is kernel and runtime.checks_its_arguments(kernel))
        fast = (build_scale_copy, launch, trusted)
        _FAST.remember(key, fast)
    elif not fast[2]:       # a GPU-mode key, and a launcher that does not check its arguments
        _check(x, out, m.device)
    y = torch.empty_like(x) if out is None else out
    try:
        fast[1](x, y, float(alpha))
    except Exception:
        problem = checks.first_problem(_check, x, out, m.device)   # the argument the kernel refused
        if problem is None:
            raise
        raise problem from None
    return y
