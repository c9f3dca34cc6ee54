"""The results store: schema, a run per card, staleness by what runs, which run a reader is shown, and
the committed files."""
import importlib
import json
import sys

import pytest

from tilelang_tutorial import lessons, report, results

lessons.all_lessons()   # each lesson registers its suites

PROV = {"gpu": "NVIDIA H200", "arch": "sm_90a", "sm_count": 132, "driver": "580", "cuda": "13.0", "torch": "2.11", "triton": "3.6",
        "tilelang": "0.1.15", "python": "3.12", "date": "2026-11-29T00:00:00Z", "command": "test"}


def _record(**over):
    rec = results.make_record(
        suite="tile", kernel="scale_copy", config={"block_M": 64, "block_N": 128, "threads": 128},
        shape={"M": 8, "N": 128}, dtype="float16", metric="effective bandwidth", value=4000.0, unit="GB/s",
        latency_ms=0.1, nbytes=4e8,
        reference={"name": "torch", "value": 2000.0, "unit": "GB/s", "latency_ms": 0.2},
        ceiling={"name": "copy", "value": 4400.0, "unit": "GB/s"}, floor_ms=0.09,
    )
    rec.update(over)
    return rec


def test_ratios_are_computed_once():
    rec = _record()
    assert rec["ratio_to_reference"] == pytest.approx(2.0)
    assert rec["ratio_to_ceiling"] == pytest.approx(4000 / 4400)


def test_a_record_names_what_it_measured():
    rec = _record()
    assert rec["measured"] == ["TileLang program scale_copy"] and len(rec["fingerprint"]) == 64


def test_missing_fields_are_rejected():
    rec = _record()
    del rec["unit"]
    with pytest.raises(results.ResultsSchemaError, match="unit"):
        results.validate_record(rec)
    doc = {"schema": results.SCHEMA_VERSION, "runs": [{"provenance": dict(PROV), "records": [_record()]}]}
    del doc["runs"][0]["provenance"]["tilelang"]
    with pytest.raises(results.ResultsSchemaError, match="tilelang"):
        results.validate_file(doc)


KERNEL_V1 = '''
"""A demo kernel."""
import tilelang.language as T


def program(N, block=64):
    """Docstring, version 1."""
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):   # a comment
                Y[bx * block + i] = X[bx * block + i] * 2
    return k
'''


@pytest.fixture
def demo_store(tmp_path, monkeypatch):
    """A results directory and a suite ``demo`` whose kernel lives in a module we can edit."""
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "results")
    module = tmp_path / "demo_kernel.py"
    module.write_text(KERNEL_V1)
    monkeypatch.syspath_prepend(str(tmp_path))

    def measured(rec):
        sys.modules.pop("demo_kernel", None)
        return [importlib.import_module("demo_kernel").program(rec["shape"]["N"], **rec["config"])]

    results.register_suite("demo", measured)
    yield module
    results._SUITES.pop("demo", None)
    results._current_fingerprint.cache_clear()
    sys.modules.pop("demo_kernel", None)


TIMING = {"regime": "kernel", "method": "a", "ms": 1.0, "check_method": "b", "check_ms": 1.05,
          "agreement": 1.05, "calls": 10}


def _save_demo(value=1.0, **prov):
    rec = results.make_record(suite="demo", kernel="k", config={"block": 64}, shape={"N": 1000}, dtype="float32",
                              metric="effective bandwidth", value=value, unit="GB/s", latency_ms=1.0,
                              timing=dict(TIMING))
    results.save("demo", [rec], provenance_info=dict(PROV, **prov))


def _edit_the_kernel(module):
    module.write_text(KERNEL_V1.replace("threads=128", "threads=256"))
    results._current_fingerprint.cache_clear()


