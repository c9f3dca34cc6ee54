"""Host cost per call: what a Python callable costs above the bare compiled-kernel call.

Measured back to back: ``calls`` calls in a row, one synchronisation at the
end, the median over ``repeats`` such loops, divided by ``calls``. For a tiny kernel the GPU
finishes each launch before the host issues the next one, so the figure is the host's time per
call: the launch path's price, not the kernel's.

``python -m tilelang_tutorial host-cost`` measures the tutorial's own layers on this machine's
GPU (the bare call of a compiled tiny kernel, :func:`runtime.run` around it, the plan-style
:func:`runtime.launcher`, and :func:`runtime.mode` alone). Any op can be measured the same way::

    from tilelang_tutorial import host_cost
    host_cost.print_table(host_cost.compare({"bare": lambda: kernel(x, out), "op": lambda: op(x)}))

The recorded figures per op come from :func:`measure_record`, which the lessons'
host-cost suites use (``python -m tilelang_tutorial bench tile_host gemm_host rmsnorm_host
mla_host``): the op and its bare compiled-kernel call timed by :func:`timing.measure`'s ``call``
regime (two methods that must agree), outputs checked, the difference judged against
:data:`GOAL_EXCESS_US`. Fields: ``docs/results-schema.md``.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable


def _cuda_sync():
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else None


def per_call_us(fn: Callable[[], object], *, calls: int = 2000, repeats: int = 7, warmup: int = 100,
                sync: Callable[[], object] | None | str = "cuda") -> float:
    """Median microseconds per call of ``fn()`` over ``repeats`` loops of ``calls`` back-to-back
    calls, each loop ended by ``sync()`` (``"cuda"``: torch.cuda.synchronize where a GPU is
    visible; ``None``: no synchronisation, for host-only callables)."""
    if sync == "cuda":
        sync = _cuda_sync()
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    loops = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync:
            sync()
        loops.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(loops)


def compare(callables: dict[str, Callable[[], object]], **kwargs) -> dict[str, float]:
    """``{name: microseconds per call}`` for each callable, measured one after the other with
    :func:`per_call_us` (keyword arguments go to it)."""
    return {name: per_call_us(fn, **kwargs) for name, fn in callables.items()}


def print_table(costs: dict[str, float], *, bare: str = "bare") -> None:
    """One line per callable: its time per call and, where ``bare`` is measured, the excess."""
    base = costs.get(bare)
    for name, us in costs.items():
        extra = f"   {us - base:+7.2f} us above {bare}" if base is not None and name != bare else ""
        print(f"  {name:<34} {us:8.2f} us per call{extra}", flush=True)


def main(calls: int = 5000) -> int:
    """Measure the runtime's layers around a tiny compiled kernel (GPU), or only the mode check."""
    import torch

    from . import runtime

    m = runtime.mode()
    print(runtime.describe_mode(), flush=True)
    if not m.can_run:
        costs = compare({"runtime.mode()": runtime.mode}, calls=calls, sync=None)
        print_table(costs)
        print("the kernel-call figures need a CUDA GPU: run this again on one", flush=True)
        return 0
    kernel = runtime.compile_kernel(runtime.probe_program())
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    launch = runtime.launcher(kernel)
    costs = compare({
        "bare": lambda: kernel(x, y),
        "runtime.run(kernel, x, y)": lambda: runtime.run(kernel, x, y),
        "runtime.launcher(kernel)(x, y)": lambda: launch(x, y),
        "torch add_ (a torch launch)": lambda: y.add_(1.0),
    }, calls=calls)
    costs["runtime.mode() (host only)"] = per_call_us(runtime.mode, calls=calls, sync=None)
    print(f"host cost per call, {calls} calls back to back, median of 7 loops, on {m.device_name}:", flush=True)
    print_table(costs)
    return 0


# ------------------------------------------------------------------------------------------------
# Recorded host cost per op: the call a user makes against the bare call
# ------------------------------------------------------------------------------------------------

#: The goal: an op's call at most this many microseconds above the bare compiled-kernel call.
GOAL_EXCESS_US = 3.0
#: The goal for an op with a one-call form beside its planned fast path: the one call, back to
#: back, at most this many times the planned call.
GOAL_ONE_CALL_RATIO = 1.2
#: The metric of every host-cost record (its ``value`` is the op's microseconds per call).
METRIC = "time per call, back to back (host time counted)"


