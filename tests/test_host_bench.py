"""The host-cost suites: tile_host, gemm_host, rmsnorm_host, mla_host.

On CPU: the suites are registered and listed, what their records measure rebuilds (programs and
the ops' Python code), and the record logic (excess, goals, a disagreement left out) on timings
given by hand. On a GPU: each suite runs (quick) and its outputs check."""
import io
import contextlib

import pytest

from tilelang_tutorial import host_cost, lessons, report, results, timing

lessons.all_lessons()

HOST_SUITES = ("tile_host", "gemm_host", "rmsnorm_host", "mla_host")
PROV = {"gpu": "NVIDIA H200", "arch": "sm_90a", "sm_count": 132, "driver": "580", "cuda": "13.0", "torch": "2.11", "triton": "3.6",
        "tilelang": "0.1.15", "python": "3.12", "date": "2026-12-01T00:00:00Z", "command": "test"}


def test_host_suites_are_registered_and_listed():
    suites = lessons.suites()
    for s in HOST_SUITES:
        assert s in suites and s in results.registered_suites(), s
        assert callable(lessons.suite_runner(s))
    from tilelang_tutorial.__main__ import bench

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert bench(list(HOST_SUITES), quick=False, dry_run=True, list_only=True) == 0
    for s in HOST_SUITES:
        assert f"[list] {s}:" in buf.getvalue()


def _names(suite, rec):
    rec = dict(rec, suite=suite)
    return [results.describe_measured(m) for m in results._SUITES[suite](rec)]


def test_tile_host_records_measure_the_program_and_the_op():
    from tilelang_tutorial.lessons.tiles import host_bench, row_sum, scale_copy

    for kernel, factory, op in (("scale_copy", scale_copy.scale_copy_program, scale_copy.scale_copy),
                                ("row_sum", row_sum.row_sum_program, row_sum.row_sum)):
        rec = {"kernel": kernel, "config": host_bench.default_config(factory), "shape": {"M": 1, "N": 4096},
               "dtype": "float16"}
        module = scale_copy if kernel == "scale_copy" else row_sum
        assert _names("tile_host", rec) == [f"TileLang program {kernel}", results.describe_measured(op),
                                            results.describe_measured(module._call_key)]
        # the op's Python code is part of what was measured: a record of the program alone differs
        assert results.fingerprint(results._SUITES["tile_host"](rec)) != results.fingerprint(
            [factory(4096, dtype="float16", **rec["config"])])
    assert len(host_bench.points()) == 4


def test_gemm_host_records_measure_the_chosen_kernels_and_the_op():
    from tilelang_tutorial.lessons.gemm import host_bench, rule

    for M, N, K in host_bench.POINTS:
        choice = rule.choose(M, N, K, "float16", arch="sm_90a")
        rec = {"kernel": "gemm_relu", "shape": {"M": M, "N": N, "K": K}, "dtype": "float16",
               "config": {**choice.config.as_dict(), "split": choice.split, "candidate": choice.name}}
        names = _names("gemm_host", rec)
        assert sum(n.startswith("TileLang program") for n in names) == (2 if choice.split > 1 else 1)
        assert any(n.endswith("op.gemm_relu") for n in names)
        assert any(n.endswith("rule.choose") for n in names)


def test_rmsnorm_host_covers_the_goal_grid_and_both_paths():
    from tilelang_tutorial.lessons.rmsnorm import dispatch, host_bench
    from tilelang_tutorial.lessons.rmsnorm import op as rms_op

    pts = host_bench.points()
    assert {M for M, _ in pts} == {1, 2048, 16384}
    assert {C for _, C in pts} == {96, 160, 320, 640, 1024, 4096, 8192} and len(pts) == 21
    assert dispatch.which_path(192) == "triton" and dispatch.which_path(320) == "tilelang"
    triton = {"kernel": "fused_rmsnorm_silu", "shape": {"M": 1, "C": 96}, "dtype": "float16",
              "config": {"path": "triton", "triton_config": {"BLOCK_C": 128, "ROWS": 16, "num_warps": 4}}}
    names = _names("rmsnorm_host", triton)
    assert not any(n.startswith("TileLang program") for n in names)
    assert any("rmsnorm_silu_triton" in n for n in names) and any("fused_rmsnorm_silu" in n for n in names)
    cfg = rms_op.config_for(320, "float16")
    tl = {"kernel": "fused_rmsnorm_silu", "shape": {"M": 1, "C": 320}, "dtype": "float16",
          "config": {"path": "tilelang", "kernel_config": {"group": cfg.group, "threads": cfg.threads,
                                                           "rows_per_thread": cfg.rows_per_thread}}}
    names = _names("rmsnorm_host", tl)
    assert names[0].startswith("TileLang program") and sum(n.startswith("TileLang program") for n in names) == 1
    assert any(n.endswith("validate_rmsnorm_silu_inputs") for n in names)


