"""C = ReLU(A @ B): a tiled GEMM with the activation fused into its epilogue.

Design
------
* One thread block computes one ``block_M x block_N`` tile of C. It walks the K dimension in
  ``block_K`` steps: each step copies a tile of A and a tile of B from global into **shared**
  memory (``T.copy``) and multiplies them on the tensor cores into a **fragment** (registers,
  ``T.alloc_fragment``) that holds the fp32 partial sums (``T.gemm``).
* ``T.Pipelined(..., num_stages=S)`` keeps S shared-memory buffers in flight, so the copies of
  step k+1.. overlap the multiply of step k. On Hopper (sm_90a) TileLang turns the copies into
  TMA loads issued by a dedicated *producer* warpgroup that signals mbarriers, and the multiply
  into ``wgmma`` issued by the *consumer* warpgroups (warp specialization, ``setmaxnreg``); on
  Ampere/Ada (sm_80/sm_89) it becomes ``cp.async`` + ``mma.sync``.
* The epilogue (ReLU, then the cast to the input dtype) runs on the fragment while it is still in
  registers: C is written once, never re-read. That is the whole point of fusing: torch's
  ``relu(a @ b)`` writes C, then reads and writes it again.
* ``T.use_swizzle(panel)`` remaps which C tile each block computes (in panels of ``panel`` tiles),
  so blocks that run at the same time share rows of A / columns of B in L2; the hardware's launch
  order is unchanged.
* Ragged shapes: M, N, K need not be multiples of the tile. Loads past the edge read zeros (TMA
  fills out-of-bounds boxes with zeros; the non-TMA paths are predicated and zero-filled), zeros
  add nothing to the dot products, and TileLang bounds the final store to C. When a row pitch is
  not a multiple of 16 bytes (N or K not a multiple of 8 for 16-bit types) TMA cannot describe the
  tensor and TileLang falls back to predicated loads: still correct, slower.
* ``dynamic_m=True`` declares M with ``T.dynamic("m")``: one compiled kernel serves every batch
  size (the grid and the bounds checks read ``m`` at launch time). N and K stay compile-time
  constants (they are the weight's shape), which lets TileLang prove most bounds away.

The op :func:`gemm_relu` always builds the dynamic-M kernel, keyed on (N, K, dtype, config), so a
model that calls it with many batch sizes compiles once per configuration the rule picks
(:mod:`.rule`: the tile, and a split of K for small M x N, from measured rates).
"""
# No `from __future__ import annotations`: T.prim_func evaluates the annotations of the kernel
# (T.Tensor(shape, dtype)) against the factory's local variables.
import functools

import tilelang.language as T

from ... import checks, runtime

from .configs import (  # noqa: F401  (re-exported: gr.SEED_CONFIG, gr.GemmConfig, ...)
    POLICIES, SEED_CONFIG, SUPPORTED_DTYPES, SWIZZLE_ORDERS, TUNED_CONFIGS, GemmConfig, tuned_config,
)


def gemm_relu_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                      policy="Square", swizzle_panel=4, swizzle_order="column", in_dtype="float16",
                      accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """``C = ReLU(A @ B)`` with A (M, K), B (K, N) and C (M, N) row-major, C in ``in_dtype``.
    With ``dynamic_m`` the M argument is ignored and M becomes the runtime size ``m``."""
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_kernel(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        # One block per C tile: grid x walks N, grid y walks M.
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            # Remap which C tile each block computes (the hardware's launch order is unchanged), in
            # panels of `swizzle_panel` tiles, so that blocks running at the same time share rows
            # of A / columns of B in L2.
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            T.clear(C_local)

            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                # Tile copies global -> shared, the source named by the tile's top-left corner (the
                # extent is the destination's shape); out-of-range elements arrive as zeros.
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                # Tensor-core multiply-accumulate into the fp32 fragment.
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)

            # Fused epilogue, on registers: ReLU, then one bounded store (cast to in_dtype).
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            if store_via_shared:
                C_shared = T.alloc_shared((block_M, block_N), in_dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_relu_kernel


def _program_kwargs(config: GemmConfig) -> dict:
    return config.as_dict()


@functools.lru_cache(maxsize=None)
def _build(M, N, K, config: GemmConfig, dtype: str, dynamic_m: bool, arch: str, factory=None):
    program = (factory or gemm_relu_program)(M, N, K, in_dtype=dtype, dynamic_m=dynamic_m, **_program_kwargs(config))
    # No out_idx: the caller passes C, so tests can hand in a poisoned buffer.
    return runtime.compile_kernel(program, arch=arch)


def build_gemm_relu(N: int, K: int, *, M: int | None = None, config: GemmConfig | None = None,
                    dtype: str = "float16", arch: str | None = None, program=None):
    """Compile (once per key) the kernel for a given N, K, dtype and config.

    ``M=None`` (the default) builds the dynamic-M kernel that serves every M. The compiled kernel
    is called as ``kernel(A, B, C)``. ``program``: a factory with :func:`gemm_relu_program`'s
    signature to build instead of this module's (a notebook passes its own kernel cell's).
    """
    config = config or SEED_CONFIG
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"dtype must be one of {SUPPORTED_DTYPES}, got {dtype!r}")
    if N <= 0 or K <= 0 or (M is not None and M <= 0):
        raise ValueError(f"N, K (and a static M) must be positive, got M={M}, N={N}, K={K}")
    arch = arch or runtime.current_arch()
    if program is None:
        return _build(M, int(N), int(K), config, dtype, M is None, arch)
    return _build(M, int(N), int(K), config, dtype, M is None, arch, program)


