"""Notebook 01's second kernel: a row reduction, ``s[i] = sum_j x[i, j]`` in fp32.

``T.clear`` zeroes the running total (a fragment starts with whatever its registers held);
``T.reduce_sum`` over a fragment is where the compiler's inferred thread mapping matters: each
thread first sums the elements of the row it owns in registers, then the threads that share a
row combine their partial sums with warp shuffles (``tl::AllReduce`` in the generated CUDA).
The loop over column tiles (``T.serial``: one tile after another) accumulates into a second
fragment, so any N works. It is not ``T.Pipelined``: pipelining overlaps a copy into shared memory
with work on the previous tile, and this kernel copies straight into registers (same CUDA either way).

Sixteen rows per block, not 64: a reduction produces little per block, so the grid must have
enough blocks to keep every SM's loads in flight (4096 rows make 256 blocks of 16 rows, but only
64 blocks of 64 rows: fewer than a Hopper GPU's 132 SMs).
"""

import functools

import tilelang.language as T
import torch

from ... import checks, runtime

DTYPES = ("float16", "bfloat16", "float32")


def row_sum_program(N: int, block_M: int = 16, block_N: int = 256, threads: int = 128,
                    dtype: str = "float16"):
    """Row sums of an (M, N) matrix into an fp32 vector of length M (M dynamic, N static)."""
    M = T.dynamic("M")

    @T.prim_func
    def row_sum(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")  # one tile, cast to fp32
            part = T.alloc_fragment((block_M,), "float32")            # this tile's row sums
            total = T.alloc_fragment((block_M,), "float32")           # running row sums
            T.clear(total)                                            # fragments start undefined
            for k in T.serial(T.ceildiv(N, block_N)):                 # column tiles, one by one
                # Out-of-bounds columns of the last tile are read as 0, which a sum ignores.
                T.copy(X[bx * block_M, k * block_N], x_frag)
                T.reduce_sum(x_frag, part, dim=1)                     # threads cooperate per row
                for i in T.Parallel(block_M):
                    total[i] += part[i]
            T.copy(total, S[bx * block_M])

    return row_sum


@functools.lru_cache(maxsize=None)
def _build(N: int, block_M: int, block_N: int, threads: int, dtype: str, arch: str):
    return runtime.compile_kernel(row_sum_program(N, block_M, block_N, threads, dtype), arch=arch)


def build_row_sum(N: int, block_M: int = 16, block_N: int = 256, threads: int = 128,
                  dtype: str = "float16", arch: str | None = None):
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return _build(int(N), block_M, block_N, threads, dtype, arch or runtime.current_arch())


def row_sum_reference(x):
    """fp64 reference (fp32 accumulation in the kernel is compared against it)."""
    return x.double().sum(dim=1)


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
        return (build_row_sum, x.shape[1:], x.dtype, out is None, m.arch, knobs)
    return (build_row_sum, type(x), x.shape, x.dtype, x.device, x.is_contiguous(),
            None if out is None else (type(out), out.shape, out.dtype, out.device, out.is_contiguous()),
            m.arch, knobs)


def _check(x, out, config) -> None:
    """Every check, from scratch: one line naming the first problem."""
    device = runtime.mode().device
    checks.check_tensor(x, "x", dtype=(torch.float16, torch.bfloat16, torch.float32), device_type=None, ndim=2)
    if out is not None:
        checks.check_tensor(out, "out", dtype=torch.float32, device_type=None, ndim=1, shape=(x.shape[0],))
    checks.check_tensor(x, "x", device_type=device)
    if out is not None:
        checks.check_tensor(out, "out", device_type=device)
        if out.device != x.device:
            raise ValueError(f"out must be on x's device ({x.device}), got {out.device}")


def _plan(x, out, config):
    """Check, build, and return the launch of every call with this key and its kernel."""
    _check(x, out, config)
    kernel = build_row_sum(x.shape[1], dtype=str(x.dtype).replace("torch.", ""), **config)
    launch = runtime.launcher(kernel)

    def sum_into(x, out, config):
        s = torch.empty(x.shape[0], dtype=torch.float32, device=x.device) if out is None else out
        launch(x, s)
        return s
    return sum_into, (kernel,)


#: The op's launchers, one per :func:`_call_key`.
_LAUNCHERS = runtime.Launchers(_plan, _check)


def row_sum(x, *, out=None, **config):
    """fp32 row sums of a contiguous 2-D fp16/bf16/fp32 tensor (GPU, or the emulator on the CPU).

    The checks and the build run once per key (:func:`_call_key`); a later call with the key looks
    up its launcher and launches, so a repeated call costs what the bare kernel call does. Bad
    input gets one line naming the problem either way."""
    m = runtime.mode()
    try:
        key = _call_key(x, out, m, config)
    except AttributeError:      # not a tensor: the checks name it
        key = None
    return _LAUNCHERS(m, key, x, out, config)
