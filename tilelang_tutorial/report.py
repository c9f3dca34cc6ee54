"""What was measured, shown from the results store: tables, plots, goals and latency bars.

Everything here reads ``results/<suite>.json`` through :mod:`tilelang_tutorial.results` and
nothing else, so a notebook's "recorded figures" section is one call::

    report.table("gemm", where={"shape.M": 4096}, columns=[...])
    report.plot("mla", x="shape.kv_len", by="config.schedule", where={"shape.batch": 64})
    report.goals("mla")

Only *current* records are shown (their fingerprint matches what their configuration builds
today, see :mod:`.results`), and of one run: the reader's card's where it has current records,
else the most recent Hopper run that has (:func:`results.ranked_runs`). When nothing current is
left, the call says why, once: the file is missing, or its records measured programs that have
changed since. Every table and plot carries the provenance of the run shown (card, date,
versions, command) as a footnote.

Columns and criteria name record fields with dotted paths: ``"shape.M"``, ``"config.schedule"``,
``"peers.torch_compile.value"``. A criterion is a value, a list of allowed values, a dict such as
``{">=": 8192}``, or a predicate.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import results, runtime

_OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        "<": lambda a, b: a < b, "!=": lambda a, b: a != b, "==": lambda a, b: a == b}


def field(record, path: str, default: Any = None) -> Any:
    """``field(r, "peers.torch.value")``: a record's value at a dotted path (``default`` if absent)."""
    cur: Any = record.data if isinstance(record, results.Record) else record
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def _matches(record, where: dict[str, Any] | None) -> bool:
    for path, want in (where or {}).items():
        have = field(record, path)
        if callable(want):
            ok = want(have)
        elif isinstance(want, dict):
            ok = have is not None and all(_OPS[op](have, v) for op, v in want.items())
        elif isinstance(want, (list, tuple, set)):
            ok = have in want
        else:
            ok = have == want
        if not ok:
            return False
    return True


def reader_card() -> str | None:
    """The GPU present here (whose records a reader is shown first), None without one."""
    return runtime.mode().device_name


def _shown(suite: str, where: dict[str, Any] | None):
    """(the run shown for ``where``, its current records matching ``where``), or (None, [])."""
    for run in results.ranked_runs(suite, reader_card()):
        recs = [r for r in run.records if _matches(r, where) and not r.is_stale]
        if recs:
            return run, recs
    return None, []


def records(suite: str, where: dict[str, Any] | None = None) -> list[results.Record]:
    """The *current* records of ``suite`` matching ``where``, of the run shown (the reader's card's,
    else the most recent Hopper run holding any); each record's ``label()`` names its card."""
    return _shown(suite, where)[1]


def status(suite: str, where: dict[str, Any] | None = None) -> str:
    """One sentence: how many current records are shown, and why any others are not."""
    if results.load_file(suite) is None:
        return (f"nothing recorded for suite {suite!r} yet (results/{suite}.json does not exist): "
                f"run `python -m tilelang_tutorial bench {suite}` on a GPU")
    every = [r for r in results.load(suite) if _matches(r, where)]
    stale = [r for r in every if r.is_stale]
    if not every:
        return f"results/{suite}.json has no record matching {where}"
    run, shown = _shown(suite, where)
    head = f"{len(shown)} current record(s)" + (f" recorded on {run.card}" if run else "")
    if not stale:
        return head
    return (f"{head}; {len(stale)} not shown because they are stale: {stale[0].staleness}. "
            f"`python -m tilelang_tutorial bench --stale` on a GPU measures them again")


def footnote(suite: str, where: dict[str, Any] | None = None) -> str:
    """The provenance of the run shown for ``where`` ("" when nothing current is recorded)."""
    run, _ = _shown(suite, where)
    return "" if run is None else run.label()


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------

def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if v == 0 or 1e-3 <= abs(v) < 1e5:
            return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:.0f}"
        return f"{v:.2e}"
    return str(v)