def build_for(N: int, K: int, config: GemmConfig, split: int, dtype: str, last_rows_kind: str = "filled",
              a_rows: int = 0, arch: str | None = None) -> tuple:
    """The compiled kernel(s) the op runs for a rule's choice (``rule.GemmChoice``: its config,
    split, ``last_rows`` and ``a_rows``; not the GEMV): ``(kernel,)``, or ``(partial, reduce)``
    for a split of K."""
    from . import last_rows, split_k

    if split > 1:
        return split_k.build_split_k(N, K, split, config, dtype, arch,
                                     partial_program=last_rows.partial_for(last_rows_kind, a_rows))
    return (build_gemm_relu(N, K, config=config, dtype=dtype, arch=arch,
                            program=last_rows.program_for(last_rows_kind, a_rows)),)


def gemm_relu_reference(a, b):
    """ReLU(A @ B) computed in fp32 from the same (rounded) inputs."""
    import torch

    return torch.relu(a.to(torch.float32) @ b.to(torch.float32))


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def validate_inputs(a, b, *, out=None):
    """Check the inputs before anything is compiled; return (M, N, K, dtype name).

    Every check here runs on any machine, so the errors are the same with or without a GPU.
    """
    import torch

    allowed = (torch.float16, torch.bfloat16)
    checks.check_tensor(a, "a", dtype=allowed, device_type=None, ndim=2, contiguous=False)
    checks.check_tensor(b, "b", dtype=allowed, device_type=None, ndim=2, contiguous=False)
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have the same dtype, got a: {_dtype_name(a)}, b: {_dtype_name(b)}")
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"inner dimensions do not match: a is {tuple(a.shape)} (M, K) and b (K, N) is "
                         f"{tuple(b.shape)}, so K={K} vs {Kb}")
    for name, t in (("a", a), ("b", b)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (got strides {t.stride()}); call .contiguous() first")
        # TMA needs a 16-byte aligned base address; a view with an odd storage offset breaks that.
        if t.numel() and t.data_ptr() % 16:
            raise ValueError(f"{name} must start on a 16-byte boundary (it is a view at an offset); call .clone() first")
    if out is not None:
        checks.check_tensor(out, "out", dtype=a.dtype, device_type=None, ndim=2, shape=(M, N))
    return M, N, K, _dtype_name(a)


def check_config_for_shape(N: int, K: int, config: GemmConfig) -> None:
    """One clear line instead of a ptxas failure: rows that are not 16-byte aligned (N or K not a
    multiple of 8 for 16-bit data) cannot use TMA, and the predicated loads that replace it need
    registers only the 128-thread tiles up to 128 x 128 have to spare."""
    if (N % 8 or K % 8) and (config.threads > 128 or config.block_N > 128 or config.block_M > 128):
        raise ValueError(
            f"N={N}, K={K}: a dimension that is not a multiple of 8 needs a tile of at most 128 x 128 on 128 "
            f"threads (config {config.name} is larger); pass config=None and gemm_relu chooses one")


def _check(a, b, config, out, program):
    """Every check of the op's inputs, from scratch: one line naming the first problem, before
    anything compiles. Returns (M, N, K, dtype name)."""
    M, N, K, dtype = validate_inputs(a, b, out=out)
    if config is not None:
        check_config_for_shape(N, K, config)
    device = runtime.mode().device
    for name, t in (("a", a), ("b", b)) + ((("out", out),) if out is not None else ()):
        checks.check_tensor(t, name, device_type=device, contiguous=False)
    if a.device != b.device:
        raise ValueError(f"a and b must be on the same device, got {a.device} and {b.device}")
    if out is not None and out.device != a.device:
        raise ValueError(f"out must be on a's device, got {out.device} and {a.device}")
    if out is not None and not out.is_contiguous():
        raise ValueError(f"out must be contiguous (got strides {out.stride()}); pass a contiguous buffer")
    return M, N, K, dtype


def _plan(a, b, config, out, program):
    """Check (one line naming the problem, before anything compiles), choose and build: returns
    ``(launch, kernels)``: ``launch(a, b, config, out, program)`` runs every call with this key
    (``out`` None: it allocates C; either way it returns C), and the compiled kernels it launches
    (:class:`runtime.Launchers`)."""
    import torch

    from . import last_rows, rule, split_k

    M, N, K, dtype = _check(a, b, config, out, program)
    tdt, dev = a.dtype, a.device

    def new_out(out):
        return torch.empty((M, N), dtype=tdt, device=dev) if out is None else out

    if M == 0 or N == 0:
        return (lambda a, b, config, out, program: new_out(out)), ()
    if K == 0:
        return (lambda a, b, config, out, program: new_out(out).zero_()), ()
    split, partial_program, emulator_checks = 1, None, None
    if config is None:
        choice = rule.choose(M, N, K, dtype)
        config = choice.config
        split = choice.split if program is None else 1
        if program is None:           # the rule's kernel for the last row of tiles (a reader's runs as it is)
            if choice.a_rows and M > choice.a_rows:
                raise AssertionError(f"rule chose boxes of {choice.a_rows} rows for M = {M}")
            program = last_rows.program_for(choice.last_rows, choice.a_rows)
            partial_program = last_rows.partial_for(choice.last_rows, choice.a_rows)
            emulator_checks = last_rows.EMULATOR_CHECKS.get(choice.last_rows)
        if choice.gemv and program is None:
            from . import gemv

            compiled = gemv.build_gemv_relu(N, K, choice.gemv, dtype)
            return _launch_into(runtime.launcher(compiled), new_out), (compiled,)
    if split > 1:
        pair = split_k.build_split_k(N, K, split, config, dtype, partial_program=partial_program)
        partial, reduce = runtime.launcher(pair[0], emulator_checks), runtime.launcher(pair[1])

        def launch_split(a, b, config, out, program):
            out = new_out(out)
            workspace = torch.empty((split, M, N), dtype=torch.float32, device=dev)
            partial(a, b, workspace)
            reduce(workspace, out)
            return out
        return launch_split, pair
    compiled = build_gemm_relu(N, K, config=config, dtype=dtype, program=program)
    return _launch_into(runtime.launcher(compiled, emulator_checks), new_out), (compiled,)


def _launch_into(launch, new_out):
    """One kernel ``launch(a, b, c)`` as the op's launch: C is ``out``, or allocated when ``out`` is None."""
    def launch_one(a, b, config, out, program):
        out = new_out(out)
        launch(a, b, out)
        return out
    return launch_one


def _call_key(a, b, config, out, program, m):
    """What the checks and the build depend on, read cheaply (:class:`runtime.Launchers`).

    In GPU mode each compiled kernel checks every tensor argument itself (dtype, each dimension,
    strides, device): the key is what picks the plan -- a's and b's shapes, a's dtype and device,
    whether ``out`` is given, the config, the factory -- and an argument a kernel refuses is then
    named by :func:`_check`. In the emulator nothing checks the arguments: the key holds every
    attribute :func:`_check` reads (each tensor's type, shape, dtype, device and contiguity). A
    view that does not start on a 16-byte boundary (TMA's requirement, which no kernel checks)
    gets no key: it is planned, and refused, on every call."""
    if a.data_ptr() % 16 or b.data_ptr() % 16:
        return None
    if m.name == "gpu":
        return (a.shape, b.shape, a.dtype, a.get_device(), out is None, config, program)
    return (type(a), a.shape, a.dtype, a.device, a.is_contiguous(), type(b), b.shape, b.dtype, b.device,
            b.is_contiguous(), None if out is None else (type(out), out.shape, out.dtype, out.device, out.is_contiguous()),
            config, program)


#: The op's launchers, one per :func:`_call_key`. ``_plan`` and ``_check`` are looked up when called,
#: so a test that replaces either is seen at once.
MAX_PLANS = 4096
_LAUNCHERS = runtime.Launchers(lambda *args: _plan(*args), lambda *args: _check(*args), MAX_PLANS)


def clear_plans() -> None:
    """Forget every plan (tests and benchmarks that replace what a plan captured call this)."""
    _LAUNCHERS.clear()


def gemm_relu(a, b, config: GemmConfig | None = None, *, out=None, program=None):
    """``relu(a @ b)`` with the TileLang kernel (on the GPU in GPU mode, in the emulator on CPU
    tensors otherwise).

    ``a``: (M, K), ``b``: (K, N), both fp16 or both bf16, contiguous. ``config=None`` lets
    :func:`.rule.choose` pick the tile (and a split of K) for this shape and architecture; a
    given ``config`` is used as is. ``out``: optional (M, N) output buffer. Returns C (M, N) in
    the input dtype. ``program``: the factory to build (default :func:`gemm_relu_program`; a
    notebook passes its own kernel cell's, so that a reader's edit reaches the op); with a
    factory of its own the op runs it as one kernel, never the split-K pair.

    The checks, the rule's choice and the build run once per key (:func:`_call_key`); a later call
    with the key looks up its launch and launches. Bad input gets one line naming the problem
    either way, before any compiler runs.
    """
    m = runtime.mode()
    try:
        key = _call_key(a, b, config, out, program, m)
    except AttributeError:          # not tensors: the checks name them
        key = None
    return _LAUNCHERS(m, key, a, b, config, out, program)
