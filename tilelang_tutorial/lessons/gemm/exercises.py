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
reaches you), and run it on two problems whose M, N and K are each a multiple of no block
(:data:`RAGGED_PROBLEMS`: a grid with swapped extents, a floor division or a K loop that drops
the partial last step fails there) with a poisoned (NaN) output against a float32 torch
reference: on the GPU where there is one, in the tile emulator on the CPU otherwise.
Solutions: ``solutions/transpose_b.py`` and ``solutions/bias_gelu.py`` in this lesson's folder.

Notebook 02b's exercises:

3. **Split-K with atomics**: ``factory(M, N, K, split, in_dtype)`` returning ``T.prim_func(A: (M, K),
   B: (K, N), C: (M, N) float32)``, ``C = A @ B`` with grid z over the slices of K and each slice's
   tile added into a zeroed C with ``T.atomic_add``; ``check_gemm_split_k_atomic(factory)`` runs a
   ragged 72 x 264 x 680 problem split 3 ways and names what the output equals (one slice's
   partial, split x slice 0, K's tail missing, per-slice ReLUs, rows no block reached), then reads
   ``blockIdx.z`` and the atomics from the generated code. On a GPU it also runs the program in
   the emulator, where a never-cleared accumulator shows as NaN. Solution ``solutions/split_k_atomic.py``.
4. **A tile for a T4**: a ``GemmConfig`` with the seed's 128 x 128 tile, 128 threads and three
   stages and the largest ``block_K`` that fits 64 KiB; ``check_t4_tile(config)`` counts the shared
   memory before compiling, compiles for sm_75 and reads TileLang's launch size, runs it (on a T4,
   else in the emulator) and marks the speed on a T4 ○. Solution ``solutions/t4_tile.py``.
"""
import math
import re

from ... import checks, runtime
from ...exercise_kit import ExerciseResult, _first_line, call_factory, compile_or_fail, kernel_source, param_specs, run_kernel, \
    quiet_tilelang

#: The problems exercises 1 and 2 run: (M, N) are :data:`checks.RAGGED_SHAPES` (partial last tiles
#: for every block size; their tile counts differ between M and N, in the first for every square
#: block, so swapped grid extents or block indices leave tiles unwritten), each with a K that is a
#: multiple of no block either (a loop of ``K // block_K`` steps drops K's partial last step).
#: Most wrong kernels fail on the first, after one compile.
RAGGED_PROBLEMS = ((*checks.RAGGED_SHAPES[1], 200), (*checks.RAGGED_SHAPES[0], 264))


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


def _inputs(shapes, dtype, scales=None):
    import torch

    dev = runtime.mode().device
    tdt = getattr(torch, dtype)
    return [checks.random_tensor(s, tdt, dev, scale=scale) for s, scale in zip(shapes, scales or [1.0] * len(shapes))]


def _unwritten_hint(out) -> str:
    """Which part of C no block wrote, and the grid's mistake that leaves exactly that part out."""
    unwritten = checks.poison_mask(out)
    M, N = out.shape
    if bool(unwritten.all()):
        return ("no output was written: does the grid launch any blocks (M // block_M is 0 where M < block_M: "
                "T.ceildiv), and does the last T.copy store C?")
    grid = ("T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by): the first extent is how many bx "
            "there are, and bx walks N's tiles (C's columns); the second counts by, which walks M's tiles (C's rows)")
    found = []
    for what, full, size, dim in (("columns", unwritten.all(dim=0), N, "N"), ("rows", unwritten.all(dim=1), M, "M")):
        first = int(full.int().argmax()) if bool(full.any()) else None
        if first is not None and bool(full[first:].all()):      # a run of whole rows or columns up to the edge
            found.append(f"{what} {first}..{size - 1} of C were never written: too few blocks along {dim}")
    if found:
        return "; ".join(found) + f". The grid is {grid}; swapped extents or a floor division leave the last tiles out"
    return "does the grid cover the ragged edge tiles (T.ceildiv), and does the last T.copy store the whole tile?"