def test_mla_host_records_measure_the_program_and_plan_run():
    from tilelang_tutorial.lessons.mla.common import default_softmax_scale
    from tilelang_tutorial.lessons.mla import op

    rec = {"kernel": "mla_decode", "shape": {"batch": 1, "h_q": 128, "kv_len": 8192}, "dtype": "float16",
           "config": {"num_split": 4, "schedule": op.resolve_schedule(None, "sm_90a"), "path": "plan.run",
                      "softmax_scale": default_softmax_scale(), "arch": "sm_90a"}}
    names = _names("mla_host", rec)
    assert names[0].startswith("TileLang program")
    assert any(n.endswith("MLADecodePlan.run") for n in names) and any(n.endswith("MLADecodePlan._check") for n in names)


# ------------------------------------------------------------------------------------------------
# The record logic, on timings given by hand
# ------------------------------------------------------------------------------------------------

def _timing(us, check_us=None):
    check_us = us if check_us is None else check_us
    return timing.Timing(ms=us / 1e3, method="events", check_ms=check_us / 1e3, check_method="wall",
                         regime="call", calls=100)


class _Cmp:
    rel_error, max_abs_error, unwritten, tolerance, nan, ok = 1e-4, 1e-3, 0, 2e-3, 0, True

    def __str__(self):
        return "OK"


@pytest.fixture
def fake_suite(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "results")
    results.register_suite("host_demo", lambda rec: ["demo op code"])
    yield
    results._SUITES.pop("host_demo", None)
    results._current_fingerprint.cache_clear()


def _fake_times(monkeypatch, times):
    """``times``: {callable: microseconds or None (the two methods disagreed)}; the issue time
    (no synchronisation) is half of it."""
    monkeypatch.setattr(host_cost, "issue_us", lambda fn, **kw: times[fn] / 2)
    def measure_or_note(fn, *, regime="kernel", tolerance=timing.DEFAULT_TOLERANCE):
        assert regime == "call", "host cost is timed back to back, host time counted"
        us = times[fn]
        return (None, "timing methods disagree") if us is None else (_timing(us), None)
    monkeypatch.setattr(timing, "measure_or_note", measure_or_note)


def _measure(notes, **kw):
    return host_cost.measure_record(suite="host_demo", kernel="op", config={}, shape={"M": 1}, dtype="float16",
                                    label="demo", op_check=_Cmp(), bare_check=_Cmp(), call="op(x)",
                                    bare_name="kernel(x)", notes=notes, **kw)


def test_a_record_holds_the_op_the_bare_call_and_the_difference(fake_suite, monkeypatch):
    def op(): pass
    def bare(): pass
    _fake_times(monkeypatch, {op: 12.0, bare: 10.0})
    rec = _measure({}, op=op, bare=bare)
    assert rec["value"] == pytest.approx(12.0) and rec["unit"] == "us"
    assert rec["reference"]["value"] == pytest.approx(10.0) and rec["ratio_to_reference"] == pytest.approx(1.2)
    h = rec["host_cost"]
    assert h["excess_us"] == pytest.approx(2.0) and h["excess_met"] and h["met"]
    assert h["op_issue_us"] == pytest.approx(6.0) and h["issue_excess_us"] == pytest.approx(1.0)
    assert rec["correctness"]["ok"] and rec["correctness"]["bare_call"]["ok"]
    _fake_times(monkeypatch, {op: 14.5, bare: 10.0})
    assert not _measure({}, op=op, bare=bare)["host_cost"]["met"]
    _fake_times(monkeypatch, {op: 12.0, bare: 10.0})
    wrong = _Cmp()
    wrong.ok = False
    rec = host_cost.measure_record(suite="host_demo", kernel="op", config={}, shape={"M": 1}, dtype="float16",
                                   label="demo", op_check=wrong, bare_check=_Cmp(), call="op(x)",
                                   bare_name="kernel(x)", notes={}, op=op, bare=bare)
    assert rec["host_cost"]["excess_met"] and not rec["host_cost"]["met"], "a wrong answer meets no goal"


