"""Suite ``tile_host``: what ``scale_copy`` and ``row_sum`` cost per call above their compiled
kernels, on the GPU.

Each point times, back to back with host time counted (:func:`tilelang_tutorial.host_cost.measure_record`,
two methods that must agree), the op as a user calls it (``scale_copy(x, 0.5, out=y)``,
``row_sum(x, out=s)``) and the compiled kernel the op runs, called directly on the same tensors
(``kernel(x, y, 0.5)``, ``kernel(x, s)``). Both outputs are checked first: poisoned buffers,
compared with the fp32/fp64 reference. Shapes are launch-bound (one row) and a few microseconds
of GPU work (2048 x 4096), where the host's time per call is what a loop of calls pays.
"""
from __future__ import annotations

from ... import checks, host_cost, results
from . import row_sum as row_sum_mod
from . import scale_copy as scale_copy_mod
from .bench import default_config  # noqa: F401 (the knobs a record names: the op's defaults)

SUITE = "tile_host"
COMMAND = "python -m tilelang_tutorial bench tile_host"
SHAPES = [(1, 4096), (2048, 4096)]
DTYPE = "float16"


def measured(record):
    """What a ``tile_host`` record measured: the program the op builds for the record's width and
    the op's Python code (the op and the key it computes on every call)."""
    kernel = record["kernel"]
    mod = {"scale_copy": scale_copy_mod, "row_sum": row_sum_mod}[kernel]
    factory, op = getattr(mod, f"{kernel}_program"), getattr(mod, kernel)
    return [factory(record["shape"]["N"], dtype=record["dtype"], **record["config"]), op, mod._call_key]


def points(quick: bool = False):
    """``(kernel, M, N)`` of every point (``quick`` measures the same points: each is short)."""
    return [(kernel, M, N) for M, N in SHAPES for kernel in ("scale_copy", "row_sum")]


def run(quick: bool = False) -> results.Run:
    import torch

    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    tdt = getattr(torch, DTYPE)
    out, notes = [], {}
    for kernel, M, N in points(quick):
        x = checks.random_tensor((M, N), tdt, "cuda")
        if kernel == "scale_copy":
            y, y_bare = checks.poisoned((M, N), tdt, "cuda"), checks.poisoned((M, N), tdt, "cuda")
            compiled = scale_copy_mod.build_scale_copy(N, dtype=DTYPE)
            ref = scale_copy_mod.scale_copy_reference(x, 0.5)
            tol = checks.TOLERANCE[DTYPE]

            def op():
                return scale_copy_mod.scale_copy(x, 0.5, out=y)

            def bare():
                return compiled(x, y_bare, 0.5)

            call, bare_name = "scale_copy(x, 0.5, out=y)", "compiled kernel(x, y, 0.5)"
            factory = scale_copy_mod.scale_copy_program
        else:
            y, y_bare = checks.poisoned((M,), torch.float32, "cuda"), checks.poisoned((M,), torch.float32, "cuda")
            compiled = row_sum_mod.build_row_sum(N, dtype=DTYPE)
            ref, tol = row_sum_mod.row_sum_reference(x), 1e-5

            def op():
                return row_sum_mod.row_sum(x, out=y)

            def bare():
                return compiled(x, y_bare)

            call, bare_name = "row_sum(x, out=s)", "compiled kernel(x, s)"
            factory = row_sum_mod.row_sum_program
        op()
        bare()
        torch.cuda.synchronize()
        op_check, bare_check = checks.compare(y, ref, tolerance=tol), checks.compare(y_bare, ref, tolerance=tol)
        rec = host_cost.measure_record(
            suite=SUITE, kernel=kernel, config=default_config(factory), shape={"M": M, "N": N}, dtype=DTYPE,
            label=f"{kernel} {M}x{N}", op=op, bare=bare, op_check=op_check, bare_check=bare_check,
            call=call, bare_name=bare_name, notes=notes, nbytes=None)
        if rec:
            out.append(rec)
    return results.Run(out, prov, goals=host_cost.goals(), notes=notes)
