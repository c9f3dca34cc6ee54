"""Notebook 01's kernels against the copy-bandwidth ceiling and torch, on the GPU."""
from __future__ import annotations

from ... import checks, results, timing
from . import row_sum as row_sum_mod
from . import scale_copy as scale_copy_mod

COMMAND = "python -m tilelang_tutorial bench tile"
SHAPES = [(8192, 8192), (16384, 8192), (4096, 4096)]


def _record(kernel, shape, dtype, ms, nbytes, ref_name, ref_ms, ceil, cmp, config):
    gbps = nbytes / (ms * 1e-3) / 1e9
    return results.make_record(
        suite="tile", kernel=kernel, config=config,
        shape={"M": shape[0], "N": shape[1]}, dtype=dtype, metric="effective bandwidth",
        value=gbps, unit="GB/s", latency_ms=ms, nbytes=nbytes,
        reference={"name": ref_name, "value": nbytes / (ref_ms * 1e-3) / 1e9, "unit": "GB/s", "latency_ms": ref_ms},
        ceiling={"name": "device-to-device copy (torch)", "value": ceil.copy_gbps, "unit": "GB/s"},
        correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok},
    )


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
            k = scale_copy_mod.build_scale_copy(N, dtype=dtype)  # time the launch itself, not the wrapper
            ms = timing.median_ms(lambda: k(x, y, 0.5))
            ref_ms = timing.median_ms(lambda: torch.mul(x, 0.5, out=y))
            nbytes = 2 * x.numel() * x.element_size()
            rec = _record("scale_copy", (M, N), dtype, ms, nbytes, "torch.mul(x, alpha)", ref_ms, ceil, cmp,
                          default_config(scale_copy_mod.scale_copy_program))
            out.append(rec)
            print(f"scale_copy {M}x{N} {dtype}: {rec['value']:.0f} GB/s ({rec['ratio_to_ceiling']:.2f} of copy), "
                  f"torch {rec['reference']['value']:.0f} GB/s; {cmp}", flush=True)
            # row_sum: read x, write M floats
            s = checks.poisoned((M,), torch.float32, "cuda")
            row_sum_mod.row_sum(x, out=s)
            cmp = checks.compare(s, row_sum_mod.row_sum_reference(x), tolerance=1e-5)
            k = row_sum_mod.build_row_sum(N, dtype=dtype)
            ms = timing.median_ms(lambda: k(x, s))
            ref_ms = timing.median_ms(lambda: x.sum(dim=1, dtype=torch.float32))
            nbytes = x.numel() * x.element_size() + M * 4
            rec = _record("row_sum", (M, N), dtype, ms, nbytes, "torch x.sum(1, dtype=float32)", ref_ms, ceil, cmp,
                          default_config(row_sum_mod.row_sum_program))
            out.append(rec)
            print(f"row_sum    {M}x{N} {dtype}: {rec['value']:.0f} GB/s ({rec['ratio_to_ceiling']:.2f} of copy), "
                  f"torch {rec['reference']['value']:.0f} GB/s; {cmp}", flush=True)
    return results.Run(out, prov)
