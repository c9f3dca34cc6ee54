"""Suite ``mla_host``: what the calls a user makes cost per call, on the GPU, at the points a
serving engineer would try (:data:`POINTS`: batch 1 to 128, kv 4,000 to 100,000, 128 and 16
heads, fp16 and bf16, one ragged batch).

The plan is made once (:func:`.op.plan`, default schedule, split chosen for the shape); the op is
``plan.run(**inputs, out=out)``, the bare call the plan's compiled kernel called directly with
the same arguments ``run`` passes it, and the one call ``mla_decode(**inputs, out=out)`` (which
validates and plans for the user; judged against ``plan.run``). All are timed back to back with
host time counted
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
#: (label, batch, h_q, kv lengths or (max length, "ragged"), dtype)
POINTS = [("b64 kv8191", 64, 128, 8191, "float16"), ("b128 kv4000", 128, 128, 4000, "float16"),
          ("b64 kv16384 bf16", 64, 128, 16384, "bfloat16"), ("b1 kv32768", 1, 128, 32768, "float16"),
          ("b1 kv100000", 1, 128, 100000, "float16"), ("b8 kv20000", 8, 128, 20000, "float16"),
          ("h16 b128 kv8191", 128, 16, 8191, "float16"), ("ragged b48 <= 16384", 48, 128, (16384, "ragged"), "float16")]


def seqlens(batch: int, kv, seed: int) -> list[int]:
    """Every sequence ``kv`` long, or for ``(max, "ragged")`` lengths drawn uniformly in [1, max]."""
    if isinstance(kv, tuple):
        import random

        rng = random.Random(seed)
        return [rng.randint(1, kv[0]) for _ in range(batch)]
    return [kv] * batch


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
    points = [POINTS[0], POINTS[3]] if quick else POINTS      # quick: one unsplit, one split point
    # every configuration the points need, compiled at once in worker processes
    K.prebuild([{"h_q": h_q, "dtype": dtype,
                 "split": K.choose_num_split(b, h_q, max(seqlens(b, kv, seed=b)), sm_count=K.sm_count()) > 1}
                for _, b, h_q, kv, dtype in points])
    for label, b, h_q, kv, dtype in points:
        lens = seqlens(b, kv, seed=b)
        x = make_paged_inputs(b, h_q, lens, dtype=getattr(torch, dtype), device="cuda", seed=b, extra_pages=0)
        the_plan = K.plan(**x)
        out, out_bare, out_one = (checks.poisoned((b, h_q, DIM_NOPE), x["q_nope"].dtype, "cuda") for _ in range(3))
        args = bare_args(the_plan, x, out_bare)
        the_plan.run(**x, out=out)
        the_plan.kernel(*args)
        K.mla_decode(**x, out=out_one)
        torch.cuda.synchronize()
        idx, ref = sample_reference(x)
        tol = checks.TOLERANCE[dtype]
        rows = idx.to(out.device)
        op_check = checks.compare(out[rows].float(), ref, tolerance=tol)
        bare_check = checks.compare(out_bare[rows].float(), ref, tolerance=tol)
        one_check = checks.compare(out_one[rows].float(), ref, tolerance=tol)
        if not one_check.ok:
            op_check = one_check      # a wrong answer from either call meets nothing
        settle(lambda: the_plan.kernel(*args))
        rec = host_cost.measure_record(
            suite=SUITE, kernel="mla_decode",
            config={"num_split": the_plan.num_split, "schedule": the_plan.schedule, "path": "plan.run and mla_decode",
                    "softmax_scale": default_softmax_scale(), "arch": runtime.current_arch()},
            shape={"batch": b, "h_q": h_q, "kv_len": max(lens), "mean_kv_len": sum(lens) / b}, dtype=dtype,
            label=f"{label}: plan.run, mla_decode",
            op=lambda: the_plan.run(**x, out=out), bare=lambda: the_plan.kernel(*args),
            one_call=lambda: K.mla_decode(**x, out=out_one), one_call_name="mla_decode(**inputs, out=out)",
            op_check=op_check, bare_check=bare_check,
            call="MLADecodePlan.run(**inputs, out=out) (plan made once)",
            bare_name="the plan's compiled kernel(q_nope, q_pe, kv, pe, block_table, seqlens, lse, o_partial, out)",
            notes=notes)
        if rec:
            rec["correctness"]["checked_sequences"] = int(idx.numel())
            out_recs.append(rec)
        del x, the_plan, out, out_bare, out_one, args, ref
        K._PLANS.clear()
        torch.cuda.empty_cache()
    return results.Run(out_recs, prov, goals=host_cost.goals([ONE_CALL_GOAL]), notes=notes)


ONE_CALL_GOAL = {"name": f"mla_decode(...) at most {host_cost.GOAL_ONE_CALL_RATIO:g}x plan.run, back to back",
                 "max": host_cost.GOAL_ONE_CALL_RATIO, "unit": "x", "metric": "host_cost.one_call_over_op"}
