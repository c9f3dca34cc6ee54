"""Notebook 04's exercises.

1. **Pick the warp configuration** of the attention core: how many heads a CTA handles
   (``block_H``: 64 or 128), how many consumer threads (``threads``: 128 = one warpgroup, 256, 512)
   and the ``T.GemmWarpPolicy`` of both GEMMs (``"FullRow"``, ``"FullCol"`` or ``"Square"``).
   Call ``check_warp_config({"block_H": ..., "threads": ..., "policy": ...})``. The checker runs
   TileLang's layout inference (:func:`tilelang_tutorial.layouts.infer_layouts`, no nvcc) on
   :func:`two_gemms_program` -- the kernel's two GEMMs, ``acc_s = Q @ KV^T`` and
   ``acc_o += S @ KV`` -- with your choice, reads how many registers per thread the fp32
   accumulators take and which axis the warpgroups split, and explains the register cost.
   It passes when (a) the accumulators leave room in the consumers' share of the register file
   and (b) the policy you named is the split inference actually made.

2. **Write the split-KV combine as a TileLang kernel.** With split-KV, each of ``S`` CTAs processed
   one share of a sequence's pages and wrote

   * ``o_partial[b, h, s, :]``: its output, already normalised by *its own* softmax denominator;
   * ``lse[b, h, s]``: ``log2`` of that denominator in the kernel's scaled domain -- or ``-inf``
     when the share was empty (a sequence shorter than ``S`` pages).

   Write ``combine_program(num_split, dim=512)`` returning a ``T.prim_func`` with arguments
   ``lse (batch, heads, num_split)``, ``o_partial (batch, heads, num_split, dim)`` and ``Output
   (batch, heads, dim)``, all fp32 (``batch`` and ``heads`` dynamic), then call
   ``check_combine_kernel(combine_program)``. The checker runs it (GPU, else the emulator) against
   an fp64 reference on 3 sequences x 5 heads (a grid with swapped extents leaves outputs
   unwritten) and five cases: moderate ``lse``; 19 splits whose ``lse`` are all below -200 and
   spread by hundreds, the largest in the last split (``2**lse`` underflows to 0 unless shifted by
   the row's max, which a max started at 0 never reaches, and a running max that rises in a later
   chunk of splits must rescale what was summed before); one split 300 above the others, never the first (``2**300``
   overflows fp32 unless the shift is the max over all splits); empty splits; a single split.
   Its hints come from what the output looks like (the plain mean of the splits, weights that do
   not sum to 1) and, failing that, from the concept the failing case tests. Notebook 04 runs the
   package's own combine through the same checker.

Solutions: ``solutions/warp_policy.py`` and ``solutions/combine_kernel.py`` in this lesson's folder.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from ...exercise_kit import ExerciseResult, not_attempted


def _reference_combine(o_partial, lse):
    import torch

    o = o_partial.double()
    l = lse.double()
    m = l.max(dim=-1, keepdim=True).values
    w = torch.exp2(l - m)
    return ((w / w.sum(dim=-1, keepdim=True))[..., None] * o).sum(dim=-2)


#: The checked shapes: ``batch`` and ``heads`` multiples of no block, and different, so a grid
#: with its extents swapped leaves outputs unwritten; ``dim`` is MLA's latent width (the
#: package's combine gives each of its 128 threads 4 columns).
COMBINE_BATCH, COMBINE_HEADS, COMBINE_DIM = 3, 5, 512
#: Splits per case: a few, one, and a count past any chunk of 16 splits (a combine that walks the
#: splits in fixed chunks must handle a partial last one).
COMBINE_SPLITS, COMBINE_MANY_SPLITS = 5, 19


def _combine_cases(seed: int = 0):
    """``[(name, o_partial, lse, hint)]``: the checked cases, each with the concept it tests (the
    hint given when the output is wrong there and no more specific symptom shows)."""
    import torch

    from ... import checks

    g = torch.Generator().manual_seed(seed)
    b, h, s, dim = COMBINE_BATCH, COMBINE_HEADS, COMBINE_SPLITS, COMBINE_DIM

    def partials(num_split):
        return torch.randn(b, h, num_split, dim, generator=g)

    moderate = torch.randn(b, h, s, generator=g) * 4
    # one split per row 300 above the others, never the first: 2^300 overflows fp32 unless the
    # shift is the row's largest lse
    far_above = moderate.clone()
    rows = torch.arange(b * h)
    far_above.view(-1, s)[rows, 1 + rows % (s - 1)] += 300.0
    # empty splits (-inf) in some rows, including all but one
    empty = moderate.clone()
    empty[0, :, 3:] = -math.inf
    empty[1, 2, 1:] = -math.inf
    return [
        ("moderate lse values", partials(s), moderate,
         "each split's weight is its share of the total denominator, 2^(lse_s - lse_max) / sum_r 2^(lse_r - lse_max)"),
        # all below -200 and spread by hundreds: 2^lse underflows to 0 for every split; the largest
        # is the last split, so a max kept over chunks of splits rises after the first chunk
        (f"{COMBINE_MANY_SPLITS} splits, every lse below -200 and spread by hundreds, the largest last",
         partials(COMBINE_MANY_SPLITS),
         checks.lse_values((b, h, COMBINE_MANY_SPLITS), "cpu", highest=-200.0, spread=500.0, seed=seed).flip(-1),
         "every lse here is below -200, so 2^lse_s underflows fp32 to 0 in every split (0 / 0 = NaN): weigh by "
         "2^(lse_s - lse_max), lse_max the largest lse of the row, found by a running max that starts at -inf "
         "(-T.infinity), not at 0, which no lse here reaches; walk all num_split splits, and when the max rises, "
         "rescale the sums so far by 2^(old max - new max)"),
        ("one split's lse 300 above the others (not the first split)", partials(s), far_above,
         "2^(lse_s - m) overflows fp32 once lse_s - m passes 128 (inf / inf = NaN): m must be the largest lse of "
         "the row, the max over all its splits (not the first split's, not a fixed value)"),
        ("empty splits (lse = -inf)", partials(s), empty,
         "an empty split (lse = -inf) must get the weight 2^-inf = 0, and the others share the whole weight"),
        ("a single split", partials(1), moderate[:, :, :1].clone(),
         "with one split the output is o_partial[:, :, 0, :] unchanged (weight 2^0 / 2^0 = 1)"),
    ]


def _combine_symptom(got, o, lse, hint: str) -> str:
    """What a wrong combine's output looks like, and where to look; ``hint``: the case's concept."""
    import torch

    from ... import checks

    g = got.double()
    if not torch.isfinite(g).all():
        return f"the output holds inf/NaN: {hint}"
    def close(x):
        return checks.compare(got, x, tolerance=1e-5).ok
    if close(o.double().mean(dim=-2)):
        return "the output is the plain mean of the splits: weight split s by 2^(lse_s - lse_max) / sum_r 2^(lse_r - lse_max)"
    w = torch.exp2(lse.double() - lse.double().max(dim=-1, keepdim=True).values)
    if close((w[..., None] * o.double()).sum(dim=-2)):
        return "the weights are right but not normalised: divide by their sum (they must add up to 1)"
    return hint


def check_combine_kernel(factory, *, arch: str | None = None, verbose: bool = True) -> ExerciseResult:
    """Check a split-KV combine ``factory(num_split, dim=512) -> T.prim_func`` (see the module
    docstring; the reader's, or the package's own combine) against an fp64 reference, run on the
    GPU or in the emulator, on cases that expose the classic mistakes (:func:`_combine_cases`)."""
    import torch

    from ... import checks, runtime
    from ...exercise_kit import call_factory, compile_or_fail, run_kernel

    res = ExerciseResult()
    what = "write combine_program(num_split, dim=512) returning the combine's T.prim_func"
    arch = arch or runtime.current_arch()
    device = runtime.mode().device
    kernels, ran = {}, []
    cases = _combine_cases()
    for name, o, lse, hint in cases:
        num_split = lse.shape[-1]
        if num_split not in kernels:
            program = call_factory(res, factory, (num_split, o.shape[-1]), what)
            if program is None:
                break
            kernels[num_split] = compile_or_fail(res, program, arch)
            if kernels[num_split] is None:
                break
        out = checks.poisoned(tuple(o.shape[:-2]) + (o.shape[-1],), torch.float32, device)
        if not run_kernel(res, kernels[num_split], lse.to(device), o.to(device), out, label=name):
            break
        out = out.cpu()
        cmp = checks.compare(out, _reference_combine(o, lse), tolerance=1e-5)
        if cmp.unwritten:
            res.failed(f"{name}: {cmp.unwritten} of {out.numel()} outputs were never written")
            res.hint(f"the grid: one CTA per (head, sequence), T.Kernel(heads, batch) binding (hx, bx) in that "
                     f"order, each writing all dim columns of Output[bx, hx, :] ({COMBINE_HEADS} heads and "
                     f"{COMBINE_BATCH} sequences here)")
            continue
        if cmp.ok:
            ran.append(name)
            res.passed(f"{name} (num_split={num_split}): {cmp}")
        else:
            res.failed(f"{name} (num_split={num_split}): {cmp}")
            res.hint(_combine_symptom(out, o, lse, hint))
    where = "the GPU" if runtime.mode().can_run else "the emulator (CPU)"
    if res.ok and len(ran) == len(cases):   # every case ran and matched
        res.numerics_checked, res.ran_on = True, where
    if verbose:
        print(res)
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 1: the warp configuration
# ------------------------------------------------------------------------------------------------

REGISTER_FILE = 65536        # 32-bit registers per SM (Hopper), shared by all threads of the CTA
MAX_REGS_SETMAXNREG = 240    # the most setmaxnreg.inc gives a consumer thread in TileLang's kernels
PRODUCER_REGS = 24           # what the producer warpgroup keeps (setmaxnreg.dec)
RESERVE = 64                 # rule of thumb: Q/K descriptors, softmax state, indices, addresses
POLICIES = ("FullRow", "FullCol", "Square")
_INTENT = {"FullRow": "rows", "FullCol": "columns"}


def two_gemms_program(heads: int, threads: int, policy, *, dim: int = 512, block_N: int = 64,
                      dtype: str = "float16"):
    """The two GEMMs of one MLA decode block, with no softmax (only the layouts matter):
    ``acc_s = Q @ KV^T`` (heads x block_N), its copy to ``S_shared``, ``acc_o += S @ KV``
    (heads x dim), both GEMMs with the warp ``policy``."""
    import tilelang.language as T

    seqlen = T.dynamic("seqlen")

    @T.prim_func
    def two_gemms(Q: T.Tensor((heads, dim), dtype), KV: T.Tensor((seqlen, dim), dtype),
                  Out: T.Tensor((heads, dim), dtype)):
        with T.Kernel(1, threads=threads):
            Q_shared = T.alloc_shared((heads, dim), dtype)
            KV_shared = T.alloc_shared((block_N, dim), dtype)
            S_shared = T.alloc_shared((heads, block_N), dtype)
            acc_s = T.alloc_fragment((heads, block_N), "float32")
            acc_o = T.alloc_fragment((heads, dim), "float32")
            T.copy(Q, Q_shared)
            T.clear(acc_o)
            for k in T.serial(T.ceildiv(seqlen, block_N)):
                T.copy(KV[k * block_N, 0], KV_shared)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=policy, clear_accum=True)
                T.copy(acc_s, S_shared)
                T.gemm(S_shared, KV_shared, acc_o, policy=policy)
            T.copy(acc_o, Out)

    return two_gemms


def consumer_register_budget(threads: int) -> int:
    """Registers per consumer thread that setmaxnreg can give when a 128-thread producer keeps 24."""
    share = (REGISTER_FILE - 128 * PRODUCER_REGS) // threads // 8 * 8
    return min(MAX_REGS_SETMAXNREG, share)


def check_warp_config(choice, *, arch: str = "sm_90a", verbose: bool = True) -> ExerciseResult:
    """Check ``{"block_H": 64|128, "threads": 128|256|512, "policy": "FullRow"|"FullCol"|"Square"}``."""
    res = _check_warp_config(choice, arch)
    if verbose:
        print(res)
    return res


def _check_warp_config(choice, arch) -> ExerciseResult:
    res = ExerciseResult(cpu_only=True)
    what = 'give {"block_H": 64 or 128, "threads": 128, 256 or 512, "policy": "FullRow", "FullCol" or "Square"}'
    if choice is None:
        return not_attempted(res, what)
    if not isinstance(choice, dict) or set(choice) != {"block_H", "threads", "policy"}:
        return res.failed(f"expected a dict with keys block_H, threads, policy; got {choice!r}")
    block_h, threads, policy = choice["block_H"], choice["threads"], choice["policy"]
    if any(v is None for v in (block_h, threads, policy)):
        return not_attempted(res, what)
    if block_h not in (64, 128):
        return res.failed(f"block_H must be 64 or 128 (wgmma computes 64 rows per warpgroup), got {block_h!r}")
    if threads not in (128, 256, 512):
        return res.failed(f"threads must be 128, 256 or 512 (whole warpgroups of 128), got {threads!r}")
    if policy not in POLICIES:
        return res.failed(f"policy must be one of {POLICIES}, got {policy!r}")
    from ... import layouts as L

    try:
        infos = L.infer_layouts(two_gemms_program(block_h, threads, L.warp_policy(policy)), arch=arch)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[-1][:400]
        return res.failed(f"layout inference rejected block_H={block_h}, threads={threads}, {policy}: {first}")
    acc_o, acc_s = infos["acc_o"], infos["acc_s"]
    regs_o, regs_s = acc_o.registers_per_thread, acc_s.registers_per_thread
    split = acc_o.split_axis()
    wgs = threads // 128
    res.passed(f"layout inference ({arch}): {wgs} consumer warpgroup(s); acc_o ({block_h}x512 fp32) split by {split}: "
               f"{regs_o} registers/thread; acc_s ({block_h}x64): {regs_s}")
    budget = consumer_register_budget(threads)
    need = regs_o + regs_s + RESERVE
    total = threads + 128
    if need > budget:
        why = (f"{threads} consumer threads + 128 producer threads share {REGISTER_FILE} registers: at most {budget} "
               f"per consumer thread" if budget < MAX_REGS_SETMAXNREG else
               f"a consumer thread gets at most {MAX_REGS_SETMAXNREG} registers (setmaxnreg)")
        fix = ("more warpgroups shrink every thread's share of the register file faster than its accumulator"
               if budget < MAX_REGS_SETMAXNREG else
               "fewer accumulator elements per thread: fewer heads per CTA, or more warpgroups sharing them")
        return res.failed(f"registers: {regs_o} (acc_o) + {regs_s} (acc_s) + ~{RESERVE} for everything else = {need} > "
                          f"{budget}: {why}. The accumulators would spill to local memory every KV block; {fix}")
    res.passed(f"registers: {regs_o} + {regs_s} + ~{RESERVE} = {need} <= {budget} per consumer thread "
               f"({total} threads launched with the producer)")
    if policy in _INTENT and _INTENT[policy] != split:
        return res.failed(f"you asked for {policy} ({_INTENT[policy]}), but inference split the {split}: with "
                          f"{block_h} rows and {wgs} warpgroups of 64-row wgmma, that is the only split possible. "
                          f"Name the policy that says what the kernel does")
    if policy == "Square":
        return res.failed(f"Square asks for a 2-D split; with {wgs} warpgroups inference split the {split}. "
                          f"Name the policy that says what the kernel does")
    res.passed(f"{policy}: the warpgroups split the {split}, as the policy says; with a column split each "
               f"warpgroup holds only part of every row of S, hence the S_shared exchange")
    res.skipped("not checked: the exact register count, which is ptxas's (notebook 04 section 3 reads it from "
                "the compiled kernel); this checker compiled nothing")
    res.summary = ("layout inference of the two GEMMs, the register arithmetic and the policy ran here "
                   "(the ○ line was not checked)")
    return res
