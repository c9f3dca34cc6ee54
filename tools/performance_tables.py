"""The tables of docs/performance.md, printed from results/ (any machine, no GPU needed).

    python tools/performance_tables.py            # print every table as markdown
    python tools/performance_tables.py --write    # replace the tables in docs/performance.md

In docs/performance.md each table sits between ``<!-- table:NAME -->`` and ``<!-- /table -->``;
``--write`` replaces what is between the two, so after a suite is recorded (on any card) the doc
shows the figures of every card's run, a column group per card. Only current records are shown
(those that fingerprint today's code); a suite with stale records says how many under its table.
The first run fingerprints every record (a minute or two); later runs read the cache.
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

from tilelang_tutorial import lessons, report, results

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def num(v, digits: int = 3) -> str:
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def ratio(a, b):
    return None if a is None or b is None else a / b


def peer(record, name: str):
    return (record["peers"].get(name) or {}).get("value")


def card(run: results.RecordedRun) -> str:
    """The card's short name (``H200`` for ``NVIDIA H200``)."""
    found = re.search(r"\b[A-Z]{1,2}\d{2,4}[A-Za-z]?\b", run.card)
    return found.group(0) if found else run.card


def runs(suite: str, where: dict | None = None) -> list[tuple[results.RecordedRun, list]]:
    """Every card's run of ``suite`` that holds current records matching ``where``, with them."""
    out = []
    for run in results.load_runs(suite):
        recs = [r for r in run.records if report._matches(r, where) and not r.is_stale]
        if recs:
            out.append((run, recs))
    return out


