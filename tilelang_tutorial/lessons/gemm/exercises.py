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
   ``T.Parallel`` loop as the activation, before it. The checker's inputs put the pre-activation
   at magnitude about 1, where GELU curves and its approximations (``x * sigmoid(1.702 x)``, the
   ``tanh`` form) differ from it by more than fp16 rounding, and every output is compared within
   its own rounding (a max-abs test scaled per element), not by a norm over the whole output.

Hints come from what the output shows (negative outputs, an output that matches a known
approximation or a known mistake), not from a fixed list. Both checkers call your factory and check the parameters (names do not matter, shapes and dtypes
do), compile it for the current architecture (the first line of TileLang's or nvcc's error
reaches you), and run it on a ragged problem with a poisoned (NaN) output against a float32
torch reference: on the GPU where there is one, in the tile emulator on the CPU otherwise.
Solutions: ``solutions/transpose_b.py`` and ``solutions/bias_gelu.py`` in this lesson's folder.
"""
import math
import re

from ... import checks, runtime
from ...exercise_kit import ExerciseResult, _first_line, call_factory, compile_or_fail, kernel_source, param_specs, \
    quiet_tilelang

#: Small ragged problem: not a multiple of any tile, so the edge handling is exercised too.
DEFAULT_SHAPE = (300, 264, 200)


class GemmExerciseResult(ExerciseResult):
    """An :class:`ExerciseResult` whose passing verdict names every check that ran."""

    def __init__(self):
        super().__init__()
        self.ran: list = []

    def checked(self, what: str, msg: str) -> None:
        self.ran.append(what)
        self.passed(msg)

    @property
    def verdict(self) -> str:
        if self.ok and self.numerics_checked:
            return f"✔ PASSED: {', '.join(self.ran)} — each checked here"
        return super().verdict


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
    res.checked("signature", "signature: " + ", ".join(f"{n}{w[0]}" for n, w in zip(names, want)) + f" in {dtype}")
    return True


def _compile(res, program, arch):
    kernel = compile_or_fail(res, program, arch)
    if kernel is not None and res.lines[-1].startswith("✔"):
        res.ran.append(f"compiles for {arch}")
    return kernel


def _run(res, kernel, inputs) -> bool:
    """Run ``kernel(*inputs)`` where this machine can (GPU, else the emulator); report a failure."""
    from ... import emulate

    where = "the GPU" if runtime.mode().can_run else "the emulator (CPU)"
    try:
        with quiet_tilelang():
            runtime.run(kernel, *inputs)
        if runtime.mode().can_run:
            import torch

            torch.cuda.synchronize()
    except emulate.UnsupportedConstruct as exc:
        res.skipped(f"NOT CHECKED: the emulator cannot run this kernel ({exc}); correctness needs a GPU here")
        return False
    except emulate.EmulationError as exc:
        res.failed(f"running it in the emulator stopped: {exc}")
        return False
    except Exception as exc:  # the reader's kernel: report, never crash the notebook
        res.failed(f"running it on {where} failed: {type(exc).__name__}: {_first_line(exc)}")
        return False
    res.ran_on = where
    return True


def _inputs(shapes, dtype, scales=None):
    import torch

    dev = runtime.mode().device
    tdt = getattr(torch, dtype)
    return [checks.random_tensor(s, tdt, dev, scale=scale) for s, scale in zip(shapes, scales or [1.0] * len(shapes))]


def _unwritten_or_nan(res, out, cmp) -> bool:
    """Report never-written elements and NaNs the kernel wrote (they are different mistakes)."""
    if cmp.unwritten:
        res.failed(f"{cmp.unwritten} of {out.numel()} outputs were never written (still the poison NaN), ran in "
                   f"{res.ran_on}")
        res.hint("does the grid cover the ragged edge tiles (T.ceildiv), and does the last T.copy store the whole tile?")
        return True
    if cmp.nan:
        res.failed(f"{cmp.nan} of {out.numel()} outputs are NaN the kernel computed, ran in {res.ran_on}")
        res.hint("an accumulator that was never cleared (T.clear before the K loop) holds garbage: NaN in the emulator")
        return True
    return False


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


def _b_read_as_k_by_n(b_nk, K, N):
    """What a kernel computes with when it copies B's tiles as if B were stored (K, N): the (K, N)
    window at B's origin, zeros where that window leaves the (N, K) tensor (TMA's fill)."""
    import torch

    window = torch.zeros((K, N), dtype=torch.float32, device=b_nk.device)
    rows, cols = min(K, b_nk.shape[0]), min(N, b_nk.shape[1])
    window[:rows, :cols] = b_nk[:rows, :cols].float()
    return window


def _transposed_b_symptom(a, b_nk, out, tolerance) -> str:
    """What the output shows, measured: the ReLU missing, B read as (K, N), or other wrong products."""
    import torch

    M, K = a.shape
    N = b_nk.shape[0]
    lowest = float(out.float().min())
    if lowest < 0:
        return (f"there are negative outputs (as low as {lowest:.3g}): ReLU(x) is never negative, so the ReLU "
                "is missing from the epilogue — apply T.max(C_local[i, j], 0) before the store")
    as_k_by_n = torch.relu(a.float() @ _b_read_as_k_by_n(b_nk, K, N))
    if checks.compare(out, as_k_by_n, tolerance=tolerance).ok:
        return ("the output matches B read as if it were stored (K, N): copy each B tile from B[bx * block_N, "
                "ko * block_K] into a (block_N, block_K) shared tile and multiply with T.gemm(..., transpose_B=True)")
    return ("no negative outputs, so the ReLU is in place, but the products are wrong: check which element each "
            "B tile copy starts at (B is (N, K), so the tile for columns bx * block_N.. at step ko starts at "
            "B[bx * block_N, ko * block_K]) and that the shared tile is (block_N, block_K)")


def _check_transposed_b(factory, shape, dtype, arch) -> ExerciseResult:
    M, N, K = shape
    res = GemmExerciseResult()
    program = call_factory(res, factory, (M, N, K, dtype),
                           "write factory(M, N, K, in_dtype) returning a T.prim_func(A: (M, K), B: (N, K), C: (M, N))")
    if program is None:
        return res
    if not _signature(res, program, [((M, K), dtype), ((N, K), dtype), ((M, N), dtype)], ("A", "B", "C"), dtype):
        return res
    kernel = _compile(res, program, arch)
    if kernel is None:
        res.hint("a B tile copied as (block_N, block_K) is multiplied with T.gemm(..., transpose_B=True)")
        return res
    src = kernel_source(kernel)
    f = pipeline_facts(src, arch)
    want_tc = "wgmma" if arch == "sm_90a" else "mma.sync"
    if not src:
        res.skipped("the generated code was not read (nothing compiled here): tensor cores and pipeline unchecked")
    elif f["tensor_core"] != want_tc:
        return res.failed(f"T.gemm did not become {want_tc} for {arch}: the multiply is not on the tensor cores "
                          f"(keep T.gemm on shared-memory tiles; do not multiply in a T.Parallel loop)")
    else:
        res.checked(f"{want_tc} in the generated code", f"the multiply is {want_tc} on the tensor cores")
    if src and not f["pipelined"]:
        how = ("TMA loads on mbarriers (2 per stage)" if arch == "sm_90a" else "cp.async groups with cp_async_wait<n>, n > 0")
        return res.failed(f"the K loop is not software-pipelined (expected {how}; found {f['mbarriers']} mbarriers, "
                          f"cp_async_wait {f['cp_async_waits']}): write it as T.Pipelined(..., num_stages=3)")
    if src:
        res.checked("a pipelined K loop", "the K loop is software-pipelined" + (
            f" ({f['mbarriers']} mbarriers, TMA loads" + (", a producer warpgroup)" if f["warp_specialized"] else ")")
            if arch == "sm_90a" else f" (cp_async_wait {f['cp_async_waits']})"))
    a, b = _inputs([(M, K), (N, K)], dtype)
    out = checks.poisoned((M, N), a.dtype, a.device)
    if not _run(res, kernel, (a, b, out)):
        return res
    tolerance = checks.TOLERANCE[dtype]
    cmp = checks.compare(out, gemm_transposed_b_reference(a, b), tolerance=tolerance)
    if _unwritten_or_nan(res, out, cmp):
        return res
    what = f"ReLU(a @ b.T) in fp32 ({M}x{N}x{K}, ragged)"
    if not cmp.ok:
        return res.failed(f"wrong values against {what}, ran in {res.ran_on}: {cmp} — "
                          + _transposed_b_symptom(a, b, out, tolerance))
    res.numerics_checked = True
    res.checked(f"values in {res.ran_on}", f"matches {what} on fresh random inputs, ran in {res.ran_on}: {cmp}")
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 2: bias + GELU epilogue
# ------------------------------------------------------------------------------------------------

#: Rounding of one output element, relative (half a unit in the last place), and an absolute floor
#: for the fp32 accumulation of K products of inputs of magnitude about 1.
OUTPUT_ROUNDING = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
ABSOLUTE_FLOOR = 1e-5
SLACK = 1.5


def gelu_candidates(x):
    """The activations a reader might write instead of the exact GELU, applied to the exact
    pre-activation ``x`` (fp32): {name: (what it computes, the message that names it)}."""
    import torch

    erf_gelu = 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))
    return {
        "tanh": (0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                 "the output matches the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), not the exact "
                 "GELU: this exercise asks for 0.5 · x · (1 + T.erf(x / √2))"),
        "sigmoid": (x * torch.sigmoid(1.702 * x),
                    "the output matches x·σ(1.702·x), the sigmoid approximation of GELU, not the exact GELU: this "
                    "exercise asks for 0.5 · x · (1 + T.erf(x / √2))"),
        "relu": (torch.relu(x),
                 "the output matches ReLU(x): every negative pre-activation gave exactly 0, but GELU is slightly "
                 "negative there (down to -0.17 at x ≈ -0.75): apply 0.5 · x · (1 + T.erf(x / √2))"),
        "erf of x/2": (0.5 * x * (1 + torch.erf(x / 2)),
                       "the output matches 0.5·x·(1 + erf(x / 2)): divide by √2 (multiply by 0.7071...), not by 2"),
        "no 0.5": (2 * erf_gelu, "the output is twice the GELU: the factor 0.5 in 0.5 · x · (1 + erf(x / √2)) is missing"),
    }


def _epilogue_symptom(a, b, bias, out, within) -> str:
    """Name the mistake the output matches, or say where it is furthest from the exact GELU."""
    import torch

    product = a.float() @ b.float()
    x = product + bias.float()
    candidates = gelu_candidates(x)
    gelu = torch.nn.functional.gelu
    candidates["bias after"] = (gelu(product) + bias.float(),
                                "the output matches GELU(a @ b) + bias: the bias is added after the activation; add it "
                                "to the accumulator first, then apply GELU to the sum")
    candidates["no bias"] = (gelu(product), "the output matches GELU(a @ b) without the bias: Bias is never added "
                                            "(read Bias[bx * block_N + j] for column j of the tile)")
    scores = {name: within(out, value) for name, (value, _) in candidates.items()}
    best = min(scores, key=scores.get)
    exact = gelu(x)
    # a match: within the allowance, or far closer to the mistake than to the exact GELU (a GPU's
    # own tanh or exp may round differently from torch's)
    if scores[best] <= 1.0 or scores[best] * 8 < within(out, exact):
        return candidates[best][1]
    error = (out.float() - exact).abs()
    worst = int(error.argmax())
    return (f"furthest from the exact GELU at pre-activation x = {float(x.flatten()[worst]):.3g}: the kernel wrote "
            f"{float(out.float().flatten()[worst]):.4g}, GELU(x) = {float(exact.flatten()[worst]):.4g}; "
            + ("its outputs are never negative, but GELU is negative for every x < 0 (down to -0.17)"
               if float(out.float().min()) >= 0 else "check the formula 0.5 · x · (1 + erf(x / √2)) term by term"))


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
    res = GemmExerciseResult()
    program = call_factory(res, factory, (M, N, K, dtype),
                           "write factory(M, N, K, in_dtype) returning a T.prim_func(A, B, Bias, C)")
    if program is None:
        return res
    want = [((M, K), dtype), ((K, N), dtype), ((N,), dtype), ((M, N), dtype)]
    if not _signature(res, program, want, ("A", "B", "Bias", "C"), dtype):
        return res
    kernel = _compile(res, program, arch)
    if kernel is None:
        return res
    # Pre-activations of magnitude about 1 (standard deviation ~1.1), where GELU curves: A ~ N(0, 1),
    # B ~ N(0, 1/K) so that A @ B ~ N(0, 1), bias ~ N(0, 0.25).
    a, b, bias = _inputs([(M, K), (K, N), (N,)], dtype, scales=[1.0, 1.0 / math.sqrt(K), 0.5])
    out = checks.poisoned((M, N), a.dtype, a.device)
    if not _run(res, kernel, (a, b, bias, out)):
        return res
    reference = gemm_bias_gelu_reference(a, b, bias)
    cmp = checks.compare(out, reference, tolerance=checks.TOLERANCE[dtype])
    if _unwritten_or_nan(res, out, cmp):
        return res
    rounding = OUTPUT_ROUNDING[dtype]

    def within(output, expected):
        """The worst element's error in units of what that element may be off by (1 = at the limit)."""
        allowed = SLACK * (rounding * expected.abs() + ABSOLUTE_FLOOR)
        return float(((output.float() - expected).abs() / allowed).max())

    worst = within(out, reference)
    x = a.float() @ b.float() + bias.float()
    what = (f"the exact (erf) GELU(a @ b + bias) in fp32 ({M}x{N}x{K}, ragged; pre-activations in "
            f"[{float(x.min()):.1f}, {float(x.max()):.1f}]), every output within {SLACK} of its own {dtype} rounding "
            f"+ {ABSOLUTE_FLOOR:.0e}")
    if worst > 1.0:
        return res.failed(f"wrong values against {what}, ran in {res.ran_on}: max |out-ref| = {cmp.max_abs_error:.2e}, "
                          f"{worst:.0f}x the allowed error at the worst element — "
                          + _epilogue_symptom(a, b, bias, out, within))
    res.numerics_checked = True
    res.checked(f"every value in {res.ran_on} against the exact GELU",
                f"matches {what}, ran in {res.ran_on}: max |out-ref| = {cmp.max_abs_error:.2e}, worst element at "
                f"{worst:.2f} of its allowance")
    return res
