"""Notebook 02's exercises.

1. **A transposed B operand** (the layout of an ``nn.Linear`` weight): ``C = ReLU(A @ B^T)`` with
   B stored ``(N, K)``. Write ``factory(M, N, K, in_dtype)`` returning a ``T.prim_func`` with::

       A: T.Tensor((M, K), in_dtype)
       B: T.Tensor((N, K), in_dtype)
       C: T.Tensor((M, N), in_dtype)    # C = ReLU(A @ B^T)

   then ``check_gemm_transposed_b(factory)``. Besides the signature and the numbers (on the GPU,
   or in the emulator), the checker reads the generated code: the K loop must still be a software
   pipeline and, on Hopper, ``T.gemm`` must still become ``wgmma`` (on Ampere ``mma.sync``) --
   transposing B must not cost the tensor cores. Hint: three things change -- B's shape, the corner of the B tile a block
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
do), compile it for the current architecture (the first line of TileLang's or nvcc's error
reaches you), and run it on a ragged problem with a poisoned (NaN) output against a float32
torch reference: on the GPU where there is one, in the tile emulator on the CPU otherwise.
Solutions: ``solutions/transpose_b.py`` and ``solutions/bias_gelu.py`` in this lesson's folder.
"""
import re

from ... import checks, runtime
from ...exercise_kit import ExerciseResult, call_factory, compile_or_fail, kernel_source, param_specs, run_and_compare

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
        wanted = ", ".join(f"{n} {shape}" for n, (shape, _) in zip(names, want))
        res.failed(f"the kernel must take {len(want)} tensors, in this order: {wanted}; yours takes {len(have)}: "
                   + ", ".join(str(shape) for shape, _ in have))
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


def _inputs(shapes, dtype):
    import torch

    dev = runtime.mode().device
    tdt = getattr(torch, dtype)
    return [checks.random_tensor(s, tdt, dev) for s in shapes]


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
        res.hint("a B tile copied as (block_N, block_K) is multiplied with T.gemm(..., transpose_B=True)")
        return res
    src = kernel_source(kernel)
    f = pipeline_facts(src, arch)
    want_tc = "wgmma" if arch == "sm_90a" else "mma.sync"
    if not src:
        pass
    elif f["tensor_core"] != want_tc:
        return res.failed(f"T.gemm did not become {want_tc} for {arch}: the multiply is not on the tensor cores "
                          f"(keep T.gemm on shared-memory tiles; do not multiply in a T.Parallel loop)")
    else:
        res.passed(f"the multiply is {want_tc} on the tensor cores")
    if src and not f["pipelined"]:
        how = ("TMA loads on mbarriers (2 per stage)" if arch == "sm_90a" else "cp.async groups with cp_async_wait<n>, n > 0")
        return res.failed(f"the K loop is not software-pipelined (expected {how}; found {f['mbarriers']} mbarriers, "
                          f"cp_async_wait {f['cp_async_waits']}): write it as T.Pipelined(..., num_stages=3)")
    if src:
        res.passed("the K loop is software-pipelined" + (f" ({f['mbarriers']} mbarriers, TMA loads"
                   + (", a producer warpgroup)" if f["warp_specialized"] else ")") if arch == "sm_90a" else
                   f" (cp_async_wait {f['cp_async_waits']})"))
    a, b = _inputs([(M, K), (N, K)], dtype)
    out = checks.poisoned((M, N), a.dtype, a.device)
    return run_and_compare(res, kernel, (a, b, out), gemm_transposed_b_reference(a, b),
                           tolerance=checks.TOLERANCE[dtype], what=f"ReLU(a @ b.T) in fp32 ({M}x{N}x{K}, ragged)",
                           hint_unwritten="does the grid cover the ragged edge tiles?",
                           hint_wrong="which corner of B does a block copy? B is (N, K): the tile at "
                                      "(n0, k0) is B[bx * block_N, ko * block_K]")


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
    a, b, bias = _inputs([(M, K), (K, N), (N,)], dtype)
    out = checks.poisoned((M, N), a.dtype, a.device)
    return run_and_compare(res, kernel, (a, b, bias, out), gemm_bias_gelu_reference(a, b, bias),
                           tolerance=checks.TOLERANCE[dtype], what=f"GELU(a @ b + bias) in fp32 ({M}x{N}x{K}, ragged)",
                           hint_unwritten="does the grid cover the ragged edge tiles?",
                           hint_wrong="the bias is added to the accumulator first, then the exact GELU "
                                      "0.5 x (1 + erf(x / sqrt(2))) is applied to the sum")
