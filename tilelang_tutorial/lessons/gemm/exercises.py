"""Notebook 02's exercises.

1. **A transposed B operand** (the layout of an ``nn.Linear`` weight): ``C = ReLU(A @ B^T)`` with
   B stored ``(N, K)``. Write ``factory(M, N, K, in_dtype)`` returning a ``T.prim_func`` with::

       A: T.Tensor((M, K), in_dtype)
       B: T.Tensor((N, K), in_dtype)
       C: T.Tensor((M, N), in_dtype)    # C = ReLU(A @ B^T)

   then ``check_gemm_transposed_b(factory)``. Besides the signature and the numbers (GPU), the
   checker reads the generated code: the K loop must still be a software pipeline and, on Hopper,
   ``T.gemm`` must still become ``wgmma`` (on Ampere ``mma.sync``) -- transposing B must not cost
   the tensor cores. Hint: three things change -- B's shape, the corner of the B tile a block
   copies, and one keyword of ``T.gemm``.

2. **A bias + GELU epilogue**: ``C = GELU(A @ B + bias)``. Write ``factory(M, N, K, in_dtype)``
   returning a ``T.prim_func`` with parameters, in this order::

       A:    T.Tensor((M, K), in_dtype)
       B:    T.Tensor((K, N), in_dtype)
       Bias: T.Tensor((N,), in_dtype)
       C:    T.Tensor((M, N), in_dtype)      # C = GELU(A @ B + Bias), exact (erf) GELU

   then ``check_gemm_epilogue(factory)``. Hint: the exact GELU is
   ``0.5 * x * (1 + erf(x / sqrt(2)))``; ``T.erf`` exists. Add the bias inside the same
   ``T.Parallel`` loop as the activation, before it.

Both checkers call your factory and check the parameters (names do not matter, shapes and dtypes
do), compile it for the current architecture (TileLang's and nvcc's errors reach you), and on a
GPU run it on a ragged problem with a poisoned (NaN) output against a float32 torch reference;
on a CPU-only machine they say plainly that the numbers were *not* checked.
Solutions: ``tilelang_tutorial/solutions/gemm_transpose_b.py`` and ``solutions/gemm_bias_gelu.py``.
"""
import re

from ... import checks, runtime
from ...exercise_kit import ExerciseResult, call_factory, can_launch, compile_or_fail, param_specs, skip_numerics

#: Small ragged problem: not a multiple of any tile, so the edge handling is exercised too.
DEFAULT_SHAPE = (300, 264, 200)


def gemm_bias_gelu_reference(a, b, bias):
    """GELU(a @ b + bias), exact GELU, in float32."""
    import torch

    x = a.float() @ b.float() + bias.float()
    return torch.nn.functional.gelu(x)


def gemm_transposed_b_reference(a, b_nk):
    """ReLU(a @ b_nk^T) in float32."""
    import torch

    return torch.relu(a.float() @ b_nk.float().t())


def _signature(res, program, want, names, dtype) -> bool:
    have = param_specs(program)
    if len(have) != len(want):
        res.failed(f"the kernel must take {len(want)} tensors ({', '.join(names)}); it takes {len(have)}: {have}")
        return False
    for name, (wshape, wdtype), (hshape, hdtype) in zip(names, want, have):
        if hshape != wshape or hdtype != wdtype:
            hint = ""
            if name == "B" and hshape == tuple(reversed(wshape)):
                hint = " — that is the untransposed layout; an nn.Linear weight is stored (N, K)"
            res.failed(f"parameter {name} should be T.Tensor({wshape}, {wdtype!r}), got shape {hshape}, dtype {hdtype}{hint}")
            return False
    res.passed("signature: " + ", ".join(f"{n}{w[0]}" for n, w in zip(names, want)) + f" in {dtype}")
    return True


def _run(res, kernel, args, out, ref, dtype, what):
    import torch

    try:
        kernel(*args, out)
        torch.cuda.synchronize()
    except Exception as exc:
        return res.failed(f"launch failed: {type(exc).__name__}: {exc}")
    cmp = checks.compare(out, ref, tolerance=checks.TOLERANCE[dtype])
    res.numerics_checked = True
    if cmp.unwritten:
        return res.failed(f"{cmp.unwritten} elements of C were never written (still NaN): does the grid cover "
                          f"the ragged edge tiles?")
    if not cmp.ok:
        return res.failed(f"wrong result vs {what} in fp32: {cmp}")
    res.passed(f"matches the fp32 reference {what}: {cmp}")
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 1: transposed B
# ------------------------------------------------------------------------------------------------

