"""Run benchmark suites on a GPU and record them in ``results/<suite>.json``.

    python -m tilelang_tutorial.bench tile gemm rmsnorm mla      # run and record
    python -m tilelang_tutorial.bench --quick tile               # smaller grid, still recorded
    python -m tilelang_tutorial.bench --dry-run gemm             # run and print, record nothing
    python -m tilelang_tutorial.bench --list                     # show recorded figures (any machine)

Each suite measures its own ceilings (copy bandwidth, torch matmul) and peers in the same run, on
fresh random inputs, with medians of CUDA-event timings; see ``timing.py``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time

from . import results, runtime
from .benchmarks import SUITES


def run_suite(suite: str, *, quick: bool, record: bool) -> list[dict]:
    module = importlib.import_module(f"tilelang_tutorial.benchmarks.{suite}")
    t0 = time.time()
    records = module.run(quick=quick)
    print(f"[{suite}] {len(records)} records in {time.time() - t0:.0f} s", flush=True)
    if record and records:
        path = results.save(suite, records)
        print(f"[{suite}] wrote {path.relative_to(results.REPO_ROOT)}", flush=True)
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang_tutorial.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help=f"one or more of: {', '.join(SUITES)}")
    parser.add_argument("--quick", action="store_true", help="a smaller grid")
    parser.add_argument("--dry-run", action="store_true", help="measure and print, do not write results/")
    parser.add_argument("--list", action="store_true", help="print the recorded results and exit")
    args = parser.parse_args(argv)

    if args.list:
        for suite in args.suites or SUITES:
            print(f"== {suite} ==")
            print(results.describe(results.load(suite)))
        return 0
    if not args.suites:
        parser.error("name at least one suite")
    for s in args.suites:
        if s not in SUITES:
            parser.error(f"unknown suite {s!r}; choose from {', '.join(SUITES)}")
    m = runtime.mode()
    if not m.can_run:
        print(f"cannot benchmark: {runtime.describe_mode()}", file=sys.stderr)
        return 2
    print(runtime.describe_mode(), flush=True)
    failed = []
    for suite in args.suites:
        try:
            run_suite(suite, quick=args.quick, record=not args.dry_run)
        except Exception as exc:  # keep going: one broken suite must not cost the others' GPU time
            import traceback

            traceback.print_exc()
            failed.append(f"{suite}: {exc}")
    if failed:
        print("FAILED suites:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
