"""The recorded-results store: GPU measurements committed to ``results/*.json``.

A record says *what* was measured and *where/with what*. Its ``source_sha256`` is the hash of
the kernel module that produced it; when that module changes, the record is **stale**: it is
never shown as current, and ``tests/test_results_store.py`` fails until the benchmark is re-run
on a GPU and the file re-committed. The schema is documented in ``docs/results-schema.md``.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

SCHEMA_VERSION = 1
PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
RESULTS_DIR = REPO_ROOT / "results"

#: Fields every record must carry (the schema's required keys).
REQUIRED_FIELDS = (
    "suite", "kernel", "config", "shape", "dtype", "metric", "value", "unit",
    "latency_ms", "reference", "ceiling", "ratio_to_reference", "ratio_to_ceiling",
    "kernel_module", "source_sha256", "provenance",
)
REQUIRED_PROVENANCE = ("gpu", "driver", "cuda", "torch", "triton", "tilelang", "date", "command")


class ResultsSchemaError(ValueError):
    """A results file or record that does not follow the documented schema."""


#: ``kernel_module`` may name several files joined by this separator -- a kernel module first,
#: then the modules it builds on -- and the hash then covers all of them, so a change in a
#: shared helper makes the records that used it stale too.
MODULE_SEP = "+"


def module_path(kernel_module: str) -> Path:
    """``tilelang_tutorial/kernels/gemm_relu.py`` (repo-relative) -> absolute path."""
    path = (REPO_ROOT / kernel_module).resolve()
    if not path.is_file():
        raise ResultsSchemaError(f"kernel module {kernel_module!r} does not exist under {REPO_ROOT}")
    return path


def source_sha256(kernel_module: str) -> str:
    """Hash of a kernel module's text (of the texts, in order, for ``a.py+b.py``): what a record
    was measured with."""
    texts = [module_path(m).read_text(encoding="utf-8") for m in kernel_module.split(MODULE_SEP)]
    # Normalise line endings so a checkout on Windows does not make every record stale.
    return hashlib.sha256("\0".join(t.replace("\r\n", "\n") for t in texts).encode("utf-8")).hexdigest()


def module_of(*objs: Any) -> str:
    """Repo-relative path of the module that defines ``obj`` (a function or a module); for several
    objects, their modules joined by :data:`MODULE_SEP`."""
    import inspect

    paths = [Path(inspect.getsourcefile(o)).resolve().relative_to(REPO_ROOT).as_posix() for o in objs]
    return MODULE_SEP.join(dict.fromkeys(paths))


def provenance(command: str) -> dict[str, Any]:
    """Where and with what a measurement is being taken (call on the GPU machine)."""
    import torch

    import tilelang

    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # triton is optional on CPU
        triton_version = None
    gpu = driver = None
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
        try:
            import subprocess

            driver = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20,
            ).stdout.strip().splitlines()[0]
        except Exception:
            driver = None
    return {
        "gpu": gpu,
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count if gpu else None,
        "driver": driver,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton_version,
        "tilelang": tilelang.__version__,
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
    }


@dataclass
class Record:
    """One measured figure. ``data`` holds the JSON object as stored."""

    data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def is_stale(self) -> bool:
        try:
            return source_sha256(self.data["kernel_module"]) != self.data["source_sha256"]
        except ResultsSchemaError:
            return True

    def matches(self, **criteria: Any) -> bool:
        for key, want in criteria.items():
            have = self.data.get(key)
            if isinstance(want, dict):
                if not isinstance(have, dict) or any(have.get(k) != v for k, v in want.items()):
                    return False
            elif have != want:
                return False
        return True

    def label(self) -> str:
        """The provenance line shown under every recorded figure."""
        p = self.data["provenance"]
        state = "STALE: kernel source changed since" if self.is_stale else "recorded"
        return (
            f"{state} on {p['gpu']} (driver {p['driver']}, CUDA {p['cuda']}), {p['date'][:10]}, "
            f"torch {p['torch']}, triton {p['triton']}, tilelang {p['tilelang']}, "
            f"{self.data['kernel_module']}@{self.data['source_sha256'][:12]}"
        )


def validate_record(rec: dict[str, Any]) -> None:
    missing = [k for k in REQUIRED_FIELDS if k not in rec]
    if missing:
        raise ResultsSchemaError(f"record {rec.get('kernel')!r} is missing fields: {missing}")
    pmissing = [k for k in REQUIRED_PROVENANCE if k not in rec["provenance"]]
    if pmissing:
        raise ResultsSchemaError(f"record {rec['kernel']!r} provenance is missing: {pmissing}")
    for side in ("reference", "ceiling"):
        ref = rec[side]
        if ref is not None and not {"name", "value", "unit"} <= set(ref):
            raise ResultsSchemaError(f"record {rec['kernel']!r}: {side} needs name, value and unit")
    if not isinstance(rec["value"], (int, float)) or rec["value"] != rec["value"]:
        raise ResultsSchemaError(f"record {rec['kernel']!r}: value must be a number")
    if len(rec["source_sha256"]) != 64:
        raise ResultsSchemaError(f"record {rec['kernel']!r}: source_sha256 must be a sha256 hex digest")


def results_file(suite: str) -> Path:
    return RESULTS_DIR / f"{suite}.json"


def load(suite: str | None = None) -> list[Record]:
    """All records of one suite (``results/<suite>.json``), or of every suite."""
    files = [results_file(suite)] if suite else sorted(RESULTS_DIR.glob("*.json"))
    records: list[Record] = []
    for path in files:
        if not path.exists():
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("schema") != SCHEMA_VERSION:
            raise ResultsSchemaError(f"{path.name}: schema {doc.get('schema')!r}, expected {SCHEMA_VERSION}")
        for rec in doc["records"]:
            validate_record(rec)
            records.append(Record(rec))
    return records


def save(suite: str, records: Iterable[dict[str, Any]], *, replace: bool = True) -> Path:
    """Write a suite's records (``replace=False`` appends to what is there)."""
    records = list(records)
    for rec in records:
        validate_record(rec)
    path = results_file(suite)
    old = [] if replace or not path.exists() else json.loads(path.read_text())["records"]
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schema": SCHEMA_VERSION, "suite": suite, "records": old + records}
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def find(suite: str, *, include_stale: bool = False, **criteria: Any) -> list[Record]:
    """Records of ``suite`` matching ``criteria`` (dict criteria match a subset of keys)."""
    out = [r for r in load(suite) if r.matches(**criteria)]
    return out if include_stale else [r for r in out if not r.is_stale]


