"""Notebook 01's kernels against the copy-bandwidth ceiling and torch, on the GPU."""
from __future__ import annotations

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
