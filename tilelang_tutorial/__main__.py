"""Command line: ``python -m tilelang_tutorial doctor`` (the first thing a workshop attendee runs)."""
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
        from tilelang_tutorial.kernels import scale_copy

        t0 = time.time()
        try:
            kernel = scale_copy.build_scale_copy(256, arch=m.arch)
            _line(True, f"compiled a tiny kernel for {m.arch} in {time.time() - t0:.1f} s "
                        f"({len(kernel.get_kernel_source())} characters of CUDA)")
        except Exception as exc:
            problems.append(f"compiling a tiny kernel for {m.arch} failed: {type(exc).__name__}: {exc}")
            _line(False, problems[-1])
            kernel = None
        if kernel is not None and m.can_run:
            from tilelang_tutorial import checks

            x = checks.random_tensor((300, 256), torch.float16, "cuda")
            y = checks.poisoned((300, 256), torch.float16, "cuda")
            try:
                scale_copy.scale_copy(x, 2.0, out=y)
                cmp = checks.compare(y, scale_copy.scale_copy_reference(x, 2.0), tolerance=checks.TOLERANCE["float16"])
                _line(cmp.ok, f"ran it on the GPU: {cmp}")
                if not cmp.ok:
                    problems.append("the tiny kernel ran but gave a wrong answer")
            except Exception as exc:
                problems.append(f"launching the tiny kernel failed: {type(exc).__name__}: {exc}")
                _line(False, problems[-1])
    if problems:
        print("VERDICT: not ready —", "; ".join(problems))
        return 1
    if m.can_run:
        print(f"VERDICT: ready — GPU mode on {m.device_name}: notebooks compile, run, check and time kernels.")
    else:
        print(f"VERDICT: ready — compile-only mode for {m.arch}: notebooks compile kernels and show "
              "generated code, layouts and recorded GPU results; nothing is launched.")
    return 0


def warm_cache(archs: list[str]) -> int:
    """Compile every tutorial kernel the notebooks build into the TileLang cache."""
    from tilelang_tutorial import warm

    return warm.warm(archs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang_tutorial")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check the set-up and compile (and, with a GPU, run) a tiny kernel")
    sub.add_parser("mode", help="print the runtime mode in one sentence")
    w = sub.add_parser("warm-cache", help="compile every notebook kernel into the TileLang cache")
    w.add_argument("--arch", action="append", help="architecture(s) to compile for (default: the current one)")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    if args.command == "mode":
        import tilelang_tutorial as tt

        print(tt.describe_mode())
        return 0
    if args.command == "warm-cache":
        return warm_cache(args.arch or [])
    return 2


if __name__ == "__main__":
    sys.exit(main())
