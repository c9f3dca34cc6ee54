"""Notebook 01's kernels against the copy-bandwidth ceiling and torch, on the GPU."""
from __future__ import annotations

import functools

from ... import checks, results, timing
from . import row_sum as row_sum_mod
from . import scale_copy as scale_copy_mod

COMMAND = "python -m tilelang_tutorial bench tile"
SHAPES = [(8192, 8192), (16384, 8192), (4096, 4096)]


def _record(kernel, shape, dtype, t, launch, nbytes, ref_name, ref_t, ceil, cmp, config):
    """``t``: the op as a user calls it; ``launch``: the compiled kernel called directly."""
    gbps = nbytes / (t.ms * 1e-3) / 1e9
    rec = results.make_record(
        suite="tile", kernel=kernel, config=config,
        shape={"M": shape[0], "N": shape[1]}, dtype=dtype, metric="effective bandwidth",
        value=gbps, unit="GB/s", latency_ms=t.ms, timing=t, nbytes=nbytes,
        reference={"name": ref_name, "value": nbytes / (ref_t.ms * 1e-3) / 1e9, "unit": "GB/s",
                   "latency_ms": ref_t.ms},
        ceiling={"name": "device-to-device copy (torch)", "value": ceil.copy_gbps, "unit": "GB/s"},
        correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok},
    )
    rec["call"] = f"tilelang_tutorial.lessons.tiles.{kernel}(...) (the op)"
    rec["prepared_launch_ms"] = launch.ms
    return rec


def default_config(factory) -> dict:
    """The tile knobs a factory uses by default (what the op builds): read off its signature,
    never retyped."""
    import inspect

    return {k: p.default for k, p in inspect.signature(factory).parameters.items()
            if k in ("block_M", "block_N", "threads")}


def run(quick: bool = False) -> results.Run:
    import torch

    ceil = timing.measure_ceilings()
    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    print(f"copy ceiling {ceil.copy_gbps:.0f} GB/s", flush=True)
    out = []
    for M, N in SHAPES[:1] if quick else SHAPES:
        for dtype in ("float16", "bfloat16"):
            tdt = getattr(torch, dtype)
            x = checks.random_tensor((M, N), tdt, "cuda")
            # scale_copy: read x, write y
            y = checks.poisoned((M, N), tdt, "cuda")
            scale_copy_mod.scale_copy(x, 0.5, out=y)
            cmp = checks.compare(y, scale_copy_mod.scale_copy_reference(x, 0.5), tolerance=checks.TOLERANCE[dtype])
            k = scale_copy_mod.build_scale_copy(N, dtype=dtype)
            t = timing.measure(lambda: scale_copy_mod.scale_copy(x, 0.5, out=y))
            launch = timing.measure(lambda: k(x, y, 0.5))
            ref_t = timing.measure(lambda: torch.mul(x, 0.5, out=y))
            nbytes = 2 * x.numel() * x.element_size()
            rec = _record("scale_copy", (M, N), dtype, t, launch, nbytes, "torch.mul(x, alpha)", ref_t, ceil, cmp,
                          default_config(scale_copy_mod.scale_copy_program))
            out.append(rec)
            print(f"scale_copy {M}x{N} {dtype}: {rec['value']:.0f} GB/s ({rec['ratio_to_ceiling']:.2f} of copy), "
                  f"torch {rec['reference']['value']:.0f} GB/s; {cmp}", flush=True)
            # row_sum: read x, write M floats
            s = checks.poisoned((M,), torch.float32, "cuda")
            row_sum_mod.row_sum(x, out=s)
            cmp = checks.compare(s, row_sum_mod.row_sum_reference(x), tolerance=1e-5)
            k = row_sum_mod.build_row_sum(N, dtype=dtype)
            t = timing.measure(lambda: row_sum_mod.row_sum(x, out=s))
            launch = timing.measure(lambda: k(x, s))
            ref_t = timing.measure(lambda: x.sum(dim=1, dtype=torch.float32))
            nbytes = x.numel() * x.element_size() + M * 4
            rec = _record("row_sum", (M, N), dtype, t, launch, nbytes, "torch x.sum(1, dtype=float32)", ref_t, ceil, cmp,
                          default_config(row_sum_mod.row_sum_program))
            out.append(rec)
            print(f"row_sum    {M}x{N} {dtype}: {rec['value']:.0f} GB/s ({rec['ratio_to_ceiling']:.2f} of copy), "
                  f"torch {rec['reference']['value']:.0f} GB/s; {cmp}", flush=True)
    return results.Run(out, prov)


# ------------------------------------------------------------------------------------------------
# The notebook's figures: the reader's program, measured now on a GPU, or the record measured on
# exactly that program (same fingerprint) otherwise -- never a record of a program that differs.
# ------------------------------------------------------------------------------------------------

def _inputs(kernel: str, M: int, N: int, dtype: str, device: str):
    import torch

    x = checks.random_tensor((M, N), getattr(torch, dtype), device)
    if kernel == "scale_copy":
        y = checks.poisoned((M, N), x.dtype, device)
        return (x, y, 0.5), y, scale_copy_mod.scale_copy_reference(x, 0.5), 2 * x.numel() * x.element_size()
    s = checks.poisoned((M,), torch.float32, device)
    return (x, s), s, row_sum_mod.row_sum_reference(x), x.numel() * x.element_size() + M * 4