Column = "str | tuple[str, str] | tuple[str, Callable[[Any], Any]]"


def _column(spec) -> tuple[str, Callable[[Any], Any]]:
    if isinstance(spec, str):
        return spec.split(".")[-1], lambda r, p=spec: field(r, p)
    label, get = spec
    if isinstance(get, str):
        return label, lambda r, p=get: field(r, p)
    return label, _or_missing(get)


def _or_missing(get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A computed column's cell, "-" where the record lacks what it reads (a peer that was not
    timed has no ``value``: its record holds the reason instead), as a dotted path's cell is."""
    def cell(r):
        try:
            return get(r)
        except (KeyError, TypeError):
            return None
    return cell


def _varying(recs, prefix: str) -> list[str]:
    keys = []
    for r in recs:
        for k, v in (field(r, prefix) or {}).items():
            if not isinstance(v, (dict, list)) and k not in keys:
                keys.append(k)
    return [f"{prefix}.{k}" for k in keys if len({str(field(r, f'{prefix}.{k}')) for r in recs}) > 1]


def default_columns(recs) -> list:
    """What varies between the records, then the figure, its reference and its ceiling."""
    cols: list = ["kernel"] if len({r["kernel"] for r in recs}) > 1 else []
    cols += _varying(recs, "shape") + _varying(recs, "config")
    if len({r["dtype"] for r in recs}) > 1:
        cols.append("dtype")
    unit = recs[0]["unit"]
    cols.append((unit, "value"))
    ref = recs[0]["reference"]
    if ref:
        cols += [(f"{ref['name']} ({ref['unit']})", "reference.value"), ("x ref", "ratio_to_reference")]
    if recs[0]["ceiling"]:
        cols.append(("/ ceiling", "ratio_to_ceiling"))
    cols.append(("checked", "correctness.ok"))
    return cols


def table_text(suite: str, *, where: dict[str, Any] | None = None, columns: Sequence | None = None,
               sort: Sequence[str] | None = None, title: str | None = None) -> str:
    """The table as text (see :func:`table`)."""
    recs = records(suite, where)
    lines = [title] if title else []
    if not recs:
        return "\n".join(lines + [status(suite, where)])
    if sort:
        recs = sorted(recs, key=lambda r: tuple(str(field(r, k)) if not isinstance(field(r, k), (int, float))
                                                else field(r, k) for k in sort))
    cols = [_column(c) for c in (columns or default_columns(recs))]
    cells = [[label for label, _ in cols]] + [[_fmt(get(r)) for _, get in cols] for r in recs]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    for k, row in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if k else c.ljust(w) for c, w in zip(row, widths)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    if any(r.is_stale for r in results.load(suite) if _matches(r, where)):
        lines.append(status(suite, where))
    lines.append(f"[{recs[0].label()}]")
    return "\n".join(lines)


def table(suite: str, **kwargs) -> None:
    """Print a table of the current records of ``suite`` (``where``, ``columns``, ``sort``,
    ``title``), with the run's provenance underneath; or say why there is nothing to show."""
    print(table_text(suite, **kwargs))


# ------------------------------------------------------------------------------------------------
# Plots
# ------------------------------------------------------------------------------------------------