def test_the_drop_in_is_judged_against_eager_torch_in_its_own_form(fake_suite, monkeypatch):
    def op(): pass
    def bare(): pass
    def allocating(): pass
    def eager(): pass
    _fake_times(monkeypatch, {op: 11.0, bare: 10.0, allocating: 13.0, eager: 12.0})
    rec = _measure({}, op=op, bare=bare, op_as_eager=allocating, eager=eager, eager_name="torch")
    h = rec["host_cost"]
    assert h["excess_met"] and h["op_allocating_us"] == pytest.approx(13.0)
    assert h["op_minus_eager_us"] == pytest.approx(1.0) and not h["eager_met"] and not h["met"]
    assert rec["peers"]["eager_torch"]["value"] == pytest.approx(12.0)
    _fake_times(monkeypatch, {op: 11.0, bare: 10.0, allocating: 13.0, eager: None})
    notes = {}
    rec = _measure(notes, op=op, bare=bare, op_as_eager=allocating, eager=eager, eager_name="torch")
    assert "eager_met" not in rec["host_cost"] and not rec["host_cost"]["met"], "an unmeasured goal is not met"
    assert "eager" in notes["demo"]["not timed"]


def test_a_call_whose_timings_disagree_is_left_out_with_the_reason(fake_suite, monkeypatch):
    def op(): pass
    def bare(): pass
    _fake_times(monkeypatch, {op: None, bare: 10.0})
    notes = {}
    assert _measure(notes, op=op, bare=bare) is None
    assert "disagree" in notes["demo"]["not recorded"]["op"]


