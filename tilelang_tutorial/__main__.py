"""The tutorial's one command line: ``python -m tilelang_tutorial COMMAND``.

    doctor                 check the set-up and end in a verdict (the first thing to run)
    mode                   print the runtime mode in one sentence
    warm-cache [--arch A]  compile what the notebooks compile into TileLang's kernel cache
    bench SUITE...         measure on a GPU and record in results/ (--stale: the suites holding a stale
                           record; --list: what is recorded, and what is stale)
    host-cost              measure the host cost per call of the runtime's layers around a tiny kernel (GPU)
    render                 execute every notebook and save the executed copies as HTML in docs/rendered/
    render --markdown-only after a prose-only edit: refresh the pages' markdown, keep their outputs
    sync-kernels [--check] copy the package's kernels into the notebooks' kernel cells
    mutants [LESSON ...]   mutation testing: do the checks reject the solutions with one mistake typed in?
                           (--sample N: a seeded sample of N per lesson; --seed S)
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time


def _line(ok: bool | None, text: str) -> None:
    mark = {True: "ok  ", False: "FAIL", None: "note"}[ok]
    print(f"[{mark}] {text}", flush=True)


def doctor() -> int:
    """Check the set-up end to end and end in a verdict. Returns the exit status."""
    problems = []
    print(f"python {platform.python_version()} at {sys.executable}")
    try:
        import tilelang_tutorial as tt
    except ImportError as exc:  # includes the pinned-version check
        _line(False, str(exc))
        print("VERDICT: not ready — fix the line above.")
        return 1
    import torch

    import tilelang

    _line(True, f"tilelang {tilelang.__version__} (pinned {tt.REQUIRED_TILELANG}), torch {torch.__version__}")
    try:
        import triton

        _line(True, f"triton {triton.__version__}")
    except ImportError:
        _line(None, "triton is not installed (only the Triton peer kernels and timing need it)")
    nvcc = tt.runtime.nvcc_path()
    if nvcc:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        _line(True, f"nvcc at {nvcc}: {out[-1] if out else '?'}")
    else:
        problems.append("nvcc not found: TileLang needs the CUDA toolkit's nvcc to compile (set CUDA_HOME or put nvcc on PATH)")
        _line(False, problems[-1])
    from tilelang import env as tl_env

    cache = os.environ.get("TILELANG_CACHE_DIR") or getattr(tl_env, "TILELANG_CACHE_DIR", None)
    _line(None, f"TileLang kernel cache: {cache}")
    try:
        m = tt.mode()
    except tt.runtime.ArchError as exc:
        _line(False, str(exc))
        print("VERDICT: not ready — fix the line above.")
        return 1
    if torch.cuda.is_available():
        _line(True, f"GPU: {torch.cuda.get_device_name()} (capability {torch.cuda.get_device_capability()}), CUDA {torch.version.cuda}")
    else:
        _line(None, "no CUDA GPU visible to torch")
    _line(None, tt.describe_mode())
    if nvcc:
        t0 = time.time()
        _line(None, f"building a tiny kernel for {m.arch} (the first time runs nvcc: a few seconds) ...")
        try:
            kernel = tt.runtime.compile_kernel(tt.runtime.probe_program(), arch=m.arch)
            _line(True, f"built a tiny kernel for {m.arch} in {time.time() - t0:.1f} s (compiled by nvcc, or "
                        f"loaded from the kernel cache; {len(kernel.get_kernel_source())} characters of CUDA)")
        except Exception as exc:
            problems.append(f"compiling a tiny kernel for {m.arch} failed: {type(exc).__name__}: {exc}")
            _line(False, problems[-1])
            kernel = None
    # run it the way this machine runs kernels: on the GPU (the compiled kernel), or in the emulator
    if m.can_run and nvcc and kernel is not None:
        runnable, where = kernel, "on the GPU"
    elif not m.can_run:
        runnable, where = tt.runtime.probe_program(), "in the tile emulator"
    else:
        runnable = None
    if runnable is not None:
        x = torch.randn(1000, device=m.device)
        y = torch.full_like(x, float("nan"))
        try:
            tt.run(runnable, x, y)
            ok = bool(torch.equal(y, x + 1))
            _line(ok, f"ran it {where}: " + ("y == x + 1 for all 1000 elements" if ok else "WRONG result"))
            if not ok:
                problems.append(f"the tiny kernel ran {where} but gave a wrong answer")
        except Exception as exc:
            problems.append(f"running the tiny kernel {where} failed: {type(exc).__name__}: {exc}")
            _line(False, problems[-1])
    if problems:
        print("VERDICT: not ready —", "; ".join(problems))
        return 1
    if m.can_run:
        print(f"VERDICT: ready — GPU mode on {m.device_name}: notebooks compile, run, check and time kernels.")
    else:
        print(f"VERDICT: ready — emulated mode for {m.arch}: notebooks compile kernels (real generated code and "
              "layouts), run them in the tile emulator on the CPU (correctness only) and show recorded GPU timings.")
    return 0


def warm_cache(archs: list[str], notebooks: bool) -> int:
    """Compile every lesson's kernels for ``archs``, then run the notebooks (headless, in this
    machine's mode) so that everything they compile is in the cache too."""
    from tilelang_tutorial import lessons, runtime

    archs = [runtime.validate_arch(a) for a in archs] or [runtime.current_arch()]
    failures = 0
    t_all = time.time()
    for lesson in lessons.all_lessons():
        for case in lesson.compile_cases():
            for arch in archs:
                if arch not in case.archs:
                    print(f"[skip] {case.name} for {arch}: written for {', '.join(case.archs)}", flush=True)
                    continue
                t0 = time.time()
                try:
                    case.build(arch)
                    print(f"[ok  ] {case.name} for {arch} in {time.time() - t0:.1f} s", flush=True)
                except Exception as exc:
                    failures += 1
                    print(f"[FAIL] {case.name} for {arch}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                          flush=True)
    if notebooks:
        from tilelang_tutorial import notebook_runs

        for path in notebook_runs.notebooks():
            t0 = time.time()
            print(f"[run ] {path.name} (headless, this machine's mode) ...", flush=True)
            err = notebook_runs.execute(path)
            failures += err is not None
            print(f"[{'ok  ' if err is None else 'FAIL'}] ran {path.name} in {time.time() - t0:.0f} s"
                  + (f": {err}" if err else ""), flush=True)
    print(f"warm-cache: {'done' if not failures else f'{failures} failed'} in {time.time() - t_all:.0f} s")
    return 1 if failures else 0


def bench(suites: list[str], *, quick: bool, dry_run: bool, list_only: bool, stale: bool = False) -> int:
    """Run benchmark suites on a GPU and record each in ``results/<suite>.json`` (the run of this
    card); ``stale``: the suites holding a stale record (of any card), or none recorded."""
    from tilelang_tutorial import lessons, report, results, runtime

    known = lessons.suites()
    for s in suites:
        if s not in known:
            print(f"unknown suite {s!r}; the lessons define: {', '.join(known)}", file=sys.stderr)
            return 2
    if list_only:
        for s in suites or known:
            # A record is shown only where it fingerprints what the lesson builds today: the first
            # time (and after any edit to the package), every recorded configuration's program is
            # rebuilt and printed to fingerprint it, ~0.1 s a record; later runs read the
            # fingerprints from .cache/fingerprints.
            n = len(results.load(s))
            t0 = time.time()
            print(f"[list] {s}: checking {n} records against today's code (fingerprints: slow the first "
                  "time only) ...", flush=True)
            report.table(s, title=f"== {s} ==")
            for run in results.load_runs(s):
                n_stale = sum(r.is_stale for r in run.records)
                print(f"[list] {s}: {run.card} ({run.provenance['date'][:10]}): {len(run.records)} records"
                      + (f", {n_stale} STALE" if n_stale else ", all current"), flush=True)
            if time.time() - t0 > 3:
                print(f"[list] {s}: checked in {time.time() - t0:.0f} s", flush=True)
        print("stale (bench --stale records them again): " + (", ".join(results.stale_suites(suites or known))
                                                                 or "none"))
        return 0
    if stale:
        suites = results.stale_suites(suites or known)
        print("suites holding a stale record: " + (", ".join(suites) or "none"), flush=True)
        if not suites:
            return 0
    if not suites:
        print(f"name at least one suite, or --stale: {', '.join(known)}", file=sys.stderr)
        return 2
    if not runtime.mode().can_run:
        print(f"cannot benchmark: {runtime.describe_mode()}", file=sys.stderr)
        return 2
    print(runtime.describe_mode(), flush=True)
    failed = []
    for s in suites:
        t0 = time.time()
        try:
            run = lessons.suite_runner(s)(quick=quick)
        except Exception as exc:  # keep going: one broken suite must not cost the others' GPU time
            import traceback

            traceback.print_exc()
            failed.append(f"{s}: {exc}")
            continue
        print(f"[{s}] {len(run.records)} records in {time.time() - t0:.0f} s", flush=True)
        if not dry_run and run.records:
            path = results.save(s, run.records, provenance_info=run.provenance, goals=run.goals, notes=run.notes)
            print(f"[{s}] wrote {path.relative_to(results.REPO_ROOT)}", flush=True)
    if failed:
        print("FAILED suites:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def lesson_mutants(names: list[str]) -> dict:
    """``{lesson: its mutants module}`` for the lessons named (default: every lesson that has one)."""
    import importlib
    import importlib.util

    from tilelang_tutorial import lessons

    known = lessons.lesson_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown lesson(s) {', '.join(unknown)}; the lessons are: {', '.join(known)}")
    found = {}
    for name in names or known:
        module = f"{lessons.__name__}.{name}.mutants"
        if importlib.util.find_spec(module) is not None:
            found[name] = importlib.import_module(module)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang_tutorial", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check the set-up and build (and run) a tiny kernel")
    sub.add_parser("mode", help="print the runtime mode in one sentence")
    h = sub.add_parser("host-cost", help="host cost per call of runtime.run / launcher / mode around a tiny kernel")
    h.add_argument("--calls", type=int, default=5000, help="calls per back-to-back loop (default 5000)")
    w = sub.add_parser("warm-cache", help="compile what the notebooks compile into the kernel cache")
    w.add_argument("--arch", action="append", default=[], help="architecture(s) to compile for (default: the current one)")
    w.add_argument("--no-notebooks", action="store_true", help="only the lessons' kernels; do not run the notebooks")
    b = sub.add_parser("bench", help="measure suites on a GPU and record them in results/")
    b.add_argument("suites", nargs="*")
    b.add_argument("--quick", action="store_true", help="a smaller grid (still recorded unless --dry-run)")
    b.add_argument("--dry-run", action="store_true", help="measure and print; record nothing")
    b.add_argument("--list", action="store_true", help="print what is recorded, and what is stale (any machine)")
    b.add_argument("--stale", action="store_true",
                   help="record the suites (of those named, default all) that hold a stale record")
    r = sub.add_parser("render", help="execute the notebooks and save executed copies as HTML in docs/rendered/")
    r.add_argument("notebooks", nargs="*", help="notebook names (default: all)")
    r.add_argument("--markdown-only", action="store_true",
                   help="no execution: replace the pages' markdown cells by the notebooks' current ones, keeping "
                        "their outputs (refused where a code cell changed)")
    k = sub.add_parser("sync-kernels", help="copy the package's kernels into the notebooks' kernel cells")
    k.add_argument("--check", action="store_true", help="only report the cells that differ")
    mu = sub.add_parser("mutants", help="mutation testing of the notebooks' and exercises' checks (emulator)")
    mu.add_argument("lessons", nargs="*", help="lesson folders (default: all)")
    mu.add_argument("--sample", type=int, default=None, help="judge a seeded sample of N mutants per lesson")
    mu.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    if args.command == "mode":
        import tilelang_tutorial as tt

        print(tt.describe_mode())
        return 0
    if args.command == "host-cost":
        from tilelang_tutorial import host_cost

        return host_cost.main(args.calls)
    if args.command == "warm-cache":
        return warm_cache(args.arch, notebooks=not args.no_notebooks)
    if args.command == "bench":
        return bench(args.suites, quick=args.quick, dry_run=args.dry_run, list_only=args.list, stale=args.stale)
    if args.command == "render":
        from tilelang_tutorial import notebook_runs

        if args.markdown_only:
            return 1 if notebook_runs.refresh_markdown(args.notebooks) else 0
        return notebook_runs.render(args.notebooks)
    if args.command == "mutants":
        from tilelang_tutorial import mutants

        return mutants.main(lesson_mutants(args.lessons), sample=args.sample, seed=args.seed)
    if args.command == "sync-kernels":
        from tilelang_tutorial import kernel_cells

        if args.check:
            diffs = [d for path in sorted(kernel_cells.NOTEBOOKS.glob("*.ipynb"))
                     for c in kernel_cells.kernel_cells(path) if (d := kernel_cells.difference(c))]
            print("\n\n".join(diffs) if diffs else "every kernel cell equals the package")
            return 1 if diffs else 0
        changed = kernel_cells.sync()
        print("updated: " + ", ".join(changed) if changed else "every kernel cell already equals the package")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