def _torch_call(kernel: str, args):
    import torch

    if kernel == "scale_copy":
        x, y, alpha = args
        return lambda: torch.mul(x, alpha, out=y), "torch.mul(x, alpha)"
    x = args[0]
    return lambda: x.sum(dim=1, dtype=torch.float32), "torch x.sum(1, dtype=float32)"


def matching_record(program, kernel: str, M: int, N: int, dtype: str = "float16"):
    """The current ``tile`` record of ``kernel`` at (M, N) that measured ``program`` (the reader's
    build; :func:`results.measures`), or None: a record of any other program says nothing about it."""
    from ... import report

    for rec in report.records("tile", where={"kernel": kernel, "dtype": dtype, "shape.M": M, "shape.N": N}):
        if results.measures(rec, program):
            return rec
    return None


def figure(program, kernel: str, *, M: int = 8192, N: int = 8192, dtype: str = "float16") -> str:
    """One sentence with the effective bandwidth of ``program`` (built for ``N``) at M x N:
    measured now on a GPU (after a correctness check), else the matching record, else why not."""
    from ... import runtime

    if runtime.mode().can_run:
        import torch

        compiled = runtime.compile_kernel(program)
        args, out, ref, nbytes = _inputs(kernel, M, N, dtype, "cuda")
        compiled(*args)
        torch.cuda.synchronize()
        cmp = checks.compare(out, ref, tolerance=checks.TOLERANCE[dtype] if kernel == "scale_copy" else 1e-5)
        if not cmp.ok:
            return f"✘ {kernel} {M} x {N}: not timed, the output is wrong ({cmp})"
        torch_fn, torch_name = _torch_call(kernel, args)
        try:    # the copy ceiling too: on a busy GPU its two timings can disagree as well
            t, ref_t = timing.measure(lambda: compiled(*args)), timing.measure(torch_fn)
            copy, _ = copy_bandwidth()
        except timing.TimingDisagreement as exc:
            return f"○ {kernel} {M} x {N}: checked, but not timed: {exc}"
        gbps, ref_gbps = nbytes / (t.ms * 1e-3) / 1e9, nbytes / (ref_t.ms * 1e-3) / 1e9
        return (f"{kernel} {M} x {N} {dtype}, measured now on {runtime.mode().device_name}: {t.ms * 1e3:.1f} us, "
                f"{gbps:.0f} GB/s = {gbps / copy:.2f} of this GPU's copy bandwidth ({copy:.0f} GB/s); "
                f"{torch_name}: {ref_gbps:.0f} GB/s")
    rec = matching_record(program, kernel, M, N, dtype)
    if rec is None:
        return (f"○ {kernel} {M} x {N} {dtype}: no figure recorded for a program identical to yours (an edit, "
                f"or a kernel not measured yet); on a GPU this cell measures it")
    return (f"{kernel} {M} x {N} {dtype}, recorded for a program identical to yours: {rec['latency_ms'] * 1e3:.1f} us, "
            f"{rec['value']:.0f} GB/s = {rec['ratio_to_ceiling']:.2f} of the copy bandwidth "
            f"({rec['ceiling']['value']:.0f} GB/s); {rec['reference']['name']}: {rec['reference']['value']:.0f} GB/s "
            f"[{rec.label()}]")


def latency(program, kernel: str, *, M: int, N: int, dtype: str = "float16"):
    """A latency panel for the inspector: measured now on a GPU, else the matching record."""
    from ... import report, runtime

    def measure():
        import torch

        compiled = runtime.compile_kernel(program)
        args, _, _, nbytes = _inputs(kernel, M, N, dtype, "cuda")
        torch_fn, torch_name = _torch_call(kernel, args)
        try:
            return report.LatencyReport.measured(kernel_ms=timing.measure(lambda: compiled(*args)).ms,
                                                 reference=(torch_name, timing.measure(torch_fn).ms))
        except timing.TimingDisagreement as exc:     # a busy GPU: say so, never a doubtful figure
            return report.LatencyReport.unavailable(f"not timed at {M} x {N}: {exc}")

    if runtime.mode().can_run:
        return measure()
    rec = matching_record(program, kernel, M, N, dtype)
    if rec is None:
        return report.LatencyReport.unavailable(
            f"no latency recorded for a program identical to this one at {M} x {N} (measure it on a GPU)")
    return report.LatencyReport.from_record(rec)


@functools.lru_cache(maxsize=1)
def _measured_copy_gbps() -> float:
    return timing.measure_copy_gbps()


def copy_bandwidth() -> tuple[float, str]:
    """(GB/s, where it comes from): measured now on a GPU, else the ceiling stored with the current
    ``tile`` records (a device-to-device copy measured on the recording GPU)."""
    from ... import report, runtime

    if runtime.mode().can_run:
        return _measured_copy_gbps(), f"measured now on {runtime.mode().device_name}"
    recs = report.records("tile")
    if not recs:
        raise LookupError(report.status("tile"))
    return recs[0]["ceiling"]["value"], f"recorded on {recs[0].provenance.get('gpu', 'the recording GPU')}"
