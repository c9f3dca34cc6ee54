"""Notebook 05's exercises.

1. **Choose the layout configuration** for C = 640 (fp16): how many threads share a row
   (``group``) and how many threads a block has (``threads``). Give
   ``RMSNormSiLUConfig(group=..., threads=...)`` (from the lesson's ``kernel`` module) to
   ``check_rmsnorm_config(config)``. The checker builds ``rmsnorm_silu_program(640, config=...)``,
   compiles it (either mode) and reads what compilation can tell: 16-byte (``uint4``) loads of X
   and stores of Y, the size of the reduction (``AllReduce`` over ``group`` lanes), each
   thread's slice of the row, and ptxas's registers and spills (``inspector.resource_usage``, no
   GPU needed), then runs the kernel against the fp32 reference (GPU, or the tile emulator).

2. **A residual input**: ``y = silu(rms_norm(x + r) * gamma)`` over the last dim, ``x + r``
   formed in fp32. Write ``factory(C, dtype)`` returning a ``T.prim_func`` with five parameters,
   in this order::

       X:     T.Tensor((m, C), dtype)       # m = T.dynamic("m")
       R:     T.Tensor((m, C), dtype)       # the residual, same shape as X
       Gamma: T.Tensor((C,), dtype)
       Y:     T.Tensor((m, C), dtype)
       eps:   T.float32                     # a runtime scalar, like the kernel's

   then ``check_residual_rmsnorm_silu(factory)``. The checker calls your factory for C = 96 (a
   width where layout inference alone goes wrong), checks the parameters (names do not matter;
   shapes and dtypes do), compiles it, reads the generated CUDA (X and R must be loaded and Y
   stored with 16-byte vectors), and runs C = 96 and C = 640 with a ragged number of rows and a
   poisoned (NaN) output against the fp32 reference, on the GPU or in the tile emulator. The
   hint: start from ``rmsnorm_silu_program`` (the lesson's ``kernel`` module); the residual fragment needs the same
   ``row_group_layout`` annotation as X.

Solutions: ``solutions/config.py`` and ``solutions/residual.py`` in this lesson's folder.
"""
import re

from ... import checks, runtime
from ...exercise_kit import (ExerciseResult, call_factory, compile_or_fail, kernel_source, not_attempted, param_specs,
                             quiet_tilelang, run_and_compare)

CPU_WIDTH = 96
RUN_WIDTHS = (96, 640)
RAGGED_M = 1001
EPS = 1e-5


def residual_rmsnorm_silu_reference(x, r, gamma, eps: float = EPS):
    """fp32: silu(rms_norm(x + r) * gamma) over the last dim."""
    import torch

    h = x.float() + r.float()
    v = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()
    return v * torch.sigmoid(v)


def _buffer_names(program):
    return [program.buffer_map[p].name if p in program.buffer_map else None for p in program.params]


