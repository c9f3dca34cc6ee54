"""Exercise for notebook 05: give the fused RMSNorm + SiLU a residual input.

    y = silu(rms_norm(x + r) * gamma)      over the last dim; x + r formed in fp32

Write ``factory(C, dtype)`` returning a ``T.prim_func`` with five parameters, in this order::

    X:     T.Tensor((m, C), dtype)       # m = T.dynamic("m")
    R:     T.Tensor((m, C), dtype)       # the residual, same shape as X
    Gamma: T.Tensor((C,), dtype)
    Y:     T.Tensor((m, C), dtype)
    eps:   T.float32                     # a runtime scalar, like the kernel's

then ``check_residual_rmsnorm_silu(factory)``. The checker

1. calls your factory for C = 96 (a width where layout inference alone goes wrong) and checks the
   parameters (names do not matter; shapes and dtypes do);
2. compiles it (TileLang's and nvcc's errors reach you);
3. reads the generated CUDA: X and R must be loaded and Y stored with 16-byte vectors (``uint4``)
   -- the property that keeps the kernel bandwidth-bound at non-power-of-two widths;
4. on a GPU: runs C = 96 and C = 640 with a ragged number of rows and a poisoned (NaN) output
   against the fp32 reference; on a CPU it says plainly that the numbers were *not* checked.

Hint: start from ``rmsnorm_silu_program`` in ``tilelang_tutorial/kernels/rmsnorm_silu.py``; the
residual fragment needs the same ``row_group_layout`` annotation as X.
A reference solution is in ``tilelang_tutorial/exercises/rmsnorm_solution.py`` (try first!).
"""
import re

from .. import checks, runtime
from . import ExerciseResult, param_specs

CPU_WIDTH = 96
GPU_WIDTHS = (96, 640)
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
        res.skipped("m is a compile-time constant; T.dynamic('m') lets one build serve every row count")
    res.passed(f"signature: X, R, Y ({specs[0][0][0]}, {C}), Gamma ({C},), {dtype}; eps float32")
    return True


def _check(factory, dtype, arch) -> ExerciseResult:
    res = ExerciseResult()
    arch = arch or runtime.current_arch()
    C = CPU_WIDTH
    try:
        program = factory(C, dtype)
    except NotImplementedError:
        return res.failed("factory raised NotImplementedError: write the kernel first")
    except Exception as exc:  # the reader's code: report, never crash the notebook
        return res.failed(f"calling factory({C}, {dtype!r}) raised {type(exc).__name__}: {exc}")
    if not _signature(program, C, dtype, res):
        return res
    try:
        kernel = runtime.compile_kernel(program, arch=arch)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:600]
        return res.failed(f"compiling for {arch} failed: {type(exc).__name__}: {first}")
    res.passed(f"compiles for {arch}")

    # The generated CUDA: 16-byte vector accesses of X, R (loads) and Y (store) at C = 96.
    src = kernel.get_kernel_source()
    names = _buffer_names(program)
    missing = [role for role, name in zip(("X", "R", None, "Y"), names[:4])
               if role and not re.search(rf"\*\(uint4\*\)\({re.escape(name)} \+", src)]
    if missing:
        return res.failed(
            f"at C = {C} the generated CUDA does not access {', '.join(missing)} with 16-byte vectors (uint4): "
            f"layout inference probably gave each thread a whole row. Annotate every (block_m, C) fragment "
            f"with rmsnorm_silu.row_group_layout(...) as the kernel does.")
    res.passed(f"X and R are loaded and Y stored with 16-byte vectors at C = {C}")

    if not runtime.mode().can_run or arch != runtime.mode().arch:
        res.skipped("numerical check: needs a GPU to launch the kernel (compile-only mode)")
        return res
    import torch

    tdt = getattr(torch, dtype)
    for width in GPU_WIDTHS:
        try:
            k = kernel if width == C else runtime.compile_kernel(factory(width, dtype), arch=arch)
        except Exception as exc:
            return res.failed(f"C = {width}: factory/compile failed: {type(exc).__name__}: {str(exc)[:300]}")
        x = checks.random_tensor((RAGGED_M, width), tdt, "cuda")
        r = checks.random_tensor((RAGGED_M, width), tdt, "cuda")
        gamma = checks.random_tensor((width,), tdt, "cuda")
        y = checks.poisoned((RAGGED_M, width), tdt, "cuda")
        try:
            k(x, r, gamma, y, EPS)
            torch.cuda.synchronize()
        except Exception as exc:
            return res.failed(f"C = {width}: launching failed: {type(exc).__name__}: {exc}")
        cmp = checks.compare(y, residual_rmsnorm_silu_reference(x, r, gamma), tolerance=checks.TOLERANCE[dtype])
        if cmp.unwritten:
            return res.failed(f"C = {width}: {cmp.unwritten} outputs never written (still NaN) with M = {RAGGED_M} "
                              f"rows: does the grid cover the last, partial block?")
        if not cmp.ok:
            return res.failed(f"C = {width}: wrong values vs silu(rms_norm(x + r) * gamma): {cmp}")
        res.passed(f"C = {width}, M = {RAGGED_M}: matches the fp32 reference: {cmp}")
    res.numerics_checked = True
    return res