def _unwritten_or_nan(res, out, cmp, problem: str = "") -> bool:
    """Report never-written elements and NaNs the kernel wrote (they are different mistakes)."""
    at = f" at {problem}" if problem else ""
    if cmp.unwritten:
        res.failed(f"{cmp.unwritten} of {out.numel()} outputs{at} were never written (still the poison NaN), ran in "
                   f"{res.ran_on}")
        res.hint(_unwritten_hint(out))
        return True
    if cmp.nan:
        res.failed(f"{cmp.nan} of {out.numel()} outputs{at} are NaN the kernel computed, ran in {res.ran_on}")
        res.hint("an accumulator that was never cleared (T.clear before the K loop) holds garbage: NaN in the emulator")
        return True
    return False


#: Rounding of one output element, relative (half a unit in the last place), and an absolute floor
#: for the fp32 accumulation of K products of inputs of magnitude about 1.
OUTPUT_ROUNDING = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
ABSOLUTE_FLOOR = 1e-5
SLACK = 1.5


def _within(output, expected, dtype) -> float:
    """The worst element's error in units of what that element may be off by (1 = at the limit):
    :data:`SLACK` times its own rounding in ``dtype`` plus :data:`ABSOLUTE_FLOOR`."""
    allowed = SLACK * (OUTPUT_ROUNDING[dtype] * expected.abs() + ABSOLUTE_FLOOR)
    return float(((output.float() - expected).abs() / allowed).max())


def _name(problem) -> str:
    return "x".join(map(str, problem))


def _build(res, factory, problems, dtype, arch, want, names, what):
    """The reader's factory called, its signature checked and compiled for each problem:
    ``[(problem, kernel)]``, or None with the failure on ``res``. The first problem's checks are
    reported; another problem's only where one fails (named by its shape)."""
    built = []
    for i, problem in enumerate(problems):
        step = res if i == 0 else GemmExerciseResult()
        program = call_factory(step, factory, (*problem, dtype), what)
        kernel = None
        if program is not None and _signature(step, program, want(*problem), names, dtype):
            kernel = _compile(step, program, arch)
        if kernel is None:
            if i:
                res.ok = False
                res.lines += [f"{line} (at {_name(problem)})" if line.startswith("✘") else line
                              for line in step.lines if not line.startswith(("✔", "○"))]
            return None
        built.append((problem, kernel))
    return built