def stale_records() -> list[Record]:
    return [r for r in load() if r.is_stale]


def make_record(
    *,
    suite: str,
    kernel: str,
    kernel_module: str,
    config: dict[str, Any],
    shape: dict[str, Any],
    dtype: str,
    metric: str,
    value: float,
    unit: str,
    latency_ms: float,
    reference: dict[str, Any] | None,
    ceiling: dict[str, Any] | None,
    provenance_info: dict[str, Any],
    peers: dict[str, Any] | None = None,
    correctness: dict[str, Any] | None = None,
    floor_ms: float | None = None,
) -> dict[str, Any]:
    """Build one record; ratios are computed here so they are computed one way everywhere."""
    def ratio(other):
        return None if not other or not other.get("value") else value / other["value"]

    rec = {
        "suite": suite, "kernel": kernel, "config": config, "shape": shape, "dtype": dtype,
        "metric": metric, "value": value, "unit": unit, "latency_ms": latency_ms,
        "reference": reference, "ceiling": ceiling,
        "ratio_to_reference": ratio(reference), "ratio_to_ceiling": ratio(ceiling),
        "peers": peers or {}, "correctness": correctness or {}, "floor_ms": floor_ms,
        "kernel_module": kernel_module, "source_sha256": source_sha256(kernel_module),
        "provenance": provenance_info,
    }
    validate_record(rec)
    return rec


def describe(records: Iterable[Record]) -> str:
    """A plain-text table of records with their provenance (the static fallback)."""
    lines = []
    for r in records:
        ref = r["reference"]
        cmp = f"  vs {ref['name']} {ref['value']:.4g} {ref['unit']} ({r['ratio_to_reference']:.2f}x)" if ref else ""
        lines.append(f"{r['kernel']} {r['shape']} {r['dtype']}: {r['value']:.4g} {r['unit']}{cmp}")
        lines.append(f"    [{r.label()}]")
    return "\n".join(lines) if lines else "(no recorded results)"