def markdown(header: list[str], rows: list[list]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def footer(*suites: str) -> list[str]:
    """One line: which card measured each suite, when, with what, how many records are stale, and
    how to measure them again."""
    parts = []
    for suite in suites:
        recorded = results.load_runs(suite)
        if not recorded:
            parts.append(f"`{suite}`: nothing recorded yet")
        for run in recorded:
            p = run.provenance
            stale = sum(r.is_stale for r in run.records)
            parts.append(f"`{suite}` on {p['gpu']}, {p['date'][:10]}, tilelang {p['tilelang']}, torch {p['torch']}"
                         + (f" ({stale} of {len(run.records)} records stale, not shown)" if stale else ""))
    return ["", f"*{'; '.join(parts)}. Again: `./tutorial bench {' '.join(suites)}` on a GPU, or "
                f"`bash tools/gpu/run.sh {' '.join('bench:' + s for s in suites)}`.*"]


def pivot(suite: str, where: dict | None, keys: list[str], key, values: list[str], value) -> list[str]:
    """A table with one row per point (``key(record)``, ordered as first recorded) and, per card,
    the columns ``values`` (``value(record)``)."""
    found = runs(suite, where)
    if not found:
        return [report.status(suite, where)] + footer(suite)
    by_card, order = [], {}
    for run, recs in found:
        cells = {}
        for r in recs:
            cells[tuple(key(r))] = value(r)
            order.setdefault(tuple(key(r)), None)
        by_card.append((card(run), cells))
    header = keys + [f"{name} {v}" if len(by_card) > 1 else v for name, _ in by_card for v in values]
    blank = ["–"] * len(values)
    rows = [list(k) + [c for _, cells in by_card for c in cells.get(k, blank)] for k in order]
    return markdown(header, rows) + footer(suite)


# ------------------------------------------------------------------------------------------------
# The tables
# ------------------------------------------------------------------------------------------------

def table_tile() -> list[str]:
    return pivot("tile", {"dtype": "float16"}, ["kernel", "M × N"],
                 lambda r: [r["kernel"], f"{r['shape']['M']} × {r['shape']['N']}"],
                 ["GB/s", "× torch.mul", "/ copy"],
                 lambda r: [num(r["value"]), num(r["ratio_to_reference"]), num(r["ratio_to_ceiling"])])


def table_host(suite: str, keys: list[str], key) -> list[str]:
    return pivot(suite, None, keys, key, ["op µs", "bare kernel µs", "excess µs"],
                 lambda r: [num(r["host_cost"]["op_us"]), num(r["host_cost"]["bare_us"]),
                            num(r["host_cost"]["excess_us"])])


def table_mla_host() -> list[str]:
    def key(r):
        s = r["shape"]
        kv = s["kv_len"] if s.get("mean_kv_len", s["kv_len"]) == s["kv_len"] else f"≤ {s['kv_len']} (mean {s['mean_kv_len']:.0f})"
        return [s["h_q"], s["batch"], kv, r["dtype"], r["config"].get("num_split")]

    def value(r):
        h = r["host_cost"]
        one = [num(h["one_call_us"]), num(h["one_call_over_op"])] if "one_call_us" in h else ["–", "–"]
        return [num(h["bare_us"]), num(h["op_us"]), num(h["excess_us"])] + one
    return pivot("mla_host", None, ["h_q", "batch", "kv", "dtype", "split"], key,
                 ["bare kernel µs", "plan.run µs", "excess µs", "mla_decode µs", "mla_decode / plan.run"], value)


def table_gemm() -> list[str]:
    def best(r):
        return [num(r["value"]), num(r["ratio_to_reference"]), num(r["ratio_to_ceiling"])]
    return pivot("gemm", {"config.variant": "tuned"}, ["M × N × K", "dtype"],
                 lambda r: [f"{r['shape']['M']} × {r['shape']['N']} × {r['shape']['K']}", r["dtype"]],
                 ["TFLOP/s", "× torch", "/ cuBLAS"], best)


def table_gemm_rule() -> list[str]:
    rows = []
    for run, recs in runs("gemm_rule"):
        for name in dict.fromkeys(r["shape"]["set"] for r in recs):
            ratios = [r["ratio_to_reference"] for r in recs if r["shape"]["set"] == name]
            rows.append([card(run), name, len(ratios), num(statistics.geometric_mean(ratios)), num(min(ratios)),
                         num(max(ratios)), sum(x < 0.9 for x in ratios)])
    header = ["card", "shapes", "count", "geometric mean × torch", "lowest", "highest", "below 0.90×"]
    return (markdown(header, rows) if rows else [report.status("gemm_rule")]) + footer("gemm_rule")


def table_mla() -> list[str]:
    def key(r):
        s = r["shape"]
        kv = str(s["kv_len"]) if s["mean_kv_len"] == s["kv_len"] else f"≤ {s['kv_len']} (mean {s['mean_kv_len']:.0f})"
        return [r["config"]["label"], s["batch"], s["h_q"], kv, r["dtype"]]

    def value(r):
        return [f"{num(r['value'])} {r['unit']}", num(r["ratio_to_reference"]),
                num(ratio(r["value"], peer(r, "flashmla"))), num(r["ratio_to_ceiling"])]
    return pivot("mla", {"config.schedule": "seesaw"}, ["point", "batch", "h_q", "kv tokens", "dtype"], key,
                 ["seesaw", "× FlashInfer", "× FlashMLA", "/ ceiling"], value)


def table_mla_paths() -> list[str]:
    def value(r):
        op = r["op_path"]
        ms = {k: (op.get(k) or {}).get("latency_ms") for k in ("prepared_launch", "plan_run")}
        return [num(ms["prepared_launch"] * 1e3), num(ratio(ms["plan_run"], ms["prepared_launch"]))]
    return pivot("mla", {"config.schedule": "seesaw", "op_path.plan_run": lambda v: v is not None,
                         "config.label": ["h128", "small-batch auto", "b1 auto split", "varlen"],
                         "shape.kv_len": lambda v: v != 16384},
                 ["point", "batch", "kv", "dtype"],
                 lambda r: [r["config"]["label"], r["shape"]["batch"], r["shape"]["kv_len"], r["dtype"]],
                 ["launch µs", "plan.run ×"], value)


def table_rmsnorm() -> list[str]:
    def value(r):
        v = r["value"]
        return [num(v), num(r["ratio_to_ceiling"]), num(r["ratio_to_reference"]),
                num(ratio(v, peer(r, "torch_compile"))), num(ratio(v, peer(r, "liger")))]
    lines = pivot("rmsnorm", {"kernel": "rmsnorm_silu", "config.regime": "bandwidth",
                              "shape.C": [32, 160, 1024, 4096, 8192]},
                  ["C", "dtype"], lambda r: [r["shape"]["C"], r["dtype"]],
                  ["GB/s", "/ copy", "× eager", "× torch.compile", "× Liger"], value)
    every = []
    for run, recs in runs("rmsnorm", {"kernel": "rmsnorm_silu", "config.regime": "bandwidth"}):
        for dtype in dict.fromkeys(r["dtype"] for r in recs):
            of_copy = [r["ratio_to_ceiling"] for r in recs if r["dtype"] == dtype]
            every.append(f"{card(run)}, {dtype}: {len(of_copy)} widths, {num(min(of_copy))}–{num(max(of_copy))} "
                         f"of copy, {sum(x >= 0.9 for x in of_copy)} at 0.90 or more")
    return lines[:-2] + ["", "Every width of the run: " + "; ".join(every) + ".", ""] + lines[-1:]


def table_rmsnorm_widths() -> list[str]:
    rows = []
    for suite in ("rmsnorm_widths", "rmsnorm_widths_bf16"):
        for run, recs in runs(suite):
            of_copy = [r["ratio_to_ceiling"] for r in recs]
            worst = min(recs, key=lambda r: r["ratio_to_ceiling"])
            rows.append([card(run), recs[0]["dtype"], len(recs), num(statistics.median(of_copy)), num(min(of_copy)),
                         worst["shape"]["C"], sum(x >= 0.9 for x in of_copy)])
    header = ["card", "dtype", "widths", "median / copy", "lowest", "at C", "at 0.90 or more"]
    return markdown(header, rows) + footer("rmsnorm_widths", "rmsnorm_widths_bf16")


def table_rmsnorm_host() -> list[str]:
    def value(r):
        h = r["host_cost"]
        return [num(h["op_us"]), num(h["bare_us"]), num(h["excess_us"]), num(h.get("op_allocating_us")),
                num(h.get("eager_us"))]
    return pivot("rmsnorm_host", {"shape.C": [96, 160, 8192]}, ["M", "C", "path"],
                 lambda r: [r["shape"]["M"], r["shape"]["C"], r["config"]["path"]],
                 ["op µs", "bare µs", "excess µs", "allocating µs", "eager torch µs"], value)


def table_goals() -> list[str]:
    rows = []
    for suite in sorted(path.stem for path in results.RESULTS_DIR.glob("*.json")):
        for run in results.load_runs(suite):
            current = [r for r in run.records if not r.is_stale]
            for goal in run.goals:
                vals = [report.field(r, goal.get("metric", "value")) for r in current
                        if report._matches(r, goal.get("where"))]
                vals = [v for v in vals if v is not None]
                if not vals:
                    seen, met = "nothing current", "–"
                elif "max" in goal:
                    seen, met = f"highest {num(max(vals))}", max(vals) <= goal["max"]
                elif goal.get("aggregate") == "geomean":
                    seen, met = (f"geometric mean {num(statistics.geometric_mean(vals))}",
                                 statistics.geometric_mean(vals) >= goal["min"])
                else:
                    seen, met = f"lowest {num(min(vals))}", min(vals) >= goal["min"]
                bound = f"≤ {goal['max']}" if "max" in goal else f"≥ {goal['min']}"
                name = re.sub(r"^issue \d+: ", "", goal["name"])      # the goal, not where it was asked for
                rows.append([card(run), f"`{suite}`", name, f"{bound} {goal['unit']}", seen,
                             {True: "met", False: "**not met**"}.get(met, met)])
    return markdown(["card", "suite", "goal", "bound", "recorded", ""], rows)


TABLES = {
    "tile": table_tile,
    "tile_host": lambda: table_host("tile_host", ["kernel", "M"], lambda r: [r["kernel"], r["shape"]["M"]]),
    "gemm": table_gemm,
    "gemm_rule": table_gemm_rule,
    "gemm_host": lambda: table_host("gemm_host", ["M", "kernel"],
                                    lambda r: [r["shape"]["M"], r["config"].get("candidate")]),
    "mla": table_mla,
    "mla_paths": table_mla_paths,
    "mla_host": table_mla_host,
    "rmsnorm": table_rmsnorm,
    "rmsnorm_widths": table_rmsnorm_widths,
    "rmsnorm_host": table_rmsnorm_host,
    "goals": table_goals,
}


def write(doc: Path) -> list[str]:
    """Replace every table block of ``doc``; the names of the blocks it found."""
    found = []

    def fill(match: re.Match) -> str:
        found.append(match.group(1))
        return f"<!-- table:{match.group(1)} -->\n" + "\n".join(TABLES[match.group(1)]()) + "\n<!-- /table -->"

    doc.write_text(re.sub(r"<!-- table:(\w+) -->\n.*?<!-- /table -->", fill, doc.read_text(), flags=re.S))
    return found


def main(argv: list[str]) -> int:
    lessons.suites()        # each lesson registers how to rebuild what its records measured
    if argv == ["--write"]:
        print(f"rewrote the tables of docs/{DOC.name}: " + ", ".join(write(DOC)))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name, make in TABLES.items():
        print(f"<!-- table:{name} -->\n" + "\n".join(make()) + "\n<!-- /table -->\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
