"""Exercise for notebook 02: change the GEMM's epilogue to ``C = GELU(A @ B + bias)``.

Write a kernel factory ``factory(M, N, K, in_dtype)`` that returns a ``T.prim_func`` with four
parameters, in this order::

    A:    T.Tensor((M, K), in_dtype)
    B:    T.Tensor((K, N), in_dtype)
    Bias: T.Tensor((N,), in_dtype)
    C:    T.Tensor((M, N), in_dtype)      # C = GELU(A @ B + Bias), exact (erf) GELU

then call ``check_gemm_epilogue(factory)``. The checker

1. calls your factory and checks the parameters (names do not matter, shapes and dtypes do);
2. compiles it for the current architecture (so TileLang's and nvcc's errors reach you);
3. on a GPU: runs it on fresh random inputs with a poisoned (NaN) output and compares it with a
   float32 torch reference; on a CPU-only machine it says plainly that the numbers were *not*
   checked.

Hint: the exact GELU is ``0.5 * x * (1 + erf(x / sqrt(2)))``; ``T.erf`` exists. Add the bias
inside the same ``T.Parallel`` loop as the activation, before it.
A reference solution is in ``tilelang_tutorial/exercises/gemm_solution.py`` (try first!).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import checks, runtime

#: Small ragged problem: not a multiple of any tile, so the edge handling is exercised too.
DEFAULT_SHAPE = (300, 264, 200)


@dataclass
class ExerciseResult:
    ok: bool                    # False as soon as one check failed
    numerics_checked: bool      # True only when the kernel ran on a GPU and was compared
    lines: list = field(default_factory=list)

    def __str__(self) -> str:
        if not self.ok:
            verdict = "NOT YET: see the failing check above"
        elif self.numerics_checked:
            verdict = "PASSED: compiled, ran and matched the reference"
        else:
            verdict = "COMPILES (numerical check needs a GPU; not run here)"
        return "\n".join(self.lines + [verdict])

    def __bool__(self) -> bool:
        return self.ok


def gemm_bias_gelu_reference(a, b, bias):
    """GELU(a @ b + bias), exact GELU, in float32."""
    import torch

    x = a.float() @ b.float() + bias.float()
    return torch.nn.functional.gelu(x)


def _param_specs(prim_func):
    """[(shape tuple, dtype str)] of a prim_func's buffer parameters, in order."""
    specs = []
    for p in prim_func.params:
        buf = prim_func.buffer_map.get(p)
        if buf is None:
            specs.append((None, str(p.dtype)))
            continue
        shape = tuple(int(s) if hasattr(s, "value") or isinstance(s, int) else str(s) for s in buf.shape)
        specs.append((shape, str(buf.dtype)))
    return specs


def check_gemm_epilogue(factory, *, shape=DEFAULT_SHAPE, dtype: str = "float16", arch: str | None = None,
                        verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, K, in_dtype)`` for ``C = GELU(A @ B + bias)``.

    Returns an :class:`ExerciseResult` (truthy when every check that could run passed) and, with
    ``verbose``, prints what was checked and what was not.
    """
    res = _check(factory, shape, dtype, arch)
    if verbose:
        print(res)
    return res


def _check(factory, shape, dtype, arch) -> ExerciseResult:
    M, N, K = shape
    res = ExerciseResult(ok=True, numerics_checked=False)

    def fail(msg):
        res.ok = False
        res.lines.append(f"[FAIL] {msg}")
        return res

    # 1. The factory and its signature.
    try:
        prim_func = factory(M, N, K, dtype)
    except Exception as exc:  # the reader's code: report, never crash the notebook
        return fail(f"calling factory({M}, {N}, {K}, {dtype!r}) raised {type(exc).__name__}: {exc}")
    if not hasattr(prim_func, "params") or not hasattr(prim_func, "buffer_map"):
        return fail(f"factory must return a T.prim_func, got {type(prim_func).__name__}")
    want = [((M, K), dtype), ((K, N), dtype), ((N,), dtype), ((M, N), dtype)]
    have = _param_specs(prim_func)
    if len(have) != 4:
        return fail(f"the kernel must take 4 tensors (A, B, Bias, C); it takes {len(have)}: {have}")
    for name, (wshape, wdtype), (hshape, hdtype) in zip(("A", "B", "Bias", "C"), want, have):
        if hshape != wshape or hdtype != wdtype:
            return fail(f"parameter {name} should be T.Tensor({wshape}, {wdtype!r}), got shape {hshape}, dtype {hdtype}")
    res.lines.append(f"[ok] signature: A{want[0][0]}, B{want[1][0]}, Bias{want[2][0]}, C{want[3][0]} in {dtype}")

    # 2. Compile.
    arch = arch or runtime.current_arch()
    try:
        kernel = runtime.compile_kernel(prim_func, arch=arch)
    except Exception as exc:
        first = str(exc).strip().splitlines()
        return fail(f"compilation for {arch} failed: {type(exc).__name__}: {first[0] if first else ''}")
    res.lines.append(f"[ok] compiled for {arch}")

    # 3. Run and compare (GPU only).
    if not runtime.mode().can_run:
        res.lines.append(f"[--] not run: {runtime.describe_mode()} The numbers were NOT checked.")
        return res
    import torch

    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, "cuda")
    b = checks.random_tensor((K, N), tdt, "cuda")
    bias = checks.random_tensor((N,), tdt, "cuda")
    out = checks.poisoned((M, N), tdt, "cuda")
    try:
        kernel(a, b, bias, out)
        torch.cuda.synchronize()
    except Exception as exc:
        return fail(f"launch failed: {type(exc).__name__}: {exc}")
    cmp = checks.compare(out, gemm_bias_gelu_reference(a, b, bias), tolerance=checks.TOLERANCE[dtype])
    res.numerics_checked = True
    if not cmp.ok:
        return fail(f"wrong result vs GELU(a @ b + bias) in fp32: {cmp}")
    res.lines.append(f"[ok] matches the fp32 reference: {cmp}")
    return res
