"""Exercise for notebook 04: write the split-KV combine.

With split-KV, each of ``S`` CTAs processed one slice of a sequence's KV cache and produced

* ``o_partial[..., s, :]``: its output, already normalised by *its own* softmax denominator;
* ``lse[..., s]``: ``log2`` of that denominator in the kernel's scaled domain, i.e.
  ``log2(sum_t 2^(x_t))`` over the slice's scaled scores ``x_t`` -- or ``-inf`` when the slice was
  empty (a sequence shorter than ``S`` KV blocks).

Write ``combine(o_partial, lse)`` in torch that returns the exact softmax-weighted output over
the whole sequence, shape ``o_partial.shape[:-2] + (D,)``, then call ``check_combine(combine)``.
It must be numerically safe: ``lse`` values can be in the hundreds (``2**200`` overflows fp32)
and empty splits must contribute nothing. Runs entirely on the CPU.

Hint: each split's weight is its share of the total denominator, ``2^(lse_s) / sum_r 2^(lse_r)``;
subtract the largest ``lse`` before exponentiating. A solution is in ``mla_solution.py``.
"""
from __future__ import annotations

import math

from .gemm import ExerciseResult


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

    res = ExerciseResult(ok=True, numerics_checked=True)
    for name, o, lse in _cases():
        want = _reference_combine(o, lse)
        try:
            got = fn(o.clone(), lse.clone())
        except Exception as e:  # report, do not crash the notebook
            res.ok = False
            res.lines.append(f"FAIL {name}: raised {type(e).__name__}: {e}")
            continue
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
            res.ok = False
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            res.lines.append(f"FAIL {name}: expected a tensor of shape {tuple(want.shape)}, got {shape}")
            continue
        g64 = got.double()
        if not torch.isfinite(g64).all():
            res.ok = False
            res.lines.append(f"FAIL {name}: output has inf/NaN (overflow, or an empty split leaking in?)")
            continue
        err = (torch.linalg.vector_norm(g64 - want) / torch.linalg.vector_norm(want)).item()
        good = err < 1e-5
        res.ok &= good
        res.lines.append(f"{'ok  ' if good else 'FAIL'} {name}: relative error {err:.1e}")
    if verbose:
        print(res)
    return res