def check_residual_rmsnorm_silu(factory, *, dtype: str = "float16", arch: str | None = None,
                                verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(C, dtype)`` (see the module docstring); prints and returns the result."""
    res = _check(factory, dtype, arch)
    if verbose:
        print(res)
    return res


def _signature(program, C, dtype, res):
    if not hasattr(program, "buffer_map"):
        res.failed(f"factory({C}, {dtype!r}) returned {type(program).__name__}, not a T.prim_func")
        return False
    specs = param_specs(program)
    if len(specs) != 5:
        res.failed(f"the kernel must take 5 parameters (X, R, Gamma, Y, eps); yours takes {len(specs)}: {specs}")
        return False
    for name, (shape, dt), want in zip(("X", "R", "Gamma", "Y"), specs[:4], (2, 2, 1, 2)):
        if shape is None or len(shape) != want or shape[-1] != C or dt != dtype:
            want_s = f"(m, {C})" if want == 2 else f"({C},)"
            res.failed(f"{name} must be a {want_s} {dtype} tensor; got shape {shape}, dtype {dt}")
            return False
    if specs[4] != (None, "float32"):
        res.failed(f"the 5th parameter must be the scalar eps: T.float32; got {specs[4]}")
        return False
    if isinstance(specs[0][0][0], int):
        res.hint("m is a compile-time constant; T.dynamic('m') lets one build serve every row count")
    res.passed(f"signature: X, R, Y ({specs[0][0][0]}, {C}), Gamma ({C},), {dtype}; eps float32")
    return True


def _check(factory, dtype, arch) -> ExerciseResult:
    res = ExerciseResult()
    arch = arch or runtime.current_arch()
    C = CPU_WIDTH
    program = call_factory(res, factory, (C, dtype),
                           "write the kernel first: factory(C, dtype) returning a T.prim_func(X, R, Gamma, Y, eps)")
    if program is None:
        return res
    if not _signature(program, C, dtype, res):
        return res
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res

    # The generated CUDA: 16-byte vector accesses of X, R (loads) and Y (store) at C = 96.
    src = kernel_source(kernel)
    names = _buffer_names(program)
    missing = [role for role, name in zip(("X", "R", None, "Y"), names[:4])
               if role and not re.search(rf"\*\(uint4\*\)\({re.escape(name)} \+", src)]
    if not src:
        pass
    elif missing:
        return res.failed(
            f"at C = {C} the generated CUDA does not access {', '.join(missing)} with 16-byte vectors (uint4): "
            f"layout inference probably gave each thread a whole row. Annotate every (block_m, C) fragment "
            f"with row_group_layout(...) (the lesson's kernel module) as the kernel does.")
    else:
        res.passed(f"X and R are loaded and Y stored with 16-byte vectors at C = {C}")

    import torch

    dev = runtime.mode().device
    tdt = getattr(torch, dtype)
    for width in RUN_WIDTHS:
        try:
            with quiet_tilelang():
                k = kernel if width == C else runtime.compile_kernel(factory(width, dtype), arch=arch)
        except Exception as exc:
            return res.failed(f"C = {width}: factory/compile failed: {type(exc).__name__}: {str(exc)[:300]}")
        x = checks.random_tensor((RAGGED_M, width), tdt, dev)
        r = checks.random_tensor((RAGGED_M, width), tdt, dev)
        gamma = checks.random_tensor((width,), tdt, dev)
        y = checks.poisoned((RAGGED_M, width), tdt, dev)
        run_and_compare(res, k, (x, r, gamma, y, EPS), residual_rmsnorm_silu_reference(x, r, gamma), out=y,
                        tolerance=checks.TOLERANCE[dtype],
                        what=f"silu(rms_norm(x + r) * gamma) in fp32 at C = {width}, M = {RAGGED_M}",
                        hint_unwritten="does the grid cover the last, partial block of rows?",
                        hint_wrong="the residual is added before the norm: h = x + r in fp32, then rms_norm(h)")
        if not res.ok or not res.numerics_checked:
            return res
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 1: the layout configuration for C = 640
# ------------------------------------------------------------------------------------------------

CONFIG_WIDTH = 640


def check_rmsnorm_config(config, *, C: int = CONFIG_WIDTH, dtype: str = "float16", arch: str | None = None,
                         verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``RMSNormSiLUConfig(group=..., threads=...)`` for width C; prints and returns."""
    res = _check_config(config, C, dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_config(config, C, dtype, arch) -> ExerciseResult:
    from ...inspector import resource_usage
    from . import kernel as rs

    res = ExerciseResult()
    what = "give RMSNormSiLUConfig(group=..., threads=...) (the class is in the lesson's kernel module)"
    if config is None:
        return not_attempted(res, what)
    if isinstance(config, dict):
        try:
            config = rs.RMSNormSiLUConfig(**config)
        except TypeError as exc:
            return res.failed(f"{exc}; {what}")
    if not isinstance(config, rs.RMSNormSiLUConfig):
        # The notebook defines its own copy of the class (its kernel cell): accept any object with
        # the same fields, and rebuild the lesson's config from them.
        if not all(hasattr(config, f) for f in ("group", "threads")):
            return res.failed(f"expected an RMSNormSiLUConfig, got {type(config).__name__}; {what}")
        if config.group is None or config.threads is None:
            return not_attempted(res, what)
        config = rs.RMSNormSiLUConfig(group=config.group, threads=config.threads,
                                      rows_per_thread=getattr(config, "rows_per_thread", 1))
    g, t = config.group, config.threads
    if g is None or t is None:
        return not_attempted(res, what)
    n_vec = C // rs.VEC
    valid = rs.valid_groups(C)
    if g not in valid:
        why = ("a power of two (the sum of squares is a butterfly that pairs lanes by halves)" if g < 1 or g & (g - 1)
               else f"at most {valid[-1]}: a row of {C} is {n_vec} 16-byte vectors, more lanes would hold nothing")
        return res.failed(f"group = {g}: the group must be {why}; for C = {C} that leaves {valid}")
    if t % 32 or t % g or not 32 <= t <= 1024:
        return res.failed(f"threads = {t}: a block is whole warps (a multiple of 32, at most 1024) and whole groups "
                          f"(a multiple of {g})")
    v = rs.vectors_per_thread(C, g)
    res.passed(f"group = {g} lanes per row -> {v} vectors ({v * rs.VEC} elements) of the row per thread; "
               f"{t // g * config.rows_per_thread} rows per block")
    if v * g != n_vec:
        res.hint(f"{g} lanes x {v} vectors = {v * g} slots for {n_vec} vectors: the row is padded, and {v * g - n_vec} "
                 f"slots per row ({100 * (v * g - n_vec) / (v * g):.0f}%) hold nothing (correct: TileLang bounds-checks "
                 f"each 16-byte vector; notebook 05's section 7 measures what padding costs)")
    try:
        program = rs.rmsnorm_silu_program(C, dtype, config)
    except Exception as exc:
        return res.failed(f"rmsnorm_silu_program rejected it: {type(exc).__name__}: {exc}")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    names = _buffer_names(program)
    x_name, y_name = names[0], names[2]
    if src and not (re.search(rf"\*\(uint4\*\)\({re.escape(x_name)} \+", src)
                    and re.search(rf"\*\(uint4\*\)\({re.escape(y_name)} \+", src)):
        return res.failed("the generated CUDA does not load X and store Y with 16-byte vectors (uint4)")
    red = re.search(r"AllReduce<tl::SumOp, (\d+)", src)
    lanes = int(red.group(1)) if red else 1
    if not src:
        pass
    elif lanes != g:
        return res.failed(f"the sum of squares is reduced over {lanes} lanes, not the group of {g}")
    else:
        res.passed("X is loaded and Y stored with 16-byte vectors (uint4)")
        res.passed(f"the sum of squares is reduced across exactly the {g} lanes of a row"
                   + (" (no shuffle at all: one lane holds the whole row)" if g == 1 else " (warp shuffles)"))
    usage = None
    if src:
        try:
            usage = next(iter(resource_usage(kernel).values()))
        except Exception as exc:  # ptxas missing: say so, do not fail the reader
            res.skipped(f"registers/spills not checked: ptxas -v failed ({type(exc).__name__}: {exc})")
    if usage is not None:
        if usage["spill_stores"] or usage["spill_loads"]:
            return res.failed(f"ptxas: {usage['registers']} registers/thread and {usage['spill_stores']} B spilled to local "
                              f"memory: {v * rs.VEC} elements of the row per thread is too many; use a larger group")
        res.passed(f"ptxas: {usage['registers']} registers/thread, nothing spilled")
    if v < 2:
        res.hint("each thread holds a single 16-byte vector of its row: correct, but few loads in flight per thread")
    import torch

    dev = runtime.mode().device
    tdt = getattr(torch, dtype)
    x = checks.random_tensor((RAGGED_M, C), tdt, dev)
    gamma = checks.random_tensor((C,), tdt, dev)
    y = checks.poisoned((RAGGED_M, C), tdt, dev)
    return run_and_compare(res, kernel, (x, gamma, y, EPS), rs.rmsnorm_silu_reference(x, gamma, EPS), out=y,
                           tolerance=checks.TOLERANCE[dtype], what=f"silu(rms_norm(x) * gamma) in fp32, C = {C}, M = {RAGGED_M}")
