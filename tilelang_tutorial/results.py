"""The results store: GPU measurements committed to ``results/<suite>.json``.

A file holds one suite's runs, one per card (an H100's and an H200's are equally valid): each run
says where and with what it was measured (``provenance``: the card, its architecture, the date,
the versions), the goals it is judged against (optional), and its records. A record says what
was measured (kernel, configuration, shape, dtype), the figure, the work behind it (FLOPs,
bytes), the reference, ceiling and peers measured in the same run, the correctness check, and a
``fingerprint`` of *what ran*. Recording a suite on a card replaces that card's run.

Staleness follows what runs, not the text of a file. Each suite's lesson registers how to
rebuild the things a record measured (:func:`register_suite`): the TileLang programs (their
TVMScript text) and, for records that time a Python op, the op's code with docstrings and
comments removed. A record is **current** when the fingerprint of what its lesson builds today
from the record's own configuration equals the stored one: editing a comment or a docstring
keeps it current, changing a tile size or a line of the kernel makes it stale. Stale records are
never shown as current figures (:mod:`tilelang_tutorial.report` labels them instead), and
``python -m tilelang_tutorial bench --stale`` records again exactly the suites holding one, on
whatever GPU runs it. Which run a reader is shown: :func:`ranked_runs`. The schema is documented
in ``docs/results-schema.md``.
"""
from __future__ import annotations

import ast
import datetime as _dt
import functools
import hashlib
import inspect
import json
import os
import platform
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

SCHEMA_VERSION = 3
PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
RESULTS_DIR = REPO_ROOT / "results"

#: Fields every record must carry.
REQUIRED_FIELDS = (
    "suite", "kernel", "config", "shape", "dtype", "metric", "value", "unit", "latency_ms",
    "work", "reference", "ceiling", "ratio_to_reference", "ratio_to_ceiling", "peers", "correctness",
    "fingerprint", "measured",
)
#: Fields every file's provenance must carry.
REQUIRED_PROVENANCE = ("gpu", "arch", "sm_count", "driver", "cuda", "torch", "triton", "tilelang", "python",
                       "date", "command")
#: The architecture whose runs stand in where the reader's card has none: every lesson's kernels
#: are written for Hopper (H100, H200) first, and a CPU reader's kernels are compiled for it.
FALLBACK_ARCH = "sm_90a"


class ResultsSchemaError(ValueError):
    """A results file or record that does not follow the documented schema."""


# ------------------------------------------------------------------------------------------------
# Fingerprints: what ran
# ------------------------------------------------------------------------------------------------

#: AST fields that differ between Python versions without the code differing (3.12 added
#: ``type_params``; ``kind`` and ``ctx`` carry nothing a reader wrote).
_VERSION_FIELDS = {"type_params", "type_comment", "kind", "ctx"}


def _canonical(node) -> str:
    """A dump of an AST that is the same on Python 3.10 to 3.13 for the same code (``ast.dump``
    is not: a record measured on the GPU runner's 3.12 must check as current on a reader's 3.11)."""
    if isinstance(node, ast.AST):
        parts = []
        for name, value in ast.iter_fields(node):
            if name in _VERSION_FIELDS or value is None or value == []:
                continue
            if isinstance(node, ast.JoinedStr) and name == "values":
                # 3.12.1 adds an empty Constant to nested format specs
                value = [v for v in value if not (isinstance(v, ast.Constant) and v.value == "")]
            parts.append(f"{name}={_canonical(value)}")
        return f"{type(node).__name__}({','.join(parts)})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(v) for v in node) + "]"
    return repr(node)