def test_comment_and_docstring_edits_keep_records_current(demo_store):
    _save_demo()
    assert len(results.find("demo")) == 1
    demo_store.write_text(KERNEL_V1.replace("Docstring, version 1.", "Docstring, reworded.")
                          .replace("# a comment", "# another comment").replace('"""A demo kernel."""', ""))
    results._current_fingerprint.cache_clear()
    assert len(results.find("demo")) == 1 and not results.stale_records("demo")


def test_changing_what_runs_makes_records_stale(demo_store):
    _save_demo()
    _edit_the_kernel(demo_store)
    assert results.find("demo") == [], "a stale record must not be served as current"
    (stale,) = results.find("demo", include_stale=True)
    assert "has changed since" in stale.staleness and stale.label().startswith("STALE")


def test_a_stale_record_is_labelled_never_shown_and_listed_for_bench_stale(demo_store):
    _save_demo()
    assert results.stale_suites(["demo"]) == []
    _edit_the_kernel(demo_store)
    assert report.records("demo") == [] and report.footnote("demo") == ""
    text = report.table_text("demo")
    assert "0 current record(s)" in text and "1 not shown because they are stale" in text
    assert "bench --stale" in text and "GB/s" not in text, "the figure itself is not shown"
    assert results.stale_suites(["demo"]) == ["demo"]


def test_each_card_keeps_its_run_and_the_reader_sees_their_cards_else_the_latest_hopper(demo_store, monkeypatch):
    _save_demo(1.0, gpu="NVIDIA H200", date="2026-11-29T00:00:00Z")
    _save_demo(2.0, gpu="NVIDIA H100 80GB HBM3", date="2026-12-02T00:00:00Z")
    _save_demo(3.0, gpu="NVIDIA B200", arch="sm_100a", date="2026-12-03T00:00:00Z")
    _save_demo(1.5, gpu="NVIDIA H200", date="2026-11-30T00:00:00Z")         # replaces the H200's run
    assert sorted(r.card for r in results.load_runs("demo")) == ["NVIDIA B200", "NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    for card, value, shown in ((None, 2.0, "NVIDIA H100 80GB HBM3"),       # no GPU: the latest Hopper run
                               ("NVIDIA H200", 1.5, "NVIDIA H200"),         # the reader's own card
                               ("NVIDIA B200", 3.0, "NVIDIA B200"),
                               ("NVIDIA A100-SXM4-80GB", 2.0, "NVIDIA H100 80GB HBM3")):
        monkeypatch.setattr(report, "reader_card", lambda card=card: card)
        (rec,) = report.records("demo")
        assert rec["value"] == value and f"recorded on {shown}" in rec.label()
        assert f"recorded on {shown}" in report.table_text("demo") and shown in report.status("demo")


def test_recording_on_one_card_drops_the_stale_records_of_the_others(demo_store):
    _save_demo(1.0, gpu="NVIDIA H200")
    _edit_the_kernel(demo_store)
    _save_demo(2.0, gpu="NVIDIA H100 80GB HBM3")
    assert [r.card for r in results.load_runs("demo")] == ["NVIDIA H100 80GB HBM3"]
    assert results.stale_suites(["demo"]) == []


def test_a_file_of_one_run_reads_as_a_hopper_run(demo_store):
    _save_demo()
    doc = json.loads(results.results_file("demo").read_text())
    (run,) = doc["runs"]
    del run["provenance"]["arch"]
    results.results_file("demo").write_text(json.dumps(dict(run, schema=2, suite="demo")))
    (read,) = results.load_runs("demo")
    assert read.provenance["arch"] == "sm_90a" and len(read.records) == 1 and report.records("demo")


def test_a_record_measures_the_program_its_configuration_builds_and_no_other(demo_store):
    _save_demo()
    (rec,) = results.find("demo")
    demo = importlib.import_module("demo_kernel")
    assert results.measures(rec, demo.program(1000, block=64))
    assert not results.measures(rec, demo.program(1000, block=128))
    assert not results.measures(rec, demo.program(2000, block=64))


