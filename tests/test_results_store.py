"""The committed results store: schema, provenance, and no stale records."""
import json

import pytest

from tilelang_tutorial import results

PROV = {"gpu": "NVIDIA H200", "sm_count": 132, "driver": "580", "cuda": "13.0", "torch": "2.11", "triton": "3.6",
        "tilelang": "0.1.15", "python": "3.12", "date": "2026-11-29T00:00:00Z", "command": "test"}


def _record(module="tilelang_tutorial/kernels/scale_copy.py", **over):
    rec = results.make_record(
        suite="tile", kernel="scale_copy", kernel_module=module, config={"block_M": 64}, shape={"M": 8, "N": 8},
        dtype="float16", metric="effective bandwidth", value=4000.0, unit="GB/s", latency_ms=0.1,
        reference={"name": "torch", "value": 2000.0, "unit": "GB/s", "latency_ms": 0.2},
        ceiling={"name": "copy", "value": 4400.0, "unit": "GB/s"}, provenance_info=dict(PROV), floor_ms=0.09,
    )
    rec.update(over)
    return rec


def test_committed_results_follow_the_schema():
    recs = results.load()
    for r in recs:
        results.validate_record(r.data)
        assert r["provenance"]["gpu"], "a recorded figure must name the GPU it was measured on"
        assert r["value"] > 0


def test_no_committed_record_is_stale():
    stale = results.stale_records()
    assert not stale, (
        "recorded GPU results no longer match their kernel source; re-run the benchmark on a GPU "
        "(python -m tilelang_tutorial.bench SUITE) and commit results/:\n"
        + "\n".join(f"  {r['suite']}/{r['kernel']} {r['shape']} ({r['kernel_module']})" for r in stale)
    )


def test_ratios_are_computed_once():
    rec = _record()
    assert rec["ratio_to_reference"] == pytest.approx(2.0)
    assert rec["ratio_to_ceiling"] == pytest.approx(4000 / 4400)


def test_missing_fields_are_rejected():
    rec = _record()
    del rec["provenance"]["tilelang"]
    with pytest.raises(results.ResultsSchemaError, match="tilelang"):
        results.validate_record(rec)
    rec = _record()
    del rec["unit"]
    with pytest.raises(results.ResultsSchemaError, match="unit"):
        results.validate_record(rec)


def test_staleness_follows_the_kernel_source(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    kernel = pkg / "k.py"
    kernel.write_text("def kernel(): return 1\n")
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path / "results")
    results.save("demo", [_record(module="pkg/k.py", suite="demo")])
    assert len(results.find("demo")) == 1 and not results.stale_records()
    kernel.write_text("def kernel(): return 2\n")
    assert results.find("demo") == [], "a stale record must not be served as current"
    assert len(results.find("demo", include_stale=True)) == 1
    assert results.load("demo")[0].label().startswith("STALE")
    assert len(results.stale_records()) == 1


def test_label_carries_provenance():
    label = results.Record(_record()).label()
    for part in ("NVIDIA H200", "2026-11-29", "torch 2.11", "triton 3.6", "tilelang 0.1.15", "scale_copy.py@"):
        assert part in label


def test_schema_is_documented():
    doc = (results.REPO_ROOT / "docs" / "results-schema.md").read_text()
    for field in results.REQUIRED_FIELDS + results.REQUIRED_PROVENANCE:
        assert f"`{field}`" in doc, f"docs/results-schema.md does not document {field}"


def test_files_are_valid_json_with_schema_version():
    for path in results.RESULTS_DIR.glob("*.json"):
        doc = json.loads(path.read_text())
        assert doc["schema"] == results.SCHEMA_VERSION and doc["suite"] == path.stem


def test_committed_sweeps_carry_provenance_and_are_current():
    for path in sorted((results.RESULTS_DIR / "sweeps").glob("*.json")):
        doc = json.loads(path.read_text())
        assert doc["provenance"]["gpu"] and doc["rows"], path.name
        assert doc["source_sha256"] == results.source_sha256(doc["kernel_module"]), (
            f"{path.name} was measured with another version of {doc['kernel_module']}: re-run the sweep on a GPU")
