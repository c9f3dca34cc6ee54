"""Notebook 01's exercise: a row *max* (the row-sum kernel's sibling).

Write ``factory(N, dtype)`` returning a ``T.prim_func`` with two parameters::

    X:   T.Tensor((M, N), dtype)     # M = T.dynamic("M")
    Out: T.Tensor((M,), "float32")   # Out[i] = max_j X[i, j]

then ``check_row_max(factory)``. Careful with the last column tile when N is not a multiple of
your block: out-of-bounds elements are read as 0, which is *not* neutral for a max of negative
numbers. The checker uses rows that are entirely negative to catch exactly that.
"""
from .. import checks, runtime
from . import ExerciseResult, param_specs

DEFAULT_N = 1000  # not a multiple of any power-of-two block


def row_max_reference(x):
    return x.float().amax(dim=1)


def check_row_max(factory, *, N: int = DEFAULT_N, M: int = 777, dtype: str = "float16",
                  arch: str | None = None) -> ExerciseResult:
    res = ExerciseResult()
    try:
        program = factory(N, dtype)
    except Exception as exc:
        return res.failed(f"calling factory({N}, {dtype!r}) raised {type(exc).__name__}: {exc}")
    if not hasattr(program, "buffer_map"):
        return res.failed(f"factory({N}, {dtype!r}) returned {type(program).__name__}, not a T.prim_func")
    specs = param_specs(program)
    if len(specs) != 2:
        return res.failed(f"the kernel must take 2 parameters (X, Out); yours takes {len(specs)}: {specs}")
    (xs, xd), (os_, od) = specs
    if xs is None or len(xs) != 2 or xs[1] != N or xd != dtype:
        return res.failed(f"X must be a ({'M'}, {N}) {dtype} tensor; got shape {xs} dtype {xd}")
    if os_ is None or len(os_) != 1 or od != "float32":
        return res.failed(f"Out must be a 1-D float32 tensor of length M; got shape {os_} dtype {od}")
    if isinstance(xs[0], int):
        res.skipped("M is a compile-time constant; T.dynamic('M') would let one build serve any M")
    res.passed(f"signature: X {xs} {xd}, Out {os_} {od}")
    try:
        kernel = runtime.compile_kernel(program, arch=arch)
    except Exception as exc:
        return res.failed(f"compiling for {arch or runtime.current_arch()} failed: {type(exc).__name__}: {str(exc)[:600]}")
    res.passed(f"compiles for {arch or runtime.current_arch()}")
    src = kernel.get_kernel_source()
    if "MaxOp" in src:
        res.passed("the generated CUDA reduces with tl::MaxOp (a block-level max reduction)")
    else:
        return res.failed("the generated CUDA has no max reduction (tl::MaxOp): reduce each tile with T.reduce_max")
    if not runtime.mode().can_run or (arch and arch != runtime.current_arch()):
        res.skipped("numerical check: needs a GPU to launch the kernel (compile-only mode)")
        return res
    import torch

    x = checks.random_tensor((M, N), getattr(torch, dtype), "cuda")
    x[::3] = -x[::3].abs() - 0.5  # every third row entirely negative: zero padding would win the max
    out = checks.poisoned((M,), torch.float32, "cuda")
    try:
        kernel(x, out)
        torch.cuda.synchronize()
    except Exception as exc:
        return res.failed(f"launching failed: {type(exc).__name__}: {exc}")
    cmp = checks.compare(out, row_max_reference(x), tolerance=1e-6)
    if cmp.unwritten:
        return res.failed(f"{cmp.unwritten} of {M} outputs were never written (still NaN): check the grid covers every row")
    if not cmp.ok:
        neg = checks.compare(out[::3], row_max_reference(x)[::3], tolerance=1e-6)
        hint = " — all-negative rows are wrong: out-of-bounds columns read as 0 won the max (mask them with -inf)" if not neg.ok else ""
        return res.failed(f"wrong values: {cmp}{hint}")
    res.numerics_checked = True
    res.passed(f"matches torch.amax on fresh random data: {cmp}")
    return res