#: Rounds of :func:`timed_calls`: each callable is timed this many times, in an order that
#: alternates between rounds, and its median round is kept. A 280 us MLA kernel timed once after
#: its bare call read 6 % slower than the bare call while the host's issue time was the same:
#: timed one after the other, a drift of the GPU's clock under sustained load lands on whichever
#: call comes second. Alternating puts each call first and last in turn. Five rounds, not three: a
#: call's rounds can differ by 2-5 us on a busy host (13.8, 9.3, 13.9 us), and two slow rounds of
#: three would set the median.
ROUNDS = 5


def timed_calls(calls: dict[str, Callable[[], object]], *, rounds: int = ROUNDS) -> tuple[dict, dict, dict]:
    """Time each callable in the launch-bound regime of :func:`timing.measure` (CUDA events around
    back-to-back calls, checked by the wall clock around the same loop; kept only when the two
    agree), ``rounds`` times, interleaved: even rounds time the callables in their given order,
    odd rounds in reverse (a, b / b, a / a, b), so no call is always timed after another. Each callable's
    figure is its median round; one whose timings agreed in fewer than half the rounds is not timed.
    Returns ``({name: Timing}, {name: why it was not timed}, {name: [µs per call of each round,
    None where that round's two methods disagreed]})``."""
    from . import timing

    names = list(calls)
    per_round: dict[str, list] = {name: [] for name in names}
    why: dict[str, list] = {name: [] for name in names}
    for r in range(rounds):
        for name in (reversed(names) if r % 2 else names):
            t, reason = timing.measure_or_note(calls[name], regime="call")
            per_round[name].append(t)
            if t is None:
                why[name].append(reason)
    timed, failed = {}, {}
    for name in names:
        good = sorted((t for t in per_round[name] if t is not None), key=lambda t: t.ms)
        if 2 * len(good) >= rounds and good:
            timed[name] = good[(len(good) - 1) // 2]
        else:
            failed[name] = "; ".join(dict.fromkeys(why[name]))
    rounds_us = {name: [None if t is None else t.ms * 1e3 for t in ts] for name, ts in per_round.items()}
    return timed, failed, rounds_us


def issue_us(fn: Callable[[], object], *, calls: int = 200, repeats: int = 5) -> float:
    """Host microseconds to issue one call of ``fn()``: the wall clock around ``calls`` calls with
    no synchronisation inside the timed loop (the GPU may still be running them; each loop is
    drained before the next), median over ``repeats``. Where the kernel is longer than the host's
    work, a back-to-back loop measures the GPU and hides the host's cost; this shows it. 200 calls
    stay well inside CUDA's launch queue, so the host is not made to wait for the GPU. One method,
    not cross-checked: a record's figure is the back-to-back time, this is context."""
    import torch

    for _ in range(3):
        fn()
    loops = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        loops.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(loops)


def paired_difference(rounds_a: list, rounds_b: list) -> float | None:
    """The median over rounds of ``a - b`` within one round (rounds where either was not timed left
    out), or None where fewer than half the rounds have both.

    Why paired: a host can switch
    between two speeds from one round to the next -- an op's rounds read 14.3, 14.5, 14.3, 9.5,
    9.5 us and its bare call's, timed beside them, 11.2, 11.4, 12.0, 7.8, 7.8 -- so the difference
    of the two medians can take one call's slow round and the other's fast one (+3.1 us here, where
    every round's own difference is 1.7-3.3 us). The two calls of one round run seconds apart at
    most, in the same state: their difference is the op's own cost."""
    diffs = sorted(a - b for a, b in zip(rounds_a, rounds_b) if a is not None and b is not None)
    if not diffs or 2 * len(diffs) < len(rounds_a):
        return None
    return statistics.median(diffs)


def verdict(op_us: float, bare_us: float, eager_us: float | None = None, *,
            goal_excess_us: float = GOAL_EXCESS_US, excess_us: float | None = None,
            op_minus_eager_us: float | None = None) -> dict:
    """The ``host_cost`` field of a record: the op's and the bare call's microseconds per call, the
    difference, and whether the goals are met (the excess at most ``goal_excess_us``; where eager
    torch was timed, the op at or below it). ``excess_us`` / ``op_minus_eager_us``: the paired
    differences (:func:`paired_difference`) where measured; the difference of the figures
    otherwise."""
    excess = op_us - bare_us if excess_us is None else excess_us
    out = {"op_us": op_us, "bare_us": bare_us, "excess_us": excess, "excess_of_figures_us": op_us - bare_us,
           "goal_excess_us": goal_excess_us, "excess_met": excess <= goal_excess_us}
    if eager_us is not None:
        diff = op_us - eager_us if op_minus_eager_us is None else op_minus_eager_us
        out.update(eager_us=eager_us, op_minus_eager_us=diff, eager_met=diff <= 0)
    out["met"] = out["excess_met"] and out.get("eager_met", True)
    return out


def record_fields(timed: dict, *, op: str = "op", bare: str = "bare", eager: str | None = None,
                  bare_name: str, eager_name: str | None = None, eager_goal: bool = True,
                  rounds_us: dict | None = None) -> dict:
    """The keyword arguments of ``results.make_record`` that every host-cost record shares, from
    :func:`timed_calls`' timings: the op's figure (µs per call, the cross-checked timing), the bare
    call as the reference, eager torch (when timed) as a peer, and judged against it where
    ``eager_goal``; with ``rounds_us`` (:func:`timed_calls`' third value) the differences judged
    are the paired ones (:func:`paired_difference`)."""
    t_op, t_bare = timed[op], timed[bare]
    t_eager = timed.get(eager) if eager else None
    paired = {}
    if rounds_us:
        paired["excess_us"] = paired_difference(rounds_us[op], rounds_us[bare])
        if t_eager and eager_goal:
            paired["op_minus_eager_us"] = paired_difference(rounds_us[op], rounds_us[eager])
    fields = dict(
        metric=METRIC, value=t_op.ms * 1e3, unit="us", latency_ms=t_op.ms, timing=t_op,
        reference={"name": bare_name, "value": t_bare.ms * 1e3, "unit": "us", "latency_ms": t_bare.ms,
                   "timing": t_bare.as_dict()},
        host_cost=verdict(t_op.ms * 1e3, t_bare.ms * 1e3, t_eager.ms * 1e3 if t_eager and eager_goal else None,
                          **paired),
    )
    if t_eager is not None:
        fields["peers"] = {"eager_torch": {"name": eager_name, "value": t_eager.ms * 1e3, "unit": "us",
                                           "latency_ms": t_eager.ms, "timing": t_eager.as_dict()}}
    return fields


def correctness(cmp) -> dict:
    """A record's ``correctness`` from a :class:`checks.Comparison` (poisoned output, fp32/fp64
    reference)."""
    return {"rel_error": cmp.rel_error, "max_abs_error": cmp.max_abs_error, "unwritten": cmp.unwritten,
            "nan_written": cmp.nan, "tolerance": cmp.tolerance, "ok": cmp.ok}


def goals(extra: list | None = None) -> list[dict]:
    """The goals stored with a host-cost suite (``report.goals(suite)`` judges them)."""
    return [{"name": f"the call a user makes at most {GOAL_EXCESS_US:g} us above the bare compiled-kernel call",
             "max": GOAL_EXCESS_US, "unit": "us", "metric": "host_cost.excess_us"}] + list(extra or [])


def line(label: str, host: dict, cmp) -> str:
    """One line of a suite's progress output."""
    mine = host.get("op_allocating_us", host["op_us"])
    one = (f", one call {host['one_call_us']:7.2f} us ({host['one_call_over_op']:.2f}x) "
           f"{'✔' if host['one_call_met'] else '✘'}" if "one_call_us" in host else "")
    eager = (f", eager torch {host['eager_us']:7.2f} us vs op {mine:7.2f} us {'✔' if host['eager_met'] else '✘'}"
             if "eager_us" in host else "")
    issue = (f" (issue {host['issue_excess_us']:+6.2f} us)" if "issue_excess_us" in host else "")
    return (f"{label:<34} op {host['op_us']:7.2f} us, bare {host['bare_us']:7.2f} us, "
            f"{host['excess_us']:+6.2f} us {'✔' if host['excess_met'] else '✘'}{issue}{eager}{one}; {cmp}")


def measure_record(*, suite: str, kernel: str, config: dict, shape: dict, dtype: str, label: str,
                   op: Callable[[], object], bare: Callable[[], object], op_check, bare_check,
                   call: str, bare_name: str, eager: Callable[[], object] | None = None,
                   eager_name: str | None = None, eager_goal: bool = True,
                   op_as_eager: Callable[[], object] | None = None, one_call: Callable[[], object] | None = None,
                   one_call_name: str | None = None, notes: dict, **extra) -> dict | None:
    """Time ``op`` (the call a user makes), ``bare`` (the compiled kernel called directly on the
    same inputs) and, where given, ``eager`` (eager torch's call), back to back, interleaved over
    :data:`ROUNDS` rounds (:func:`timed_calls`), and build the record. ``op_check`` /
    ``bare_check``: the :class:`checks.Comparison` of each one's poisoned
    output against the fp32 reference, made in this run before the timing. Where the op's or the
    bare call's two timing methods disagreed in most rounds, the point is left out, with the reason
    in ``notes[label]``; returns None then.

    ``op_as_eager``: the op called the way eager torch's call is made (allocating its output),
    timed too and judged against ``eager`` instead of ``op`` (which writes a given buffer, as the
    bare call does); its figure is ``host_cost.op_allocating_us``.

    ``one_call``: the simplest call of the same op (one function that validates and plans for the
    user, where ``op`` is the planned fast path), timed in the same rounds and judged against ``op``:
    ``host_cost.one_call_over_op`` at most :data:`GOAL_ONE_CALL_RATIO`."""
    from . import results

    calls = {"bare": bare, "op": op}
    if eager is not None:
        calls["eager"] = eager
    if op_as_eager is not None:
        calls["op_as_eager"] = op_as_eager
    if one_call is not None:
        calls["one_call"] = one_call
    timed, failed, rounds_us = timed_calls(calls)
    if "op" not in timed or "bare" not in timed:
        notes[label] = {"not recorded": failed}
        print(f"{label:<34} not recorded: {failed}", flush=True)
        return None
    if failed:
        notes[label] = {"not timed": failed}
    issue = {"op_issue_us": issue_us(op), "bare_issue_us": issue_us(bare)}
    issue["issue_excess_us"] = issue["op_issue_us"] - issue["bare_issue_us"]
    issue["issue_method"] = ("wall clock around 200 calls with no synchronisation inside the loop (host time to "
                             "issue a call; the GPU may still be running), median of 5; one method, context only")
    fields = record_fields(timed, eager="eager" if eager is not None else None, bare_name=bare_name,
                           eager_name=eager_name, eager_goal=eager_goal and op_as_eager is None,
                           rounds_us=rounds_us)
    if op_as_eager is not None and eager_goal:
        host = fields["host_cost"]
        if "op_as_eager" in timed and "eager" in timed:
            mine, theirs = timed["op_as_eager"].ms * 1e3, timed["eager"].ms * 1e3
            diff = paired_difference(rounds_us["op_as_eager"], rounds_us["eager"])
            diff = mine - theirs if diff is None else diff
            host.update(op_allocating_us=mine, op_allocating_timing=timed["op_as_eager"].as_dict(),
                        eager_us=theirs, op_minus_eager_us=diff, op_minus_eager_of_figures_us=mine - theirs,
                        eager_met=diff <= 0)
        host["met"] = host["excess_met"] and host.get("eager_met", False)
    if one_call is not None:
        host = fields["host_cost"]
        if "one_call" in timed:
            mine = timed["one_call"].ms * 1e3
            host.update(one_call=one_call_name, one_call_us=mine, one_call_timing=timed["one_call"].as_dict(),
                        one_call_over_op=mine / host["op_us"], goal_one_call_ratio=GOAL_ONE_CALL_RATIO,
                        one_call_met=mine / host["op_us"] <= GOAL_ONE_CALL_RATIO)
        else:
            host.update(one_call=one_call_name, one_call_met=False)
        host["met"] = host["met"] and host["one_call_met"]
    rec = results.make_record(suite=suite, kernel=kernel, config=config, shape=shape, dtype=dtype,
                              correctness=dict(correctness(op_check), bare_call=correctness(bare_check)),
                              **fields, **extra)
    rec["host_cost"].update(issue)
    rec["host_cost"]["rounds_us"] = rounds_us
    rec["host_cost"]["rounds_method"] = (f"each call timed in {ROUNDS} rounds, the order alternating between "
                                         "rounds; the figure is its median round; excess_us and op_minus_eager_us "
                                         "are the median over rounds of the difference within a round (the "
                                         "difference of the figures: excess_of_figures_us, "
                                         "op_minus_eager_of_figures_us)")
    rec["host_cost"]["met"] = rec["host_cost"]["met"] and bool(op_check.ok)    # a wrong answer meets nothing
    rec["call"] = call
    print(line(label, rec["host_cost"], op_check), flush=True)
    return rec