def test_calls_are_timed_in_alternating_rounds_so_a_drift_does_not_land_on_one(fake_suite, monkeypatch):
    """A GPU that slows with every timing (a clock drifting under load) made the call timed second
    look slower; timed in rounds whose order alternates, two equal calls come out equal."""
    def op(): pass
    def bare(): pass
    order = []
    monkeypatch.setattr(host_cost, "issue_us", lambda fn, **kw: 5.0)

    def drifting(fn, *, regime="kernel", tolerance=timing.DEFAULT_TOLERANCE):
        order.append(fn)
        return _timing(10.0 + len(order)), None     # the same call, 1 us slower each time it is timed
    monkeypatch.setattr(timing, "measure_or_note", drifting)
    rec = _measure({}, op=op, bare=bare)
    rounds = host_cost.ROUNDS
    assert rounds >= 3 and rounds % 2 == 1, "an odd number of rounds: the median is one of them"
    assert order == [bare, op, op, bare] * (rounds // 2) + [bare, op], "each call is timed first and last in turn"
    h = rec["host_cost"]
    assert len(h["rounds_us"]["op"]) == len(h["rounds_us"]["bare"]) == rounds
    assert abs(h["excess_us"]) <= 1.0, "timed once each, one after the other, the op would read 1 us slower"
    # a minority of rounds whose methods disagreed still gives a figure; a majority does not
    seen = []

    def flaky(fn, *, regime="kernel", tolerance=timing.DEFAULT_TOLERANCE):
        seen.append(fn)
        if fn is op and seen.count(op) <= rounds // 2 + 1:
            return None, "timing methods disagree"
        return _timing(10.0), None
    monkeypatch.setattr(timing, "measure_or_note", flaky)
    notes = {}
    assert _measure(notes, op=op, bare=bare) is None and "disagree" in notes["demo"]["not recorded"]["op"]
    seen.clear()

    def once(fn, *, regime="kernel", tolerance=timing.DEFAULT_TOLERANCE):
        seen.append(fn)
        return (None, "timing methods disagree") if fn is op and seen.count(op) == 1 else (_timing(10.0), None)
    monkeypatch.setattr(timing, "measure_or_note", once)
    rec = _measure({}, op=op, bare=bare)
    assert rec["host_cost"]["rounds_us"]["op"] == [None] + [10.0] * (rounds - 1) and rec["value"] == pytest.approx(10.0)


def test_the_excess_is_the_median_of_each_rounds_own_difference(fake_suite, monkeypatch):
    """A host that switches between two speeds between rounds (the drop-in at M = 1, C = 4096): the
    difference of the two calls' median rounds took one call's
    slow round and the other's fast one, +3.1 us, where the rounds' own differences are 1.7-3.3 us
    and their median 2.3 us. The record judges the paired figure and keeps the other."""
    def op(): pass
    def bare(): pass
    rounds = {op: [14.5, 14.5, 14.3, 9.5, 9.5], bare: [11.2, 11.4, 12.0, 7.8, 7.8]}
    assert host_cost.ROUNDS == 5
    monkeypatch.setattr(host_cost, "issue_us", lambda fn, **kw: 5.0)
    seen = []

    def by_round(fn, *, regime="kernel", tolerance=timing.DEFAULT_TOLERANCE):
        seen.append(fn)
        return _timing(rounds[fn][seen.count(fn) - 1]), None
    monkeypatch.setattr(timing, "measure_or_note", by_round)
    h = _measure({}, op=op, bare=bare)["host_cost"]
    assert h["op_us"] == pytest.approx(14.3) and h["bare_us"] == pytest.approx(11.2)
    assert h["excess_of_figures_us"] == pytest.approx(3.1)
    assert h["excess_us"] == pytest.approx(2.3) and h["excess_met"]
    assert host_cost.paired_difference([1.0, None, 3.0], [0.5, 1.0, None]) is None, "fewer than half the rounds"
    assert host_cost.paired_difference([1.0, None, 3.0, 4.0], [0.5, 1.0, 2.0, 3.0]) == pytest.approx(1.0)


def test_records_save_and_the_goals_are_judged(fake_suite, monkeypatch):
    def op(): pass
    def bare(): pass
    _fake_times(monkeypatch, {op: 12.0, bare: 10.0})
    met = _measure({}, op=op, bare=bare)
    _fake_times(monkeypatch, {op: 15.0, bare: 10.0})
    missed = dict(_measure({}, op=op, bare=bare), shape={"M": 2})
    results.save("host_demo", [met, missed], provenance_info=dict(PROV), goals=host_cost.goals())
    (g,) = report.goal_results("host_demo")
    assert g.met is False and sorted(g.values) == pytest.approx([2.0, 5.0])
    results.save("host_demo", [met], provenance_info=dict(PROV), goals=host_cost.goals())
    (g,) = report.goal_results("host_demo")
    assert g.met is True
    text = report.table_text("host_demo", columns=["shape.M", "value", "host_cost.bare_us", "host_cost.excess_us"])
    assert "12" in text and "10" in text and "NVIDIA H200" in text
    assert "host_demo" in report.table_text("host_demo") or "12" in report.table_text("host_demo")


def test_a_computed_column_shows_a_dash_where_a_record_lacks_what_it_reads(fake_suite, monkeypatch):
    """A peer that was not timed keeps its reason instead of a value: a table computing a ratio
    from it shows "-" in that row (as a dotted path does) instead of failing the reader's cell."""
    def op(): pass
    def bare(): pass
    _fake_times(monkeypatch, {op: 12.0, bare: 10.0})
    timed = dict(_measure({}, op=op, bare=bare), peers={"other": {"value": 6.0, "unit": "us"}})
    untimed = dict(_measure({}, op=op, bare=bare), shape={"M": 2}, peers={"other": {"error": "methods disagree"}})
    results.save("host_demo", [timed, untimed], provenance_info=dict(PROV), goals=host_cost.goals())
    text = report.table_text("host_demo", columns=["shape.M", ("other", "peers.other.value"),
                                                   ("ratio", lambda r: r["value"] / r["peers"]["other"]["value"])])
    rows = [line.split() for line in text.splitlines() if line[:1].strip() in ("1", "2")]
    assert rows == [["1", "6", "2"], ["2", "-", "-"]], text
    with pytest.raises(ZeroDivisionError):           # a column's own error is not hidden
        report.table_text("host_demo", columns=[("bad", lambda r: 1 / 0)])


# ------------------------------------------------------------------------------------------------
# On the GPU
# ------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("suite", HOST_SUITES)
def test_host_suite_runs_and_checks_on_the_gpu(suite, monkeypatch):
    """Every point's op and bare call are checked against the reference; each point is recorded,
    or -- on a busy GPU (the suite under many test workers), where the wall clock and the CUDA
    events disagree -- left out with that reason, never recorded with a doubtful figure."""
    checked = {}
    measure_record = host_cost.measure_record

    def spy(**kw):
        checked[kw["label"]] = (kw["op_check"], kw["bare_check"])
        return measure_record(**kw)
    monkeypatch.setattr(host_cost, "measure_record", spy)
    run = lessons.suite_runner(suite)(quick=True)
    assert checked, f"{suite}: no point was measured"
    for label, (op_check, bare_check) in checked.items():
        assert op_check.ok and bare_check.ok, (label, str(op_check), str(bare_check))
    left_out = {label: note["not recorded"] for label, note in run.notes.items() if "not recorded" in note}
    for label, why in left_out.items():
        assert why and all("disagree" in reason for reason in why.values()), (label, why)
    assert len(run.records) + len(left_out) == len(checked), (len(run.records), left_out)
    for rec in run.records:
        results.validate_record(rec)
        assert rec["correctness"]["ok"] and rec["correctness"]["bare_call"]["ok"], rec["correctness"]
        h = rec["host_cost"]
        assert h["bare_us"] > 0 and h["op_us"] == pytest.approx(rec["value"])
        assert h["op_issue_us"] > 0 and h["bare_issue_us"] > 0
        assert rec["timing"]["regime"] == "call"
        assert results.current_fingerprint(rec) == rec["fingerprint"]


# ------------------------------------------------------------------------------------------------
# Each suite's run() on CPU, with stand-in kernels and timings: the glue (inputs, checks, calls,
# records, fingerprints) runs as it will on the GPU; only the kernels and the clocks are fake.
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def on_cpu(monkeypatch):
    import torch

    from tilelang_tutorial import checks, runtime

    # the ops check their tensors against the mode's device: make a GPU machine take CPU tensors too
    runtime.force_emulation(True)
    random_tensor, poisoned = checks.random_tensor, checks.poisoned
    monkeypatch.setattr(checks, "random_tensor", lambda shape, dtype, device, **kw: random_tensor(shape, dtype, "cpu", **kw))
    monkeypatch.setattr(checks, "poisoned", lambda shape, dtype, device: poisoned(shape, dtype, "cpu"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(results, "provenance", lambda command: dict(PROV, command=command))
    monkeypatch.setattr(runtime, "run", lambda kernel, *args, **scalars: kernel(*args, *scalars.values()))
    monkeypatch.setattr(runtime, "launcher", lambda kernel, emulator_checks=None: kernel)
    called = []

    def measure_or_note(fn, *, regime="kernel", tolerance=timing.DEFAULT_TOLERANCE):
        assert regime == "call"
        fn()                                   # each timed callable runs
        called.append(fn)
        return _timing(10.0 + len(called)), None
    monkeypatch.setattr(timing, "measure_or_note", measure_or_note)

    def issue_us(fn, **kw):
        fn()
        return 5.0
    monkeypatch.setattr(host_cost, "issue_us", issue_us)
    yield called
    runtime.force_emulation(None)


def _check_run(run, n_points, calls_per_point, called):
    assert len(run.records) == n_points and not run.notes
    assert len(called) == n_points * calls_per_point * host_cost.ROUNDS
    for rec in run.records:
        results.validate_record(rec)
        assert rec["correctness"]["ok"] and rec["correctness"]["bare_call"]["ok"], rec["correctness"]
        # what the record says it measured is what its suite rebuilds from it (no cache: a test
        # below replaces a function the record fingerprints)
        assert results.fingerprint(results._SUITES[rec["suite"]](rec)) == rec["fingerprint"]
        # each timing 1 us slower than the one before; op timed next to bare in every round, the
        # order reversed in every other one: the median rounds differ by at most one timing's drift
        assert abs(rec["host_cost"]["excess_us"]) <= 1.0 + 1e-9
    assert run.goals and run.goals[0]["metric"] == "host_cost.excess_us"


def test_tile_host_run_glue(on_cpu, monkeypatch):
    from tilelang_tutorial.lessons.tiles import host_bench, row_sum, scale_copy

    monkeypatch.setattr(host_bench, "SHAPES", [(3, 256)])
    monkeypatch.setattr(scale_copy, "build_scale_copy", lambda N, **kw: lambda x, y, a: y.copy_(x * a))
    monkeypatch.setattr(row_sum, "build_row_sum", lambda N, **kw: lambda x, s: s.copy_(x.float().sum(1)))
    _check_run(host_bench.run(quick=True), 2, 2, on_cpu)


@pytest.mark.parametrize("split", [1, 2])
def test_gemm_host_run_glue(on_cpu, monkeypatch, split):
    import dataclasses

    import torch

    from tilelang_tutorial.lessons.gemm import host_bench, op, rule, split_k

    choose = rule.choose
    monkeypatch.setattr(rule, "choose", lambda *a, **kw: dataclasses.replace(choose(*a, **kw), split=split))

    monkeypatch.setattr(host_bench, "POINTS", [(1, 256, 512), (64, 256, 512)])
    monkeypatch.setattr(op, "build_gemm_relu",
                        lambda N, K, **kw: lambda a, b, c: c.copy_(torch.relu(a.float() @ b.float())))

    def pair(N, K, split, config, dtype, arch=None, partial_program=None):
        def partial(a, b, w):
            w.zero_()
            w[0] = a.float() @ b.float()
        return partial, lambda w, out: out.copy_(torch.relu(w.sum(0)))
    monkeypatch.setattr(split_k, "build_split_k", pair)
    run = host_bench.run()
    _check_run(run, 2, 3, on_cpu)
    assert all(r["config"]["split"] == split for r in run.records)
    assert all(sum(m.startswith("TileLang program") for m in r["measured"]) == split for r in run.records)
    assert all("eager_met" not in r["host_cost"] and "eager_torch" in r["peers"] for r in run.records)


def test_rmsnorm_host_run_glue(on_cpu, monkeypatch):
    from tilelang_tutorial.lessons.rmsnorm import host_bench, kernel
    from tilelang_tutorial.lessons.rmsnorm import op as rms_op

    monkeypatch.setattr(host_bench, "points", lambda quick=False: [(3, 320), (1, 640)])

    def fake_build(C, dtype="float16", config=None, arch=None):
        def k(x2d, gamma, y2d, eps):
            y2d.copy_(kernel.rmsnorm_silu_reference(x2d, gamma, eps))
        return k
    monkeypatch.setattr(rms_op, "build_rmsnorm_silu", fake_build)
    run = host_bench.run()
    _check_run(run, 2, 4, on_cpu)
    for rec in run.records:
        h = rec["host_cost"]
        assert {"op_allocating_us", "eager_us", "op_minus_eager_us", "eager_met"} <= set(h)
        assert rec["config"]["path"] == "tilelang" and "block_m" not in rec["config"]["kernel_config"]
    assert [g["metric"] for g in run.goals] == ["host_cost.excess_us", "host_cost.op_minus_eager_us"]


def test_mla_host_run_glue(on_cpu, monkeypatch):
    from tilelang_tutorial.lessons.mla import host_bench, op
    from tilelang_tutorial.lessons.mla.common import DIM_NOPE, DIM_PE, PAGE_SIZE
    from tilelang_tutorial.lessons.mla.reference import mla_decode_reference

    make = host_bench.make_paged_inputs
    monkeypatch.setattr(host_bench, "make_paged_inputs", lambda *a, device, **kw: make(*a, device="cpu", **kw))
    monkeypatch.setattr(host_bench, "POINTS", [("b1", 1, 16, 100, "float16"), ("ragged", 3, 16, (130, "ragged"), "float16")])

    def fake_build(h_q, dtype, **kw):
        def k(q_nope, q_pe, kv, pe, block_table, seqlens, lse, o_partial, out):
            out.copy_(mla_decode_reference(q_nope, q_pe, kv.view(-1, PAGE_SIZE, 1, DIM_NOPE),
                                           pe.view(-1, PAGE_SIZE, 1, DIM_PE), block_table, seqlens))
        return k
    monkeypatch.setattr(op, "build_mla_decode", fake_build)
    monkeypatch.setattr(op, "prebuild", lambda configs: None)
    run = host_bench.run()
    _check_run(run, 2, 3, on_cpu)          # plan.run, its bare kernel, mla_decode
    assert all(r["config"]["path"] == "plan.run and mla_decode" and r["correctness"]["checked_sequences"] >= 1
               for r in run.records)
    assert all(r["host_cost"]["one_call_over_op"] > 0 for r in run.records)
    assert [g["metric"] for g in run.goals] == ["host_cost.excess_us", "host_cost.one_call_over_op"]