def _python_code(obj) -> str:
    """A function's or class's code without docstrings and comments, the same on every Python."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return _canonical(tree)


def describe_measured(thing) -> str:
    """A short name for a measured thing (shown in a record's ``measured`` list)."""
    if hasattr(thing, "script") and hasattr(thing, "buffer_map"):
        name = thing.attrs["global_symbol"] if thing.attrs and "global_symbol" in thing.attrs else "prim_func"
        return f"TileLang program {name}"
    if isinstance(thing, str):
        return thing
    return f"python {thing.__module__}.{thing.__qualname__}"


def fingerprint(measured: Iterable[Any]) -> str:
    """sha256 of what was measured: ``T.prim_func`` objects by their TVMScript text, Python
    functions and classes by their code without docstrings or comments, strings as they are."""
    h = hashlib.sha256()
    for thing in measured:
        if hasattr(thing, "script") and hasattr(thing, "buffer_map"):
            h.update(b"tir\0" + thing.script().encode())
        elif isinstance(thing, str):
            h.update(b"str\0" + thing.encode())
        elif callable(thing):
            h.update(b"py\0" + _python_code(thing).encode())
        else:
            raise TypeError(f"cannot fingerprint {type(thing).__name__}: give a T.prim_func, a function or a string")
        h.update(b"\0")
    return h.hexdigest()


#: suite -> ``measured(record) -> [things]``, registered by the lesson that owns the suite.
_SUITES: dict[str, Callable[[dict], list]] = {}


def register_suite(suite: str, measured: Callable[[dict], list]) -> None:
    """Tell the store how to rebuild what a record of ``suite`` measured (called by the lesson
    that owns the suite, when it is imported). ``measured(record_dict)`` returns the list given
    to :func:`fingerprint` when the record was made."""
    _SUITES[suite] = measured


def registered_suites() -> tuple[str, ...]:
    return tuple(_SUITES)


@functools.lru_cache(maxsize=4096)
def _current_fingerprint(suite: str, record_json: str) -> str:
    measured = _SUITES[suite]
    if not getattr(measured, "__module__", "").startswith(f"{__package__}.lessons"):
        return fingerprint(measured(json.loads(record_json)))
    # Rebuilding a program and printing it costs ~0.1 s; a notebook reading 256 records would pay
    # it on every run. Lessons' fingerprints are kept on disk, keyed by the package's source (any
    # edit anywhere in it starts a new cache) and TileLang's version.
    cache = _disk_cache()
    key = hashlib.sha256(f"{suite}\0{record_json}".encode()).hexdigest()
    if key not in cache:
        cache[key] = fingerprint(measured(json.loads(record_json)))
        _DISK_NEW[key] = cache[key]
    return cache[key]


FINGERPRINT_CACHE_DIR = REPO_ROOT / ".cache" / "fingerprints"
_DISK_NEW: dict[str, str] = {}


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    from importlib.metadata import version

    h = hashlib.sha256(version("tilelang").encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:24]


@functools.lru_cache(maxsize=1)
def _disk_cache() -> dict[str, str]:
    import atexit

    path = FINGERPRINT_CACHE_DIR / f"{_source_digest()}.json"
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    atexit.register(_save_disk_cache, path)
    return cache


def _save_disk_cache(path: Path) -> None:
    if not _DISK_NEW:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            merged = json.loads(path.read_text(encoding="utf-8"))    # other processes' entries
        except (OSError, ValueError):
            merged = {}
        merged.update(_DISK_NEW)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(merged), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass        # a read-only checkout: no cache, only slower


def current_fingerprint(record: dict) -> str | None:
    """The fingerprint of what the record's configuration builds today (None: suite unknown)."""
    if record["suite"] not in _SUITES:
        return None
    key = json.dumps({k: record[k] for k in ("suite", "kernel", "config", "shape", "dtype")}, sort_keys=True)
    return _current_fingerprint(record["suite"], key)


# ------------------------------------------------------------------------------------------------
# Records and files
# ------------------------------------------------------------------------------------------------

def provenance(command: str) -> dict[str, Any]:
    """Where and with what a measurement is being taken (call on the GPU machine): the card, the
    architecture its kernels are compiled for, the date and the versions."""
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
    from . import runtime

    return {
        "gpu": gpu,
        "arch": runtime.mode().arch,
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
    """One measured figure. ``data`` holds the JSON object as stored; ``provenance`` its file's."""

    data: dict[str, Any]
    provenance: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def staleness(self) -> str | None:
        """None when current; otherwise one sentence saying why the record is not current."""
        now = current_fingerprint(self.data)
        if now is None:
            return (f"no lesson has registered suite {self.data['suite']!r} in this process, so what the "
                    "record measured cannot be rebuilt (import the lesson's package first)")
        if now != self.data["fingerprint"]:
            return ("what it measured has changed since: " + ", ".join(self.data["measured"])
                    + " no longer build(s) to the same code")
        return None

    @property
    def is_stale(self) -> bool:
        return self.staleness is not None

    def matches(self, **criteria: Any) -> bool:
        for key, want in criteria.items():
            have = self.data.get(key)
            if isinstance(want, dict):
                if not isinstance(have, dict) or any(have.get(k) != v for k, v in want.items()):
                    return False
            elif callable(want):
                if not want(have):
                    return False
            elif have != want:
                return False
        return True

    def label(self) -> str:
        """The provenance footnote of a recorded figure."""
        return provenance_label(self.provenance, stale=self.is_stale)


def provenance_label(p: dict[str, Any], *, stale: bool = False) -> str:
    state = "STALE (not current): measured" if stale else "recorded"
    return (f"{state} on {p['gpu']} (driver {p['driver']}, CUDA {p['cuda']}), {p['date'][:10]}, "
            f"torch {p['torch']}, triton {p['triton']}, tilelang {p['tilelang']} — {p['command']}")


def validate_record(rec: dict[str, Any]) -> None:
    missing = [k for k in REQUIRED_FIELDS if k not in rec]
    if missing:
        raise ResultsSchemaError(f"record {rec.get('kernel')!r} is missing fields: {missing}")
    for side in ("reference", "ceiling"):
        ref = rec[side]
        if ref is not None and not {"name", "value", "unit"} <= set(ref):
            raise ResultsSchemaError(f"record {rec['kernel']!r}: {side} needs name, value and unit")
    if not isinstance(rec["value"], (int, float)) or rec["value"] != rec["value"]:
        raise ResultsSchemaError(f"record {rec['kernel']!r}: value must be a number")
    if not isinstance(rec["fingerprint"], str) or len(rec["fingerprint"]) != 64:
        raise ResultsSchemaError(f"record {rec['kernel']!r}: fingerprint must be a sha256 hex digest")
    if not isinstance(rec["work"], dict) or not {"flops", "bytes"} <= set(rec["work"]):
        raise ResultsSchemaError(f"record {rec['kernel']!r}: work needs flops and bytes (numbers or null)")
    check_timing(rec)


TIMING_TOLERANCE = 0.15   # the same as timing.DEFAULT_TOLERANCE (kept here: results never needs a GPU)
TIMING_FIELDS = ("regime", "method", "ms", "check_method", "check_ms", "agreement")


def check_timing(rec: dict[str, Any]) -> None:
    """A record's latency must be the cross-checked figure, and the check must have agreed.

    A timing of ``{}`` or with ``"cross_check": null`` marks a record written before the
    cross-check existed (timed once, by the method it names); the report says so. Anything else
    must be complete and within the tolerance."""
    t = rec.get("timing") or {}
    if not is_cross_checked(rec):
        return
    missing = [k for k in TIMING_FIELDS if k not in t]
    if missing:
        raise ResultsSchemaError(f"record {rec['kernel']!r}: timing is missing {missing}")
    if abs(t["check_ms"] / t["ms"] - 1.0) > TIMING_TOLERANCE:
        raise ResultsSchemaError(
            f"record {rec['kernel']!r}: its two timings disagree ({t['ms'] * 1e3:.2f} us by {t['method']}, "
            f"{t['check_ms'] * 1e3:.2f} us by {t['check_method']}); the figure cannot be recorded")
    if abs(rec["latency_ms"] - t["ms"]) > 1e-9 * max(1.0, t["ms"]):
        raise ResultsSchemaError(f"record {rec['kernel']!r}: latency_ms is not the cross-checked timing")


def is_cross_checked(rec: dict[str, Any]) -> bool:
    t = rec.get("timing") or {}
    return bool(t) and not ("cross_check" in t and t["cross_check"] is None)


def validate_run(run: dict[str, Any], name: str = "results file") -> None:
    prov = run.get("provenance") or {}
    missing = [k for k in REQUIRED_PROVENANCE if k not in prov]
    if missing:
        raise ResultsSchemaError(f"{name}: provenance is missing {missing}")
    for rec in run.get("records", []):
        validate_record(rec)


def validate_file(doc: dict[str, Any], name: str = "results file") -> None:
    if doc.get("schema") != SCHEMA_VERSION:
        raise ResultsSchemaError(f"{name}: schema {doc.get('schema')!r}, expected {SCHEMA_VERSION}")
    if not isinstance(doc.get("runs"), list):
        raise ResultsSchemaError(f"{name}: no list of runs")
    cards = [run.get("provenance", {}).get("gpu") for run in doc["runs"]]
    if len(cards) != len(set(cards)):
        raise ResultsSchemaError(f"{name}: more than one run of one card ({cards})")
    for run in doc["runs"]:
        validate_run(run, f"{name} ({run.get('provenance', {}).get('gpu')})")


def _one_run_file(doc: dict[str, Any]) -> dict[str, Any]:
    """A file of schema 2 (one run, measured on Hopper: the only cards recorded before files held
    a run per card) as a file of today's schema."""
    run = {k: doc.get(k) for k in ("provenance", "goals", "notes", "records")}
    run["provenance"] = {"arch": FALLBACK_ARCH, **run["provenance"]}
    return {"schema": SCHEMA_VERSION, "suite": doc.get("suite"), "runs": [run]}


def results_file(suite: str) -> Path:
    return RESULTS_DIR / f"{suite}.json"


def load_file(suite: str) -> dict[str, Any] | None:
    """The whole file of ``suite`` (validated; ``{"schema", "suite", "runs"}``), or None when
    nothing was recorded."""
    path = results_file(suite)
    if not path.exists():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("schema") == 2:
        doc = _one_run_file(doc)
    validate_file(doc, path.name)
    return doc


@dataclass
class RecordedRun:
    """One card's run of a suite, as stored: its provenance, goals, notes and records."""

    provenance: dict[str, Any]
    goals: list[dict[str, Any]]
    notes: dict[str, Any]
    records: list[Record]

    @property
    def card(self) -> str:
        return self.provenance["gpu"]

    def label(self) -> str:
        return provenance_label(self.provenance)


def load_runs(suite: str) -> list[RecordedRun]:
    """Every card's run of ``suite``, as stored (``[]`` when nothing was recorded)."""
    doc = load_file(suite)
    return [RecordedRun(run["provenance"], run.get("goals") or [], run.get("notes") or {},
                        [Record(rec, run["provenance"]) for rec in run["records"]])
            for run in (doc or {}).get("runs", [])]


def ranked_runs(suite: str, card: str | None = None) -> list[RecordedRun]:
    """The runs a reader is shown, best first: the run of the reader's ``card`` (the GPU present,
    None without one), then the runs of :data:`FALLBACK_ARCH` (Hopper), the most recent first.
    Runs of other cards and architectures are shown only to readers of those cards."""
    runs = load_runs(suite)
    own = [r for r in runs if r.card == card]
    others = sorted((r for r in runs if r.card != card and r.provenance["arch"] == FALLBACK_ARCH),
                    key=lambda r: r.provenance["date"], reverse=True)
    return own + others


def load(suite: str | None = None) -> list[Record]:
    """All records of one suite, or of every suite in ``results/``, of every card's run."""
    suites = [suite] if suite else sorted(p.stem for p in RESULTS_DIR.glob("*.json"))
    return [rec for s in suites for run in load_runs(s) for rec in run.records]


def find(suite: str, *, include_stale: bool = False, **criteria: Any) -> list[Record]:
    """Records of ``suite`` (every card's) matching ``criteria`` (a dict matches a subset of keys,
    a callable is a predicate); stale ones only with ``include_stale``."""
    out = [r for r in load(suite) if r.matches(**criteria)]
    return out if include_stale else [r for r in out if not r.is_stale]


def stale_records(suite: str | None = None) -> list[Record]:
    return [r for r in load(suite) if r.is_stale]


def stale_suites(suites: Iterable[str]) -> list[str]:
    """Those of ``suites`` holding a stale record in any card's run, or with no file at all: what
    ``bench --stale`` records again."""
    return [s for s in suites if load_file(s) is None or stale_records(s)]


def measures(record: Record, program) -> bool:
    """True when ``record`` is current and ``program`` (a ``T.prim_func``, e.g. a reader's kernel
    cell's build) is one of the programs it measured: the same TVMScript as a program the record's
    suite rebuilds from the record's configuration. Whatever else the record measured (an op's
    Python code) is checked by its staleness."""
    if record.is_stale:
        return False
    script = program.script()
    identity = {k: record[k] for k in ("suite", "kernel", "config", "shape", "dtype")}
    return any(hasattr(thing, "script") and hasattr(thing, "buffer_map") and thing.script() == script
               for thing in _SUITES[record["suite"]](json.loads(json.dumps(identity))))


def save(suite: str, records: Iterable[dict[str, Any]], *, provenance_info: dict[str, Any],
         goals: list[dict[str, Any]] | None = None, notes: dict[str, Any] | None = None) -> Path:
    """Write one run of ``suite``: it replaces the run of its card, and the runs of other cards
    keep their current records (their stale ones measured code that no longer exists; a run left
    with none is dropped). New records must carry a cross-checked timing (``timing.measure``);
    only records carried over from an earlier run may lack one."""
    records = list(records)
    unchecked = [r for r in records if not is_cross_checked(r) and not r.get("carried_over")]
    if unchecked:
        raise ResultsSchemaError(f"{suite}: {len(unchecked)} new record(s) have no cross-checked timing "
                                 f"(time them with timing.measure), e.g. {unchecked[0]['kernel']!r}")
    runs = [{"provenance": provenance_info, "goals": goals or [], "notes": notes or {}, "records": records}]
    for old in load_runs(suite):
        current = [r.data for r in old.records if not r.is_stale]
        if old.card != provenance_info["gpu"] and current:
            runs.append({"provenance": old.provenance, "goals": old.goals, "notes": old.notes, "records": current})
    doc = {"schema": SCHEMA_VERSION, "suite": suite, "runs": runs}
    validate_file(doc, suite)
    path = results_file(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def make_record(
    *,
    suite: str,
    kernel: str,
    config: dict[str, Any],
    shape: dict[str, Any],
    dtype: str,
    metric: str,
    value: float,
    unit: str,
    latency_ms: float,
    flops: float | None = None,
    nbytes: float | None = None,
    reference: dict[str, Any] | None = None,
    ceiling: dict[str, Any] | None = None,
    peers: dict[str, Any] | None = None,
    correctness: dict[str, Any] | None = None,
    floor_ms: float | None = None,
    timing: dict[str, Any] | None = None,
    measured: list | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Build one record. Ratios are computed here so they are computed one way everywhere.

    What was measured is rebuilt from the record's own kernel, config, shape and dtype by the
    suite's registered builder (:func:`register_suite`) and fingerprinted, so the figure is tied to
    what the configuration builds, the same way it will be checked later; ``measured`` overrides
    that (tests only)."""
    def ratio(other):
        return None if not other or not other.get("value") else value / other["value"]

    rec = {
        "suite": suite, "kernel": kernel, "config": config, "shape": shape, "dtype": dtype,
        "metric": metric, "value": value, "unit": unit, "latency_ms": latency_ms,
        "work": {"flops": flops, "bytes": nbytes},
        "reference": reference, "ceiling": ceiling,
        "ratio_to_reference": ratio(reference), "ratio_to_ceiling": ratio(ceiling),
        "peers": peers or {}, "correctness": correctness or {}, "floor_ms": floor_ms,
        "timing": timing.as_dict() if hasattr(timing, "as_dict") else (timing or {}),
        **extra,
    }
    if measured is None:
        if suite not in _SUITES:
            raise ResultsSchemaError(f"suite {suite!r} has no registered builder (results.register_suite)")
        measured = _SUITES[suite](json.loads(json.dumps(rec)))
    rec["fingerprint"] = fingerprint(measured)
    rec["measured"] = [describe_measured(m) for m in measured]
    validate_record(rec)
    return rec


@dataclass
class Run:
    """What a benchmark suite's ``run(quick)`` returns: its records, where they were measured,
    the goals they are judged against, and free-form notes (e.g. configurations that failed)."""

    records: list[dict[str, Any]]
    provenance: dict[str, Any]
    goals: list[dict[str, Any]] | None = None
    notes: dict[str, Any] | None = None