def plot(suite: str, *, x: str, y: str = "value", by: str | None = None, where: dict[str, Any] | None = None,
         series: dict[str, str] | None = None, hlines: dict[str, str] | None = None,
         logx: bool = False, title: str | None = None, ylabel: str | None = None, xlabel: str | None = None,
         ax=None):
    """A line plot of current records: ``y`` against ``x``, one line per value of ``by``, plus
    ``series`` (``{label: dotted path}``, e.g. a peer measured in the same run, drawn from the same
    records) and ``hlines`` (``{label: path}``, e.g. a ceiling, from the first record). Returns the
    figure, or None (after printing why) when nothing is current."""
    import matplotlib.pyplot as plt

    recs = records(suite, where)
    if not recs:
        print(status(suite, where))
        return None
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4))
    else:
        fig = ax.figure
    groups: dict[Any, list] = {}
    for r in recs:
        groups.setdefault(field(r, by) if by else recs[0]["kernel"], []).append(r)
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: field(r, x))
        ax.plot([field(r, x) for r in rs], [field(r, y) for r in rs], "o-", label=f"{key}")
    base = sorted(next(iter(groups.values())), key=lambda r: field(r, x))
    for label, path in (series or {}).items():
        pts = [(field(r, x), field(r, path)) for r in base if field(r, path) is not None]
        if pts:
            ax.plot(*zip(*pts), "s--", label=label)
    for label, path in (hlines or {}).items():
        v = field(recs[0], path)
        if v is not None:
            ax.axhline(v, color="k", ls=":", lw=1, label=f"{label} ({_fmt(v)})")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel or x.split(".")[-1])
    ax.set_ylabel(ylabel or f"{recs[0]['metric']} ({recs[0]['unit']})")
    ax.set_ylim(bottom=0)
    ax.set_title(title or suite)
    ax.legend(fontsize=8, loc="best")
    fig.text(0.01, 0.005, recs[0].label(), fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


# ------------------------------------------------------------------------------------------------
# Goals
# ------------------------------------------------------------------------------------------------

@dataclass
class GoalResult:
    goal: dict
    group: Any
    values: list
    met: bool | None      # None: nothing current to judge

    def line(self) -> str:
        g = self.goal
        head = f"{g['name']}" + (f" [{self.group}]" if self.group is not None else "")
        if self.met is None:
            bound = f"<= {g['max']}" if "max" in g else f">= {g['min']}"
            return f"{head}: goal {bound} {g['unit']} — nothing current recorded"
        if "max" in g:
            return (f"{head}: goal <= {g['max']} {g['unit']}, highest {_fmt(max(self.values))} over "
                    f"{len(self.values)} record(s): {'met' if self.met else 'NOT met'}")
        if g.get("aggregate") == "geomean":
            return (f"{head}: goal geometric mean >= {g['min']} {g['unit']}, geometric mean "
                    f"{_fmt(_geomean(self.values))} (lowest {_fmt(min(self.values))}) over {len(self.values)} "
                    f"record(s): {'met' if self.met else 'NOT met'}")
        lo = min(self.values)
        return (f"{head}: goal >= {g['min']} {g['unit']}, lowest {_fmt(lo)} over {len(self.values)} "
                f"record(s): {'met' if self.met else 'NOT met'}")


def _geomean(values) -> float:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values))


def goal_results(suite: str, *, by: str | None = None) -> list[GoalResult]:
    """Each goal stored with the run of ``suite`` shown, judged on that run's current records (per
    value of ``by``)."""
    run, _ = _shown(suite, None)
    out = []
    for g in run.goals if run else []:
        recs = [r for r in run.records if _matches(r, g.get("where")) and not r.is_stale]
        keys = sorted({field(r, by) for r in recs}, key=str) if by else [None]
        for key in keys or [None]:
            vals = [field(r, g.get("metric", "value")) for r in recs if by is None or field(r, by) == key]
            vals = [v for v in vals if v is not None]
            if "max" in g:
                met = (max(vals) <= g["max"]) if vals else None
            else:
                agg = _geomean if g.get("aggregate") == "geomean" else min
                met = (agg(vals) >= g["min"]) if vals else None
            out.append(GoalResult(g, key, vals, met))
    return out


def goals(suite: str, *, by: str | None = None) -> None:
    """Print every goal of ``suite`` and whether its current records meet it."""
    res = goal_results(suite, by=by)
    if not res:
        print(f"no goals are stored with results/{suite}.json")
        return
    for g in res:
        print(g.line())
    print(f"[{footnote(suite)}]")


