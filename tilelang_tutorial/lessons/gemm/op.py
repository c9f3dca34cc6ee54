"""The op: ``C = relu(a @ b)`` as a user calls it, ``gemm_relu(a, b, config=None, out=None)``.

:mod:`.kernel` holds the program notebook 02 teaches (:func:`.kernel.gemm_relu_program`), its
builder and the reference; this module checks the inputs, lets :func:`.rule.choose` pick the tile
(and a split of K, :mod:`.split_k`, the kernel for the last row of tiles, :mod:`.last_rows`, or the
GEMV, :mod:`.gemv`) for each shape, builds it once per key and launches it (:func:`_call_key`,
through :class:`runtime.Launchers`).
"""
from ... import checks, runtime
from . import last_rows, rule, split_k
from .configs import GemmConfig
from .kernel import build_gemm_relu


def build_for(N: int, K: int, config: GemmConfig, split: int, dtype: str, last_rows_kind: str = "filled",
              a_rows: int = 0, arch: str | None = None) -> tuple:
    """The compiled kernel(s) the op runs for a rule's choice (``rule.GemmChoice``: its config,
    split, ``last_rows`` and ``a_rows``; not the GEMV): ``(kernel,)``, or ``(partial, reduce)``
    for a split of K."""
    if split > 1:
        return split_k.build_split_k(N, K, split, config, dtype, arch,
                                     partial_program=last_rows.partial_for(last_rows_kind, a_rows))
    return (build_gemm_relu(N, K, config=config, dtype=dtype, arch=arch,
                            program=last_rows.program_for(last_rows_kind, a_rows)),)


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
    the input dtype. ``program``: the factory to build (default :func:`.kernel.gemm_relu_program`; a
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