def pipeline_facts(src: str, arch: str) -> dict:
    """What the generated CUDA says about the K loop's pipeline and the tensor-core instruction."""
    hopper = arch == "sm_90a"
    mbarriers = len(re.findall(r"mbarrier\[\d+\]\.init", src))
    waits = [int(n) for n in re.findall(r"cp_async_wait<(\d+)>", src)]
    return {
        "tensor_core": ("wgmma" if re.search(r"wgmma_", src) else None) if hopper else
                       ("mma.sync" if re.search(r"mma_sync<|wgmma_", src) else None),
        "pipelined": (mbarriers >= 4 and "tma_load" in src) if hopper else any(n > 0 for n in waits),
        "warp_specialized": "warpgroup_reg_dealloc" in src,
        "mbarriers": mbarriers,
        "cp_async_waits": sorted(set(waits)),
    }


def check_gemm_transposed_b(factory, *, shape=DEFAULT_SHAPE, dtype: str = "float16", arch: str | None = None,
                            verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, K, in_dtype)`` for ``C = ReLU(A @ B^T)``, B of shape (N, K)."""
    res = _check_transposed_b(factory, tuple(shape), dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_transposed_b(factory, shape, dtype, arch) -> ExerciseResult:
    M, N, K = shape
    res = ExerciseResult()
    program = call_factory(res, factory, (M, N, K, dtype),
                           "write factory(M, N, K, in_dtype) returning a T.prim_func(A: (M, K), B: (N, K), C: (M, N))")
    if program is None:
        return res
    if not _signature(res, program, [((M, K), dtype), ((N, K), dtype), ((M, N), dtype)], ("A", "B", "C"), dtype):
        return res
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        res.lines.append("   hint: a B tile copied as (block_N, block_K) is multiplied with T.gemm(..., transpose_B=True)")
        return res
    f = pipeline_facts(kernel.get_kernel_source(), arch)
    want_tc = "wgmma" if arch == "sm_90a" else "mma.sync"
    if f["tensor_core"] != want_tc:
        return res.failed(f"T.gemm did not become {want_tc} for {arch}: the multiply is not on the tensor cores "
                          f"(keep T.gemm on shared-memory tiles; do not multiply in a T.Parallel loop)")
    res.passed(f"the multiply is {want_tc} on the tensor cores")
    if not f["pipelined"]:
        how = ("TMA loads on mbarriers (2 per stage)" if arch == "sm_90a" else "cp.async groups with cp_async_wait<n>, n > 0")
        return res.failed(f"the K loop is not software-pipelined (expected {how}; found {f['mbarriers']} mbarriers, "
                          f"cp_async_wait {f['cp_async_waits']}): write it as T.Pipelined(..., num_stages=3)")
    res.passed("the K loop is software-pipelined" + (f" ({f['mbarriers']} mbarriers, TMA loads"
               + (", a producer warpgroup)" if f["warp_specialized"] else ")") if arch == "sm_90a" else
               f" (cp_async_wait {f['cp_async_waits']})"))
    if not can_launch(arch):
        return skip_numerics(res, f"the numerical check ({M}x{N}x{K}, ragged, poisoned output)", arch)
    import torch

    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, "cuda")
    b = checks.random_tensor((N, K), tdt, "cuda")
    out = checks.poisoned((M, N), tdt, "cuda")
    return _run(res, kernel, (a, b), out, gemm_transposed_b_reference(a, b), dtype, "ReLU(a @ b.T)")


# ------------------------------------------------------------------------------------------------
# Exercise 2: bias + GELU epilogue
# ------------------------------------------------------------------------------------------------

def check_gemm_epilogue(factory, *, shape=DEFAULT_SHAPE, dtype: str = "float16", arch: str | None = None,
                        verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, K, in_dtype)`` for ``C = GELU(A @ B + bias)``.

    Returns an :class:`ExerciseResult` (truthy when every check that could run passed) and, with
    ``verbose``, prints what was checked and what was not.
    """
    res = _check_epilogue(factory, tuple(shape), dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_epilogue(factory, shape, dtype, arch) -> ExerciseResult:
    M, N, K = shape
    res = ExerciseResult()
    program = call_factory(res, factory, (M, N, K, dtype),
                           "write factory(M, N, K, in_dtype) returning a T.prim_func(A, B, Bias, C)")
    if program is None:
        return res
    want = [((M, K), dtype), ((K, N), dtype), ((N,), dtype), ((M, N), dtype)]
    if not _signature(res, program, want, ("A", "B", "Bias", "C"), dtype):
        return res
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel.get_kernel_source()
    if "erf" not in src:
        res.skipped("no erf in the generated CUDA: the exact GELU uses erf (a tanh approximation will miss the tolerance)")
    if not can_launch(arch):
        return skip_numerics(res, f"the numerical check ({M}x{N}x{K}, ragged, poisoned output)", arch)
    import torch

    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, "cuda")
    b = checks.random_tensor((K, N), tdt, "cuda")
    bias = checks.random_tensor((N,), tdt, "cuda")
    out = checks.poisoned((M, N), tdt, "cuda")
    return _run(res, kernel, (a, b, bias), out, gemm_bias_gelu_reference(a, b, bias), dtype, "GELU(a @ b + bias)")
