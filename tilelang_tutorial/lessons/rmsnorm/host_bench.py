"""Suite ``rmsnorm_host``: what the drop-in ``fused_rmsnorm_silu`` costs per call, against the
compiled kernel it runs and against eager torch, on the GPU.

For every M in {1, 2048, 16384} and C in {96, 160, 320, 640, 1024, 4096, 8192} (fp16), timed back
to back with host time counted (:func:`tilelang_tutorial.host_cost.measure_record`, two methods
that must agree):

* the drop-in writing a given buffer, ``fused_rmsnorm_silu(x, gamma, out=y)``, against the bare
  call of the kernel its dispatch picks for C on the same tensors (the TileLang kernel
  ``kernel(x2d, gamma, y2d, eps)``; for a width registered as a pre-existing fast path, the Triton
  kernel's launch ``kernel[grid](...)``): the goal is at most 3 us above it;
* the drop-in as eager torch's call is made, allocating its output, ``fused_rmsnorm_silu(x,
  gamma)``, against eager torch ``F.silu(F.rms_norm(x, (C,), gamma, eps))``: the goal is at or
  below it.

The outputs of the drop-in and the bare call are checked first (poisoned buffers, fp32 reference).
"""
from __future__ import annotations

from ... import checks, host_cost, results
from . import dispatch, kernel, op, warp_segments

SUITE = "rmsnorm_host"
COMMAND = "python -m tilelang_tutorial bench rmsnorm_host"
ROWS = (1, 2048, 16384)
WIDTHS = (96, 160, 320, 640, 1024, 4096, 8192)
QUICK_ROWS, QUICK_WIDTHS = (1, 2048), (96, 320, 4096)
DTYPE = "float16"
EPS = kernel.DEFAULT_EPS


def measured(record):
    """What an ``rmsnorm_host`` record measured: the kernel the dispatch runs for C (the TileLang
    program of the record's configuration, or the Triton kernel's code) and the drop-in's Python
    code on the per-call path."""
    from . import triton_existing

    C, c = record["shape"]["C"], record["config"]
    op_code = [dispatch.fused_rmsnorm_silu, dispatch._route]
    if c["path"] == "triton":
        return op_code + [triton_existing.rmsnorm_silu_triton, triton_existing._plan,
                          triton_existing._key, triton_existing.check_inputs,
                          triton_existing._rmsnorm_silu_kernel.fn, f"triton config {c['triton_config']}"]
    cfg = op.config_from_dict(c["kernel_config"])
    return [op.op_program(C, record["dtype"], cfg)] + op_code + [
        op.rmsnorm_silu, op._call, op._plan, op.validate_rmsnorm_silu_inputs]


def points(quick: bool = False):
    """``(M, C)`` of every point."""
    rows, widths = (QUICK_ROWS, QUICK_WIDTHS) if quick else (ROWS, WIDTHS)
    return [(M, C) for C in widths for M in rows]


def eager(x, gamma, eps=EPS):
    """Eager torch's call of the same computation (what the drop-in replaces)."""
    import torch.nn.functional as F

    return F.silu(F.rms_norm(x, (x.shape[-1],), gamma, eps))


def bare_call(x, gamma, y):
    """The kernel the dispatch runs for C = x.shape[-1], called directly on 2-D views; returns
    ``(call, its description, config)``."""
    C = x.shape[-1]
    x2d, y2d = x.view(-1, C), y.view(-1, C)
    if dispatch.which_path(C) == "triton":
        import triton

        from . import triton_existing

        block_c, rows, num_warps = triton_existing.TUNED_CONFIGS[C]
        launch = triton_existing._rmsnorm_silu_kernel[(triton.cdiv(x2d.shape[0], rows),)]
        M = x2d.shape[0]

        def bare():
            launch(x2d, gamma, y2d, M, EPS, D=C, BLOCK_C=block_c, ROWS=rows, num_warps=num_warps)
        return bare, "Triton kernel[grid](x2d, gamma, y2d, ...) (the fast path for this width)", {
            "path": "triton", "triton_config": {"BLOCK_C": block_c, "ROWS": rows, "num_warps": num_warps}}
    cfg = op.config_for(C, DTYPE)
    compiled = op.build_rmsnorm_silu(C, DTYPE, cfg)
    return (lambda: compiled(x2d, gamma, y2d, EPS)), "compiled TileLang kernel(x2d, gamma, y2d, eps)", {
        "path": "tilelang", "kernel_config": {k: v for k, v in cfg.as_dict().items()
                                              if k in kernel.CONFIG_FIELDS + ("layout",) + warp_segments.SEGMENT_CONFIG_FIELDS}}


def run(quick: bool = False) -> results.Run:
    import torch

    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    tdt = getattr(torch, DTYPE)
    out, notes = [], {}
    for M, C in points(quick):
        x = checks.random_tensor((M, C), tdt, "cuda")
        gamma = checks.random_tensor((C,), tdt, "cuda")
        y, y_bare = checks.poisoned((M, C), tdt, "cuda"), checks.poisoned((M, C), tdt, "cuda")
        bare, bare_name, config = bare_call(x, gamma, y_bare)
        dispatch.fused_rmsnorm_silu(x, gamma, EPS, out=y)
        bare()
        torch.cuda.synchronize()
        ref = kernel.rmsnorm_silu_reference(x, gamma, EPS)
        tol = checks.TOLERANCE[DTYPE]
        op_check, bare_check = checks.compare(y, ref, tolerance=tol), checks.compare(y_bare, ref, tolerance=tol)
        rec = host_cost.measure_record(
            suite=SUITE, kernel="fused_rmsnorm_silu", config=config, shape={"M": M, "C": C}, dtype=DTYPE,
            label=f"fused_rmsnorm_silu M={M} C={C}",
            op=lambda: dispatch.fused_rmsnorm_silu(x, gamma, EPS, out=y), bare=bare,
            op_check=op_check, bare_check=bare_check,
            call="fused_rmsnorm_silu(x, gamma, eps, out=y) (the drop-in)", bare_name=bare_name,
            op_as_eager=lambda: dispatch.fused_rmsnorm_silu(x, gamma, EPS),
            eager=lambda: eager(x, gamma), eager_name="eager torch F.silu(F.rms_norm(x, (C,), gamma, eps))",
            notes=notes, nbytes=2.0 * x.numel() * x.element_size() + gamma.numel() * gamma.element_size())
        if rec:
            out.append(rec)
        del x, y, y_bare, ref
    torch.cuda.empty_cache()
    goals = host_cost.goals([{"name": "the drop-in fused_rmsnorm_silu(x, gamma) at or below eager torch's call",
                              "max": 0.0, "unit": "us", "metric": "host_cost.op_minus_eager_us"}])
    return results.Run(out, prov, goals=goals, notes=notes)
