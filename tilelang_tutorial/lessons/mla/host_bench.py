"""Suite ``mla_host``: what ``MLADecodePlan.run`` costs per call above the plan's compiled kernel,
at batch 1 and 64, kv 8192, h_q 128, on the GPU.

The plan is made once (:func:`.op.plan`, default schedule, split chosen for the shape); the op is
``plan.run(**inputs, out=out)``, the bare call the plan's compiled kernel called directly with
the same arguments ``run`` passes it. Both are timed back to back with host time counted
(:func:`tilelang_tutorial.host_cost.measure_record`, two methods that must agree), after their
poisoned outputs are checked against the fp32 reference (on at most 16 sequences), and after
:data:`SETTLE_S` seconds of bare calls (the GPU at its settled clock before either is timed).
"""
from __future__ import annotations

from ... import checks, host_cost, results, runtime
from . import op as K
from .common import DIM_NOPE, DIM_PE, default_softmax_scale
from .bench import sample_reference
from .reference import make_paged_inputs

SUITE = "mla_host"
COMMAND = "python -m tilelang_tutorial bench mla_host"
POINTS = [(1, 8192), (64, 8192)]      # (batch, kv length)
H_Q = 128
DTYPE = "float16"


def bare_args(the_plan, x, out) -> tuple:
    """The arguments ``MLADecodePlan.run`` passes the kernel (the same views and workspaces)."""
    return (x["q_nope"], x["q_pe"], x["kv_cache"].view(-1, DIM_NOPE), x["pe_cache"].view(-1, DIM_PE),
            x["block_table"], x["cache_seqlens"], the_plan.lse, the_plan.o_partial, out)


#: seconds of back-to-back bare calls before the timed ones, so that the GPU runs at the clock it
#: holds under this load before either call is timed (otherwise the call timed first, at a higher
#: clock, looks faster than the one timed after it)
SETTLE_S = 1.5


def settle(fn, seconds: float = SETTLE_S) -> None:
    """Call ``fn`` back to back for ``seconds`` of wall time, then wait for the GPU."""
    import time

    import torch

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()


def run(quick: bool = False) -> results.Run:
    import torch

    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    out_recs, notes = [], {}
    for b, kv in POINTS:
        x = make_paged_inputs(b, H_Q, [kv] * b, dtype=getattr(torch, DTYPE), device="cuda", seed=b, extra_pages=0)
        the_plan = K.plan(**x)
        out, out_bare = (checks.poisoned((b, H_Q, DIM_NOPE), x["q_nope"].dtype, "cuda") for _ in range(2))
        args = bare_args(the_plan, x, out_bare)
        the_plan.run(**x, out=out)
        the_plan.kernel(*args)
        torch.cuda.synchronize()
        idx, ref = sample_reference(x)
        tol = checks.TOLERANCE[DTYPE]
        rows = idx.to(out.device)
        op_check = checks.compare(out[rows].float(), ref, tolerance=tol)
        bare_check = checks.compare(out_bare[rows].float(), ref, tolerance=tol)
        settle(lambda: the_plan.kernel(*args))
        rec = host_cost.measure_record(
            suite=SUITE, kernel="mla_decode",
            config={"num_split": the_plan.num_split, "schedule": the_plan.schedule, "path": "plan.run",
                    "softmax_scale": default_softmax_scale(), "arch": runtime.current_arch()},
            shape={"batch": b, "h_q": H_Q, "kv_len": kv}, dtype=DTYPE, label=f"plan.run b={b} kv={kv}",
            op=lambda: the_plan.run(**x, out=out), bare=lambda: the_plan.kernel(*args),
            op_check=op_check, bare_check=bare_check,
            call="MLADecodePlan.run(**inputs, out=out) (plan made once)",
            bare_name="the plan's compiled kernel(q_nope, q_pe, kv, pe, block_table, seqlens, lse, o_partial, out)",
            notes=notes)
        if rec:
            rec["correctness"]["checked_sequences"] = int(idx.numel())
            out_recs.append(rec)
        del x, the_plan, out, out_bare, args, ref
        torch.cuda.empty_cache()
    return results.Run(out_recs, prov, goals=host_cost.goals(), notes=notes)