def _k_cut(K, value_of):
    """``(kept, value_of(kept))`` for each length ``K // block_K * block_K`` short of K (block_K in
    :data:`checks.BLOCK_SIZES`): what a K loop of ``K // block_K`` full steps computes."""
    for kept in sorted({K // block_K * block_K for block_K in checks.BLOCK_SIZES} - {0, K}, reverse=True):
        yield kept, value_of(kept)


def _k_cut_message(K, kept) -> str:
    return (f"the output matches a K cut to its first {kept} of {K} columns, a whole number of block_K steps: a loop "
            "of K // block_K steps drops K's partial last step — loop over T.ceildiv(K, block_K) steps (the copies "
            "fill the part past K with zeros)")


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


def check_gemm_transposed_b(factory, *, problems=RAGGED_PROBLEMS, dtype: str = "float16", arch: str | None = None,
                            verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, K, in_dtype)`` for ``C = ReLU(A @ B^T)``, B of shape (N, K),
    on each of ``problems`` ((M, N, K) each)."""
    res = _check_transposed_b(factory, tuple(map(tuple, problems)), dtype, arch or runtime.current_arch())
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
    for kept, value in _k_cut(K, lambda k: torch.relu(a[:, :k].float() @ b_nk[:, :k].float().t())):
        if checks.compare(out, value, tolerance=tolerance).ok:
            return _k_cut_message(K, kept)
    return ("no negative outputs, so the ReLU is in place, but the products are wrong: check which element each "
            "B tile copy starts at (B is (N, K), so the tile for columns bx * block_N.. at step ko starts at "
            "B[bx * block_N, ko * block_K]) and that the shared tile is (block_N, block_K)")


def _check_transposed_b(factory, problems, dtype, arch) -> ExerciseResult:
    res = GemmExerciseResult()
    built = _build(res, factory, problems, dtype, arch,
                   lambda M, N, K: [((M, K), dtype), ((N, K), dtype), ((M, N), dtype)], ("A", "B", "C"),
                   "write factory(M, N, K, in_dtype) returning a T.prim_func(A: (M, K), B: (N, K), C: (M, N))")
    if built is None:
        if res.lines[-1].startswith("✘ compiling"):
            res.hint("a B tile copied as (block_N, block_K) is multiplied with T.gemm(..., transpose_B=True)")
        return res
    src = kernel_source(built[0][1])
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
    tolerance = checks.TOLERANCE[dtype]
    worst = None
    for (M, N, K), kernel in built:
        # A ~ N(0, 1), B ~ N(0, 1/K): outputs of magnitude about 1, each checked within its own rounding
        a, b = _inputs([(M, K), (N, K)], dtype, scales=[1.0, 1.0 / math.sqrt(K)])
        out = checks.poisoned((M, N), a.dtype, a.device)
        if not run_kernel(res, kernel, a, b, out, label=_name((M, N, K))):
            return res
        cmp = checks.compare(out, gemm_transposed_b_reference(a, b), tolerance=tolerance)
        if _unwritten_or_nan(res, out, cmp, _name((M, N, K))):
            return res
        if not cmp.ok:
            return res.failed(f"wrong values against ReLU(a @ b.T) in fp32 at {_name((M, N, K))}, ran in {res.ran_on}: "
                              f"{cmp} — " + _transposed_b_symptom(a, b, out, tolerance))
        here = _within(out, gemm_transposed_b_reference(a, b), dtype)
        if here > 1.0:
            return res.failed(f"close to ReLU(a @ b.T) in fp32 at {_name((M, N, K))} ({cmp.rel_error:.1e} off in norm), "
                              f"but not every output is within its own {dtype} rounding: {here:.0f}x the allowance "
                              f"({SLACK} x rounding + {ABSOLUTE_FLOOR:.0e}) at the worst, ran in {res.ran_on} — the "
                              "products are summed in fewer bits than fp32: keep the accumulator "
                              "T.alloc_fragment((block_M, block_N), \"float32\") and cast only when C is stored")
        worst = cmp if worst is None or cmp.rel_error > worst.rel_error else worst
    res.numerics_checked = True
    res.checked(f"values in {res.ran_on}",
                f"matches ReLU(a @ b.T) in fp32 at {' and '.join(map(_name, problems))} (M, N and K each a multiple "
                f"of no block), every output within {SLACK} x its own {dtype} rounding + {ABSOLUTE_FLOOR:.0e}, fresh "
                f"random inputs, ran in {res.ran_on}; the worst in norm: {worst}")
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 2: bias + GELU epilogue
# ------------------------------------------------------------------------------------------------

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
    K = a.shape[1]
    for kept, value in _k_cut(K, lambda k: gelu(a[:, :k].float() @ b[:k].float() + bias.float())):
        candidates[f"K cut to {kept}"] = (value, _k_cut_message(K, kept))
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


def check_gemm_epilogue(factory, *, problems=RAGGED_PROBLEMS, dtype: str = "float16", arch: str | None = None,
                        verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, K, in_dtype)`` for ``C = GELU(A @ B + bias)`` on each of
    ``problems`` ((M, N, K) each).

    Returns an :class:`ExerciseResult` (truthy when every check that could run passed) and, with
    ``verbose``, prints what was checked and what was not.
    """
    res = _check_epilogue(factory, tuple(map(tuple, problems)), dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_epilogue(factory, problems, dtype, arch) -> ExerciseResult:
    res = GemmExerciseResult()
    built = _build(res, factory, problems, dtype, arch,
                   lambda M, N, K: [((M, K), dtype), ((K, N), dtype), ((N,), dtype), ((M, N), dtype)],
                   ("A", "B", "Bias", "C"), "write factory(M, N, K, in_dtype) returning a T.prim_func(A, B, Bias, C)")
    if built is None:
        return res
    def within(output, expected):
        return _within(output, expected, dtype)

    worst, lowest, highest, largest = 0.0, 0.0, 0.0, 0.0
    for (M, N, K), kernel in built:
        # Pre-activations of magnitude about 1 (standard deviation ~1.1), where GELU curves: A ~ N(0, 1),
        # B ~ N(0, 1/K) so that A @ B ~ N(0, 1), bias ~ N(0, 0.25).
        a, b, bias = _inputs([(M, K), (K, N), (N,)], dtype, scales=[1.0, 1.0 / math.sqrt(K), 0.5])
        out = checks.poisoned((M, N), a.dtype, a.device)
        if not run_kernel(res, kernel, a, b, bias, out, label=_name((M, N, K))):
            return res
        reference = gemm_bias_gelu_reference(a, b, bias)
        cmp = checks.compare(out, reference, tolerance=checks.TOLERANCE[dtype])
        if _unwritten_or_nan(res, out, cmp, _name((M, N, K))):
            return res
        here = within(out, reference)
        if here > 1.0:
            return res.failed(f"wrong values against the exact (erf) GELU(a @ b + bias) in fp32 at {_name((M, N, K))}, "
                              f"ran in {res.ran_on}: max |out-ref| = {cmp.max_abs_error:.2e}, {here:.0f}x the allowed "
                              f"error (every output within {SLACK} of its own {dtype} rounding + {ABSOLUTE_FLOOR:.0e}) "
                              "at the worst element — " + _epilogue_symptom(a, b, bias, out, within))
        x = a.float() @ b.float() + bias.float()
        worst, largest = max(worst, here), max(largest, cmp.max_abs_error)
        lowest, highest = min(lowest, float(x.min())), max(highest, float(x.max()))
    res.numerics_checked = True
    res.checked(f"every value in {res.ran_on} against the exact GELU",
                f"matches the exact (erf) GELU(a @ b + bias) in fp32 at {' and '.join(map(_name, problems))} (M, N and "
                f"K each a multiple of no block; pre-activations in [{lowest:.1f}, {highest:.1f}]), ran in "
                f"{res.ran_on}: every output within {SLACK} of its own {dtype} rounding + {ABSOLUTE_FLOOR:.0e}, max "
                f"|out-ref| = {largest:.2e}, the worst element at {worst:.2f} of its allowance")
    return res


# ------------------------------------------------------------------------------------------------
# Notebook 02b, exercise 1: split-K with atomics
# ------------------------------------------------------------------------------------------------

#: M, N, K and the split: M and N end in partial tiles of 64 x 128 (2 row tiles, 3 column tiles:
#: swapped grid extents leave tiles out), and K = 680 is 10.6 steps of 64, so 11 steps split 3
#: ways give slices of 4, 4 and 3 steps (the last one reads past K) -- a slice count that rounds
#: down drops 104 columns of K, one that ignores ``bz`` repeats slice 0.
SPLIT_K_SHAPE = (72, 264, 680, 3)
SPLIT_K_BLOCK_K = 64
SPLIT_K_TOLERANCE = 1e-5         # fp32 accumulation of fp16 products: only the summation order differs


def split_k_slices(a, b, split, block_K=SPLIT_K_BLOCK_K):
    """The fp32 partial products ``A[:, Ks] @ B[Ks, :]`` of each slice Ks of K, as the spec cuts
    them: ``ceil(ceil(K / block_K) / split)`` steps of ``block_K`` per slice."""
    K = a.shape[1]
    steps = -(-K // block_K)
    per_split = -(-steps // split)
    return [a[:, s * per_split * block_K:(s + 1) * per_split * block_K].float()
            @ b[s * per_split * block_K:(s + 1) * per_split * block_K, :].float() for s in range(split)]


def _split_k_symptom(a, b, out, split) -> str:
    """Name what the output equals (a known mistake), measured on the same inputs, or say where
    it is wrong."""
    import torch

    tol = SPLIT_K_TOLERANCE
    K = a.shape[1]
    ref = a.float() @ b.float()
    slices = split_k_slices(a, b, split)

    def equals(value):
        return checks.compare(out, value, tolerance=tol * 10).ok

    # each element equal to one slice's partial (on a GPU the last store to land wins, element by element)
    stacked = torch.stack(slices)
    nearest = (stacked - out.float()).abs().argmin(dim=0, keepdim=True)
    closest = stacked.gather(0, nearest)[0]
    if equals(closest):
        counts = torch.bincount(nearest.flatten(), minlength=split)
        whose = [s for s in range(split) if int(counts[s]) * 20 > out.numel()]
        return (f"each output equals one slice's partial product alone (slice {', '.join(map(str, whose))}): each "
                "slice's block overwrote C instead of adding to it (T.copy stores; T.atomic_add(C[by * block_M, "
                "bx * block_N], acc) adds the tile)")
    if equals(split * slices[0]):
        return (f"the output is {split} x slice 0's partial product: every slice read the same part of K — the K "
                "offset of both copies must include bz: (bz * steps_per_split + ko) * block_K")
    steps = -(-K // SPLIT_K_BLOCK_K)
    covered = split * (steps // split) * SPLIT_K_BLOCK_K
    if covered < K and equals(a[:, :covered].float() @ b[:covered, :].float()):
        return (f"columns {covered}..{K - 1} of K were never added: steps_per_split = {steps} // {split} = "
                f"{steps // split} rounds down, so {split} slices cover only {covered} of K's {K} columns — round up "
                f"(-(-{steps} // {split}) = {-(-steps // split)}; the last slice reads zeros past K)")
    if equals(sum(torch.relu(p) for p in slices)):
        return ("the output is the sum of each slice's ReLU: this C has no activation (ReLU of a sum is not the sum "
                "of the slices' ReLUs, which is why a split GEMM applies it only after the reduction)")
    if equals(torch.relu(ref)):
        return "the output is ReLU(A @ B): this exercise's C is A @ B with no activation"
    zero = (out.float() == 0) & (ref != 0)
    if zero.any():
        rows = torch.nonzero(zero.all(dim=1)).flatten().tolist()
        cols = torch.nonzero(zero.all(dim=0)).flatten().tolist()
        where = (f"rows {rows[0]}..{rows[-1]}" if rows else f"columns {cols[0]}..{cols[-1]}" if cols
                 else f"{int(zero.sum())} elements")
        return (f"{where} of C are still 0: no block ever added to them — does the grid cover the ragged edge tiles "
                "(T.ceildiv(M, block_M), T.ceildiv(N, block_N)), and does the atomic add the whole tile?")
    err = (out.float() - ref).abs()
    worst = int(err.argmax())
    row, col = divmod(worst, ref.shape[1])
    return (f"the largest error is at row {row}, column {col} (wrote {float(out.flatten()[worst]):.4g}, A @ B = "
            f"{float(ref.flatten()[worst]):.4g}): compare the K offset of each copy with the slice bz should read")


def check_gemm_split_k_atomic(factory, *, shape=SPLIT_K_SHAPE, dtype: str = "float16", arch: str | None = None,
                              verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, K, split, in_dtype)`` for ``C = A @ B`` in fp32, K split
    ``split`` ways over grid z, each slice adding its partial tile into a zeroed C with atomics."""
    res = _check_split_k_atomic(factory, tuple(shape), dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_split_k_atomic(factory, shape, dtype, arch) -> ExerciseResult:
    import torch

    M, N, K, split = shape
    res = GemmExerciseResult()
    program = call_factory(res, factory, (M, N, K, split, dtype),
                           "write factory(M, N, K, split, in_dtype) returning a T.prim_func(A: (M, K), B: (K, N), "
                           "C: (M, N) float32)")
    if program is None:
        return res
    if not _signature(res, program, [((M, K), dtype), ((K, N), dtype), ((M, N), "float32")], ("A", "B", "C"), dtype):
        return res
    kernel = _compile(res, program, arch)
    if kernel is None:
        return res
    a, b = _inputs([(M, K), (K, N)], dtype)
    out = torch.zeros((M, N), dtype=torch.float32, device=a.device)     # the spec: C arrives zeroed
    if not run_kernel(res, kernel, a, b, out):
        return res
    nan = int(torch.isnan(out).sum())
    if nan:
        res.failed(f"{nan} of {out.numel()} outputs are NaN, ran in {res.ran_on} (C started at 0)")
        res.hint("an accumulator that was never cleared (T.clear(acc) before the K loop) holds garbage: NaN in the "
                 "emulator, and the atomic adds it into C")
        return res
    if res.ran_on == "the GPU":
        # A register never written can read as 0 on a GPU, so a missing T.clear may pass there; the
        # emulator fills such a fragment with NaN: run the program there too (CPU, a few ms).
        from ... import emulate

        shadow = torch.zeros((M, N), dtype=torch.float32)
        try:
            with quiet_tilelang():
                emulate.run(program, a.cpu(), b.cpu(), shadow)
        except Exception:       # an emulator limit: the GPU's result stands on its own
            shadow = None
        if shadow is not None and bool(torch.isnan(shadow).any()):
            res.failed("the GPU's output may look right, but in the emulator, which fills a register never written "
                       "with NaN, the output is NaN")
            res.hint("an accumulator that was never cleared (T.clear(acc) before the K loop) holds whatever the "
                     "registers held; the atomic adds it into C")
            return res
    reference = a.float() @ b.float()
    cmp = checks.compare(out, reference, tolerance=SPLIT_K_TOLERANCE)
    what = f"a @ b in fp32 ({M}x{N}x{K}, ragged, K split {split} ways)"
    if not cmp.ok:
        return res.failed(f"wrong values against {what}, ran in {res.ran_on}: {cmp} — "
                          + _split_k_symptom(a, b, out, split))
    res.numerics_checked = True
    res.checked(f"values in {res.ran_on}", f"matches {what} on fresh random inputs, ran in {res.ran_on}: {cmp}")
    src = kernel_source(kernel)
    if not src:
        res.skipped("the generated code was not read (nothing compiled here): whether the grid has a split "
                    "dimension and the tiles are added with atomics is unchecked (compiling with nvcc would show it)")
        return res
    if "blockIdx.z" not in src:
        return res.failed("the numbers are right, but the generated kernel never reads blockIdx.z: the grid has no "
                          f"third dimension, so one block sums all of K for its tile — launch T.Kernel(..., {split}, "
                          "threads=...) as (bx, by, bz) and give slice bz its part of K")
    if not re.search(r"atomicAdd|AtomicAdd", src):
        return res.failed("the numbers are right, but the generated code has no atomic add: several blocks adding "
                          "into one C tile need T.atomic_add, or their stores race on a GPU")
    res.checked("grid z and atomics in the generated code",
                "the generated kernel reads blockIdx.z (one block per slice) and adds its tile with atomic adds")
    return res


# ------------------------------------------------------------------------------------------------
# Notebook 02b, exercise 2: a tile for a T4's shared memory
# ------------------------------------------------------------------------------------------------

T4_ARCH = "sm_75"
T4_SHAPE = (200, 264, 200)


def check_t4_tile(config, *, shape=T4_SHAPE, verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``GemmConfig`` for a T4: the seed's 128 x 128 tile, 128 threads and three
    stages, the largest ``block_K`` whose pipeline fits a T4 block's 64 KiB of shared memory."""
    res = _check_t4_tile(config, tuple(shape))
    if verbose:
        print(res)
    return res


def _check_t4_tile(config, shape) -> ExerciseResult:
    from ... import emulate
    from ...exercise_kit import not_attempted
    from . import rule
    from .configs import SEED_CONFIG, GemmConfig
    from .kernel import gemm_relu_program, gemm_relu_reference

    res = GemmExerciseResult()
    limit = runtime.ARCHS[T4_ARCH].smem_per_block
    if config is None:
        return not_attempted(res, "set my_t4_config to a GemmConfig (e.g. SEED_CONFIG.replace(...))")
    if not isinstance(config, GemmConfig):
        return res.failed(f"my_t4_config is a {type(config).__name__}, not a GemmConfig: build it with "
                          "GemmConfig(...) or SEED_CONFIG.replace(...)")
    if (config.block_M, config.block_N, config.threads) != (SEED_CONFIG.block_M, SEED_CONFIG.block_N, SEED_CONFIG.threads):
        return res.failed(f"{config.name}: keep the seed's 128 x 128 tile on 128 threads (block_M x block_N = "
                          f"{config.block_M} x {config.block_N}, {config.threads} threads): a smaller tile re-reads A "
                          "and B more often; this exercise changes only block_K")
    if config.num_stages != SEED_CONFIG.num_stages:
        return res.failed(f"{config.name}: keep three stages (num_stages={config.num_stages}); this exercise asks what "
                          "block_K three stages can afford, not how many stages one block_K can")
    need = rule.smem_bytes(config)
    if need > limit:
        return res.failed(f"{config.name} needs {need // 1024} KiB of shared memory per block ({config.num_stages} "
                          f"stages x ({config.block_M} x {config.block_K} + {config.block_K} x {config.block_N}) x 2 "
                          f"bytes), and a T4 block may have {limit // 1024} KiB (checked before any compiler ran)")
    res.checked("the shared-memory budget", f"{config.name}: {config.num_stages} stages x "
                f"{need // config.num_stages // 1024} KiB = {need // 1024} KiB <= {limit // 1024} KiB")
    larger = config.replace(block_K=config.block_K + 16)
    if rule.smem_bytes(larger) <= limit:
        return res.failed(f"it fits, but a larger block_K also fits: block_K = {larger.block_K} needs "
                          f"{rule.smem_bytes(larger) // 1024} KiB — the largest K step that fits means the fewest "
                          "loop iterations and barriers")
    res.checked("the largest block_K", f"block_K = {larger.block_K} would need {rule.smem_bytes(larger) // 1024} KiB: "
                f"{config.block_K} is the largest multiple of 16 that fits")
    M, N, K = shape
    program = gemm_relu_program(M, N, K, in_dtype="float16", **config.as_dict())
    kernel = compile_or_fail(res, program, T4_ARCH)
    if kernel is None:
        return res
    if not isinstance(kernel, runtime.UncompiledKernel):
        res.ran.append(f"compiles for {T4_ARCH}")
        launched = runtime.dynamic_shared_memory(kernel)
        if launched is None:
            res.skipped("TileLang's launch code could not be read: its shared-memory size is unchecked")
        elif launched > limit:
            return res.failed(f"TileLang's launch for {T4_ARCH} asks for {launched} bytes of shared memory, more than "
                              f"the T4's {limit}")
        else:
            res.checked(f"TileLang's launch size for {T4_ARCH}",
                        f"TileLang's launch for {T4_ARCH} asks for {launched} bytes of dynamic shared memory")
    a, b = _inputs([(M, K), (K, N)], "float16")
    out = checks.poisoned((M, N), a.dtype, a.device)
    on_t4 = runtime.mode().can_run and runtime.current_arch() == T4_ARCH and not isinstance(kernel, runtime.UncompiledKernel)
    try:
        with quiet_tilelang():
            if on_t4:
                runtime.run(kernel, a, b, out)
            else:
                a, b, out = a.cpu(), b.cpu(), out.cpu()
                emulate.run(program, a, b, out)
    except Exception as exc:
        return res.failed(f"running it failed: {type(exc).__name__}: {_first_line(exc)}")
    res.ran_on = "the GPU" if on_t4 else "the emulator (CPU)"
    cmp = checks.compare(out, gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"])
    if _unwritten_or_nan(res, out, cmp):
        return res
    if not cmp.ok:
        return res.failed(f"wrong values against ReLU(a @ b), ran in {res.ran_on}: {cmp}")
    res.numerics_checked = True
    res.checked(f"values in {res.ran_on}",
                f"matches ReLU(a @ b) in fp32 ({M}x{N}x{K}, ragged), ran in {res.ran_on}: {cmp}")
    res.skipped("which is faster on a T4, this tile or the same tile with two stages of block_K = 64, is not checked "
                "here: timing both on a T4 (tt.mode().can_run there) would tell")
    return res