def test_a_record_of_another_config_is_judged_by_its_own_config(demo_store):
    _save_demo()
    doc = json.loads(results.results_file("demo").read_text())
    doc["runs"][0]["records"][0]["config"]["block"] = 128          # the program of block=128 is another program
    results.results_file("demo").write_text(json.dumps(doc))
    results._current_fingerprint.cache_clear()
    assert results.find("demo") == []


def test_a_figure_whose_two_timings_disagree_cannot_be_recorded():
    rec = _record(latency_ms=1.0)
    rec["timing"] = dict(TIMING, check_ms=1.2, agreement=1.2)
    with pytest.raises(results.ResultsSchemaError, match="disagree"):
        results.validate_record(rec)
    rec["timing"] = dict(TIMING, ms=0.5, check_ms=0.5)             # the figure is not the one that was checked
    with pytest.raises(results.ResultsSchemaError, match="cross-checked"):
        results.validate_record(rec)


def test_new_records_must_be_cross_checked(demo_store):
    rec = results.make_record(suite="demo", kernel="k", config={"block": 64}, shape={"N": 1000}, dtype="float32",
                              metric="effective bandwidth", value=1.0, unit="GB/s", latency_ms=1.0)
    with pytest.raises(results.ResultsSchemaError, match="no cross-checked timing"):
        results.save("demo", [rec], provenance_info=dict(PROV))


def test_committed_cross_checks_agree():
    """Every committed figure that was timed two ways was within the tolerance (validate_record)
    and its latency is the checked one; the suites re-recorded in this design are all checked."""
    lessons.all_lessons()
    checked = 0
    for rec in results.load():
        results.check_timing(rec.data)
        checked += results.is_cross_checked(rec.data)
    assert checked > 0, "no committed record carries a cross-checked timing"


def test_label_carries_provenance():
    label = results.Record(_record(), PROV).label()
    for part in ("NVIDIA H200", "2026-11-29", "torch 2.11", "triton 3.6", "tilelang 0.1.15", "test"):
        assert part in label


def test_schema_is_documented():
    doc = (results.REPO_ROOT / "docs" / "results-schema.md").read_text()
    for name in results.REQUIRED_FIELDS + results.REQUIRED_PROVENANCE:
        assert f"`{name}`" in doc, f"docs/results-schema.md does not document {name}"


# ------------------------------------------------------------------------------------------------
# The committed files
# ------------------------------------------------------------------------------------------------

def test_committed_files_follow_the_schema():
    lessons.all_lessons()
    for path in results.RESULTS_DIR.glob("*.json"):
        doc = results.load_file(path.stem)        # validated
        assert doc["suite"] == path.stem and doc["runs"]
        for run in results.load_runs(path.stem):
            assert run.card and run.provenance["arch"] and all(r["value"] > 0 for r in run.records)


def test_every_suite_has_a_file_and_every_file_a_suite():
    suites = set(lessons.suites())
    files = {p.stem for p in results.RESULTS_DIR.glob("*.json")}
    assert files <= suites, f"results files no lesson owns: {files - suites}"
    assert suites <= files, f"suites never recorded (python -m tilelang_tutorial bench --stale): {suites - files}"


def test_code_fingerprints_do_not_depend_on_the_python_version():
    """Records are measured on the GPU runner's Python (3.12) and checked on a reader's (3.10+):
    fields later Pythons add to the AST, and 3.12.1's empty constants in nested format specs, must
    not change a fingerprint."""
    import ast

    a = ast.parse("def f(x):\n    return f'{x:>{8}}'\n")
    b = ast.parse("def f(x):\n    return f'{x:>{8}}'\n")
    spec = b.body[0].body[0].value.values[0].format_spec
    spec.values.append(ast.Constant(""))                  # what Python 3.12.1 produces
    b.body[0].type_params = []                            # what Python 3.12 adds
    assert results._canonical(a) == results._canonical(b)
    c = ast.parse("def f(x):\n    return f'{x:<{8}}'\n")
    assert results._canonical(a) != results._canonical(c), "a real change must still change it"
