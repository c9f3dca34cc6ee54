"""Notebook 04's exercises.

1. **Pick the warp configuration** of the attention core: how many heads a CTA handles
   (``block_H``: 64 or 128), how many consumer threads (``threads``: 128 = one warpgroup, 256, 512)
   and the ``T.GemmWarpPolicy`` of both GEMMs (``"FullRow"``, ``"FullCol"`` or ``"Square"``).
   Call ``check_warp_config({"block_H": ..., "threads": ..., "policy": ...})``. The checker runs
   TileLang's layout inference (:func:`tilelang_tutorial.layouts.infer_layouts`, no nvcc) on
   ``lessons/layouts/programs.py: two_warpgroup_program`` -- the kernel's two GEMMs, ``acc_s = Q @ KV^T`` and
   ``acc_o += S @ KV`` -- with your choice, reads how many registers per thread the fp32
   accumulators take and which axis the warpgroups split, and explains the register cost.
   It passes when (a) the accumulators leave room in the consumers' share of the register file
   and (b) the policy you named is the split inference actually made.

2. **Write the split-KV combine.** With split-KV, each of ``S`` CTAs processed one slice of a
   sequence's KV cache and produced

   * ``o_partial[..., s, :]``: its output, already normalised by *its own* softmax denominator;
   * ``lse[..., s]``: ``log2`` of that denominator in the kernel's scaled domain, i.e.
     ``log2(sum_t 2^(x_t))`` over the slice's scaled scores ``x_t`` -- or ``-inf`` when the slice
     was empty (a sequence shorter than ``S`` KV blocks).

   Write ``combine(o_partial, lse)`` in torch that returns the exact softmax-weighted output over
   the whole sequence, shape ``o_partial.shape[:-2] + (D,)``, then call ``check_combine(combine)``.
   It must be numerically safe: ``lse`` values can be in the hundreds (``2**200`` overflows fp32)
   and empty splits must contribute nothing. Runs entirely on the CPU.
   Hint: each split's weight is its share of the total denominator, ``2^(lse_s) / sum_r 2^(lse_r)``;
   subtract the largest ``lse`` before exponentiating.

Solutions: ``solutions/warp_policy.py`` and ``solutions/combine.py`` in this lesson's folder.
"""
from __future__ import annotations

import math

from ...exercise_kit import ExerciseResult, not_attempted


def _reference_combine(o_partial, lse):
    import torch

    o = o_partial.double()
    l = lse.double()
    m = l.max(dim=-1, keepdim=True).values
    w = torch.exp2(l - m)
    return ((w / w.sum(dim=-1, keepdim=True))[..., None] * o).sum(dim=-2)


def _cases(seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    cases = []
    # ordinary: 3 sequences x 4 heads x 5 splits x 64 dims, moderate lse
    o = torch.randn(3, 4, 5, 64, generator=g)
    lse = torch.randn(3, 4, 5, generator=g) * 4
    cases.append(("moderate lse values", o, lse))
    # large lse: exponentiating without subtracting the max overflows fp32
    cases.append(("large lse (overflow without max subtraction)", o.clone(), lse + 200.0))
    # empty splits (-inf) in some rows, including all but one
    lse2 = lse.clone()
    lse2[0, :, 3:] = -math.inf
    lse2[1, 2, 1:] = -math.inf
    cases.append(("empty splits (lse = -inf)", o.clone(), lse2))
    # one split: the combine must return o_partial unchanged
    cases.append(("a single split", o[:, :, :1].clone(), lse[:, :, :1].clone()))
    return cases


def check_combine(fn, *, verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``fn(o_partial, lse) -> out`` against an fp64 reference (CPU)."""
    import torch

    res = ExerciseResult(numerics_checked=True, cpu_only=True)
    if fn is None:
        res = not_attempted(res, "write combine(o_partial, lse) in torch")
        if verbose:
            print(res)
        return res
    for name, o, lse in _cases():
        want = _reference_combine(o, lse)
        try:
            got = fn(o.clone(), lse.clone())
        except NotImplementedError:
            not_attempted(res, "write combine(o_partial, lse) in torch")
            break
        except Exception as e:  # report, do not crash the notebook
            res.failed(f"{name}: raised {type(e).__name__}: {e}")
            continue
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            res.failed(f"{name}: expected a tensor of shape {tuple(want.shape)}, got {shape}")
            continue
        g64 = got.double()
        if not torch.isfinite(g64).all():
            res.failed(f"{name}: output has inf/NaN (overflow without subtracting the max lse, or an empty split leaking in?)")
            continue
        err = (torch.linalg.vector_norm(g64 - want) / torch.linalg.vector_norm(want)).item()
        if err < 1e-5:
            res.passed(f"{name}: relative error {err:.1e}")
        else:
            res.failed(f"{name}: relative error {err:.1e} (each split must be weighted by 2^lse_s / sum_r 2^lse_r)")
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
    from ..layouts import programs as D
    from ... import layouts as L

    try:
        infos = L.infer_layouts(D.two_warpgroup_program(heads=block_h, threads=threads, policy=L.warp_policy(policy)),
                                arch=arch)
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
    res.skipped("the exact register count is ptxas's (notebook 04 section 4 reads it from the compiled kernel); "
                "this checker used inferred layouts only and compiled nothing")
    return res