# ------------------------------------------------------------------------------------------------
# Latency bars (the inspector's panel)
# ------------------------------------------------------------------------------------------------

@dataclass
class Bar:
    label: str
    ms: float
    kind: str  # "kernel", "reference", "floor"


@dataclass
class LatencyReport:
    """What a latency panel draws, and where the numbers come from."""

    bars: list[Bar]
    source: str               # "measured", "recorded" or "none"
    note: str = ""            # provenance, or why there is nothing

    @classmethod
    def measured(cls, *, kernel_ms: float, reference: tuple[str, float] | None = None,
                 floor_ms: float | None = None, label: str = "TileLang kernel") -> "LatencyReport":
        bars = [Bar(label, kernel_ms, "kernel")]
        if reference:
            bars.append(Bar(reference[0], reference[1], "reference"))
        if floor_ms:
            bars.append(Bar("roofline floor", floor_ms, "floor"))
        where = runtime.mode().device_name or "this GPU"
        return cls(bars=bars, source="measured", note=f"measured just now on {where}")

    @classmethod
    def from_record(cls, record: results.Record, label: str = "TileLang kernel") -> "LatencyReport":
        bars = [Bar(label, record["latency_ms"], "kernel")]
        ref = record.get("reference") or {}
        if ref.get("latency_ms"):
            bars.append(Bar(ref["name"], ref["latency_ms"], "reference"))
        floor_ms = record.get("floor_ms")
        ceiling = record.get("ceiling") or {}
        if not floor_ms and ceiling.get("value") and ceiling.get("unit") == record["unit"]:
            floor_ms = record["latency_ms"] * record["value"] / ceiling["value"]   # same work at the ceiling's rate
        if floor_ms:
            bars.append(Bar(f"floor at {ceiling.get('name', 'the ceiling').split(' (')[0]}", floor_ms, "floor"))
        return cls(bars=bars, source="recorded", note=record.label())

    @classmethod
    def unavailable(cls, why: str) -> "LatencyReport":
        return cls(bars=[], source="none", note=why)

    def text(self) -> str:
        if not self.bars:
            return f"latency: {self.note}"
        head = {"measured": "latency (measured)", "recorded": "latency (RECORDED on a GPU, not measured here)"}[self.source]
        lines = [head + ":"] + [f"  {b.label:<40} {b.ms * 1e3:10.1f} us" for b in self.bars]
        return "\n".join(lines + [f"  [{self.note}]"])

    def figure(self):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.0, 0.7 + 0.45 * max(1, len(self.bars))), dpi=100)
        ax = fig.add_subplot(111)
        colors = {"kernel": "#1f77b4", "reference": "#ff7f0e", "floor": "#7f7f7f"}
        labels = [b.label for b in self.bars][::-1]
        values = [b.ms * 1e3 for b in self.bars][::-1]
        ax.barh(labels, values, color=[colors[b.kind] for b in self.bars][::-1],
                hatch=None if self.source == "measured" else "//")
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.1f} us", va="center", fontsize=8)
        ax.set_xlabel("latency (us, lower is better)")
        ax.set_xlim(0, max(values) * 1.3 if values else 1)
        ax.set_title(f"latency — {self.source}", fontsize=9)
        fig.tight_layout()
        return fig

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.figure().savefig(buf, format="png")
        return buf.getvalue()


def latency(suite: str, where: dict[str, Any] | None = None, *, measure: Callable[[], LatencyReport] | None = None,
            label: str = "TileLang kernel") -> LatencyReport:
    """Measured now when kernels can run here and ``measure`` is given; else the first current
    record matching ``where``; else a report that says why there is no figure."""
    if measure is not None and runtime.mode().can_run:
        return measure()
    recs = records(suite, where)
    if recs:
        return LatencyReport.from_record(recs[0], label=label)
    return LatencyReport.unavailable(status(suite, where))
