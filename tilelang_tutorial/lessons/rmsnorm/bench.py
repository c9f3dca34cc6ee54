"""Notebook 05's RMSNorm + SiLU on the GPU: per-width bandwidth, small-M latency, the VAE block,
the one-pass kernel against the two-pass shared-memory design.

    python -m tilelang_tutorial bench rmsnorm            # run() and record in results/rmsnorm.json
    python -m tilelang_tutorial bench rmsnorm --quick    # a few widths (see ``run``)

Everything is measured in one process, on fresh random inputs, medians of ``timing.median_ms``
(L2 flushed between repetitions):

* the TileLang kernel (through the op ``rmsnorm_silu``, i.e. with its Python wrapper) at every
  C in ``WIDTHS``, M = 2^20 rows and a production-like BTHWC activation (``PROD_LEADING``), fp16
  and bf16; effective bandwidth = (read x + write y + read gamma) / time, against the device copy
  bandwidth measured in the same run;
* peers, same inputs, same run: eager torch ``F.silu(F.rms_norm(x))`` (the reference of every
  record), ``torch.compile`` of that function (fp16; dynamic M, one compile per C), the pre-existing
  Triton kernel where it applies (96/192/384), Liger-Kernel's RMSNorm + F.silu when importable;
* the NAIVE fragment kernel at a few widths (to show the cliff the notebook explains);
* the TWO-PASS shared-memory design (:mod:`.two_pass`) at a few widths, against the one-pass kernel
  on the same inputs (:func:`_two_pass_records`);
* small M (2048 rows): latency of the same contenders (launch-bound regime);
* the VAE residual block end to end, eager norm vs the drop-in (dispatch), and the norm alone at
  the block's shape.
"""
from __future__ import annotations

import dataclasses
import time

from ... import checks, results, runtime, timing
from . import kernel as rs
from . import two_pass

COMMAND = "python -m tilelang_tutorial bench rmsnorm"
SUITE = "rmsnorm"
WIDTHS = (96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024)
DTYPES = ("float16", "bfloat16")
LARGE_M = 1 << 20
#: (B, T, H, W): the 1/2-resolution stage of a 720x1280 video VAE decoder, 4-frame chunk.
PROD_LEADING = (1, 4, 360, 640)
SMALL_M = 2048
NAIVE_WIDTHS = (96, 128, 192, 256, 640)
#: Widths of the one-pass vs two-pass comparison (fp16, M = 2^20): block_C = 32, 32, 128, 128, 128.
TWO_PASS_WIDTHS = (96, 160, 256, 640, 1024)
#: VAE block end to end: (C, conv, (B, T, H, W)); 720x1280 stages, 2 frames per chunk.
VAE_CASES = (
    (160, "3d", (1, 2, 360, 640)),
    (320, "3d", (1, 2, 180, 320)),
    (160, "2d", (1, 2, 360, 640)),
    (96, "3d", (1, 2, 720, 1280)),
)
EPS = 1e-5


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def traffic_bytes(M: int, C: int, elem: int = 2) -> int:
    """Read x, write y, read gamma once."""
    return 2 * M * C * elem + C * elem


# ---------------------------------------------------------------------------------------------
# Compiling (in parallel: TileLang's lowering releases the GIL and nvcc is a subprocess)
# ---------------------------------------------------------------------------------------------

def compile_many(jobs, *, arch=None, workers=None, verbose=True):
    """Compile ``[(C, dtype, config_or_None_or_'naive'_or_'two_pass'), ...]``; returns {job: kernel or exception}."""
    def build(job):
        C, dtype, cfg = job
        if cfg == "naive":
            return rs.build_naive_rmsnorm_silu(C, dtype, arch=arch)
        if cfg == "two_pass":
            return runtime.compile_kernel(two_pass.two_pass_rmsnorm_silu_program(C, dtype), arch=arch)
        return rs.build_rmsnorm_silu(C, dtype, config=cfg, arch=arch)

    return runtime.compile_parallel(jobs, build, workers=workers, verbose=verbose,
                                    describe=lambda j: f"C={j[0]} {j[1]} {j[2]}")


def run_jobs(widths=WIDTHS, dtypes=DTYPES, naive_widths=NAIVE_WIDTHS, two_pass_widths=TWO_PASS_WIDTHS):
    return ([(C, dt, None) for dt in dtypes for C in widths]
            + [(C, "float16", "naive") for C in naive_widths]
            + [(C, "float16", "two_pass") for C in two_pass_widths])


# ---------------------------------------------------------------------------------------------
# Contenders
# ---------------------------------------------------------------------------------------------

def eager(x, gamma, eps=EPS):
    import torch.nn.functional as F

    return F.silu(F.rms_norm(x, (x.shape[-1],), gamma, eps))


class CompiledPeer:
    """torch.compile of ``eager`` with a dynamic row count: one compile per (C, dtype).

    Call ``reset()`` before moving to another (C, dtype): dynamo's recompile limit (8 per code
    object) would otherwise make later widths fall back to eager silently.
    """

    def __init__(self):
        import torch

        self._torch = torch
        self.fn = None

    def reset(self):
        self._torch._dynamo.reset()
        self.fn = self._torch.compile(eager)

    def mark(self, x2d):
        """Mark the row dimension dynamic (``maybe_``: never an error if dynamo specialises it)."""
        self._torch._dynamo.maybe_mark_dynamic(x2d, 0)
        return x2d

    def __call__(self, x2d, gamma):
        return self.fn(x2d, gamma)


def liger_peer():
    """(callable(x2d, gamma) -> y, description) or (None, why-not)."""
    try:
        import torch.nn.functional as F
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except Exception as exc:  # not installed on this machine
        return None, f"liger-kernel not importable ({type(exc).__name__}: {exc})"

    def fn(x2d, gamma):
        return F.silu(LigerRMSNormFunction.apply(x2d, gamma, EPS))

    return fn, "Liger-Kernel LigerRMSNormFunction + F.silu"


def _peer(ms, nbytes, **extra):
    return dict({"value": gbps(nbytes, ms), "unit": "GB/s", "latency_ms": ms}, **extra)


def _check(y, x, gamma, dtype):
    return checks.compare(y, rs.rmsnorm_silu_reference(x, gamma, EPS), tolerance=checks.TOLERANCE[dtype])


def _triton():
    from . import triton_existing as tr

    return tr


# ---------------------------------------------------------------------------------------------
# The recorded benchmark
# ---------------------------------------------------------------------------------------------

def run(quick: bool = False) -> results.Run:
    """Records for suite ``rmsnorm`` (see the module docstring)."""
    import torch

    from .dispatch import which_path

    runtime.require_gpu("the RMSNorm benchmark")
    t_start = time.time()
    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    widths = (96, 160, 256, 640) if quick else WIDTHS
    dtypes = ("float16",) if quick else DTYPES
    kernels = compile_many(run_jobs(widths, dtypes, () if quick else NAIVE_WIDTHS, () if quick else TWO_PASS_WIDTHS))
    bad = {j: k for j, k in kernels.items() if isinstance(k, Exception)}
    if bad:
        raise RuntimeError(f"kernels failed to compile: {sorted(bad, key=str)}") from next(iter(bad.values()))
    ceil = timing.measure_ceilings(dtypes=("float16",))
    print(f"copy ceiling {ceil.copy_gbps:.0f} GB/s", flush=True)
    tr = _triton()
    liger, liger_note = liger_peer()
    print(f"liger: {liger_note}", flush=True)
    compiled = CompiledPeer()
    out = []
    ceiling = {"name": "device-to-device copy (torch, read+write)", "value": ceil.copy_gbps, "unit": "GB/s"}
    print(f"\n{'C':>5} {'shape':<22} {'dtype':<9} {'TileLang':>9} {'/copy':>6} {'eager':>7} {'compile':>8} "
          f"{'triton':>7} {'liger':>7} {'x eager':>8} {'x compile':>9}  check   (GB/s)")
    for dt in dtypes:
        tdt = getattr(torch, dt)
        for C in widths:
            cfg = rs.default_config(C, dt)
            use_compile = dt == "float16"       # one compile per (C, dtype): fp16 only, for time
            if use_compile:
                compiled.reset()
            shapes = [("M=2^20", (LARGE_M,))] if quick else [("M=2^20", (LARGE_M,)), ("BTHWC", PROD_LEADING)]
            for shape_name, lead in shapes:
                x = checks.random_tensor((*lead, C), tdt, "cuda")
                gamma = checks.random_tensor((C,), tdt, "cuda")
                M = x.numel() // C
                nbytes = traffic_bytes(M, C, x.element_size())
                x2d = x.view(M, C)
                y = checks.poisoned(x.shape, tdt, "cuda")
                rs.rmsnorm_silu(x, gamma, EPS, out=y)
                torch.cuda.synchronize()
                cmp = _check(y, x, gamma, dt)
                ms = timing.median_ms(lambda: rs.rmsnorm_silu(x, gamma, EPS, out=y))
                eager_ms = timing.median_ms(lambda: eager(x, gamma))
                peers = {"eager_torch": _peer(eager_ms, nbytes, name="F.silu(F.rms_norm(x))")}
                correctness = {"rel_error": cmp.rel_error, "max_abs_error": cmp.max_abs_error,
                               "unwritten": cmp.unwritten, "tolerance": cmp.tolerance, "ok": cmp.ok,
                               "reference": "fp32 torch silu(rms_norm(x.float()) * gamma.float())"}
                if use_compile:
                    compiled.mark(x2d)
                    yc = compiled(x2d, gamma)
                    peers["torch_compile"] = _peer(timing.median_ms(lambda: compiled(x2d, gamma)), nbytes,
                                                   name="torch.compile(F.silu(F.rms_norm(x))), dynamic M")
                    correctness["torch_compile_rel_error"] = _check(yc.view(x.shape), x, gamma, dt).rel_error
                if C in tr.TUNED_CONFIGS:
                    yt = checks.poisoned(x.shape, tdt, "cuda")
                    tr.rmsnorm_silu_triton(x, gamma, EPS, out=yt)
                    torch.cuda.synchronize()
                    tcmp = _check(yt, x, gamma, dt)
                    correctness.update(triton_rel_error=tcmp.rel_error, triton_ok=tcmp.ok)
                    peers["triton_existing"] = _peer(
                        timing.median_ms(lambda: tr.rmsnorm_silu_triton(x, gamma, EPS, out=yt)), nbytes,
                        name="pre-existing Triton kernel (lessons/rmsnorm/triton_existing.py)")
                if liger is not None:
                    try:
                        yl = liger(x2d, gamma)
                        correctness["liger_rel_error"] = _check(yl.view(x.shape), x, gamma, dt).rel_error
                        peers["liger"] = _peer(timing.median_ms(lambda: liger(x2d, gamma)), nbytes, name=liger_note)
                    except Exception as exc:
                        peers["liger"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                rec = results.make_record(
                    suite=SUITE, kernel="rmsnorm_silu", nbytes=nbytes,
                    config={"C": C, "kernel_config": cfg.as_dict(), "dispatch_path": which_path(C),
                            "regime": "bandwidth", "eps": EPS, "dynamic_m": True},
                    shape={"name": shape_name, "leading": list(lead), "M": M, "C": C},
                    dtype=dt, metric="effective bandwidth", value=gbps(nbytes, ms), unit="GB/s", latency_ms=ms,
                    reference={"name": "eager torch F.silu(F.rms_norm(x))", "value": gbps(nbytes, eager_ms),
                               "unit": "GB/s", "latency_ms": eager_ms},
                    ceiling=ceiling, peers=peers, correctness=correctness,
                )
                rec["floor_ms"] = nbytes / (ceil.copy_gbps * 1e9) * 1e3
                out.append(rec)
                _print_row(rec)
                del x, y, x2d
                yc = yt = yl = None  # noqa: F841  (free the peers' outputs before the next shape)
            if dt == "float16":
                out.append(_latency_record(C, compiled if use_compile else None, liger, liger_note))
            torch.cuda.empty_cache()
    torch._dynamo.reset()
    if not quick:
        out += _naive_records(ceiling)
        out += _two_pass_records(ceiling, kernels)
    out += _vae_records(VAE_CASES[:1] if quick else VAE_CASES)
    print(f"\nrmsnorm benchmark: {len(out)} records in {time.time() - t_start:.0f} s", flush=True)
    return results.Run(out, prov)


def _print_row(rec):
    p = rec["peers"]
    g = lambda k: f"{p[k]['value']:.0f}" if k in p and "value" in p[k] else "-"  # noqa: E731
    comp = p.get("torch_compile", {}).get("value")
    s = rec["shape"]
    print(f"{s['C']:>5} {s['name'] + ' M=' + str(s['M']):<22} {rec['dtype']:<9} {rec['value']:9.0f} "
          f"{rec['ratio_to_ceiling']:6.2f} {g('eager_torch'):>7} {g('torch_compile'):>8} {g('triton_existing'):>7} "
          f"{g('liger'):>7} {rec['ratio_to_reference']:8.2f} {(rec['value'] / comp if comp else float('nan')):9.2f}  "
          f"{'ok' if rec['correctness']['ok'] else 'WRONG'} ({rec['correctness']['rel_error']:.1e})", flush=True)


def _naive_records(ceiling):
    """The NAIVE single-pass fragment kernel (comparison only) at a few widths, fp16, M = 2^20."""
    import torch

    out = []
    print("\nNAIVE fragment kernel (for notebook 05's explanation):")
    for C in NAIVE_WIDTHS:
        k = rs.build_naive_rmsnorm_silu(C, "float16")
        x = checks.random_tensor((LARGE_M, C), torch.float16, "cuda")
        gamma = checks.random_tensor((C,), torch.float16, "cuda")
        y = checks.poisoned(x.shape, torch.float16, "cuda")
        k(x, gamma, y, EPS)
        torch.cuda.synchronize()
        cmp = _check(y, x, gamma, "float16")
        nbytes = traffic_bytes(LARGE_M, C)
        ms = timing.median_ms(lambda: k(x, gamma, y, EPS))
        good = rs.build_rmsnorm_silu(C, "float16")
        good_ms = timing.median_ms(lambda: good(x, gamma, y, EPS))
        rec = results.make_record(
            suite=SUITE, kernel="rmsnorm_silu_naive", nbytes=nbytes,
            config={"C": C, "block_m": 8, "threads": 128, "regime": "bandwidth", "variant": "naive"},
            shape={"name": "M=2^20", "leading": [LARGE_M], "M": LARGE_M, "C": C}, dtype="float16",
            metric="effective bandwidth", value=gbps(nbytes, ms), unit="GB/s", latency_ms=ms,
            reference={"name": "rmsnorm_silu (layout-annotated kernel, raw launch)", "value": gbps(nbytes, good_ms),
                       "unit": "GB/s", "latency_ms": good_ms},
            ceiling=ceiling,
            correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok,
                         "tolerance": cmp.tolerance},
        )
        out.append(rec)
        print(f"  naive C={C}: {rec['value']:.0f} GB/s vs annotated {rec['reference']['value']:.0f} GB/s; {cmp}",
              flush=True)
        del x, y
    return out


def _two_pass_records(ceiling, kernels):
    """The blog post's TWO-PASS design (:mod:`.two_pass`: C in block_C chunks staged in shared
    memory, X read twice) against the one-pass kernel (rows kept in registers, X read once), fp16,
    M = 2^20, same inputs, both as raw kernel launches. ``value``: the two-pass kernel's effective
    bandwidth, counting X once (the op's useful traffic, as for every record); ``reference``: the
    one-pass kernel. Notebook 05 reads these records."""
    import torch

    out = []
    print("\nTWO-PASS shared-memory design vs the one-pass kernel (notebook 05):")
    for C in TWO_PASS_WIDTHS:
        block_C = two_pass.two_pass_block_C(C)
        k = kernels[(C, "float16", "two_pass")]
        x = checks.random_tensor((LARGE_M, C), torch.float16, "cuda")
        gamma = checks.random_tensor((C,), torch.float16, "cuda")
        y = checks.poisoned(x.shape, torch.float16, "cuda")
        k(x, gamma, y, EPS)
        torch.cuda.synchronize()
        cmp = _check(y, x, gamma, "float16")
        nbytes = traffic_bytes(LARGE_M, C)
        ms = timing.median_ms(lambda: k(x, gamma, y, EPS))
        one_pass = rs.build_rmsnorm_silu(C, "float16")
        one_pass_ms = timing.median_ms(lambda: one_pass(x, gamma, y, EPS))
        rec = results.make_record(
            suite=SUITE, kernel="rmsnorm_silu_two_pass", nbytes=nbytes,
            config={"C": C, "block_m": 16, "block_C": block_C, "threads": 128, "regime": "bandwidth",
                    "variant": "two-pass"},
            shape={"name": "M=2^20", "leading": [LARGE_M], "M": LARGE_M, "C": C}, dtype="float16",
            metric="effective bandwidth", value=gbps(nbytes, ms), unit="GB/s", latency_ms=ms,
            reference={"name": "rmsnorm_silu (one pass, rows in registers, raw launch)",
                       "value": gbps(nbytes, one_pass_ms), "unit": "GB/s", "latency_ms": one_pass_ms},
            ceiling=ceiling,
            correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok,
                         "tolerance": cmp.tolerance},
        )
        out.append(rec)
        print(f"  two-pass C={C} (block_C {block_C}): {rec['value']:.0f} GB/s vs one-pass "
              f"{rec['reference']['value']:.0f} GB/s; {cmp}", flush=True)
        del x, y
    return out


def _latency_record(C, compiled, liger, liger_note):
    """Small M (SMALL_M rows), fp16: latency in microseconds (launch-bound regime).

    Called inside run()'s fp16 loop, right after the large shapes of the same C, so the
    torch.compile peer (dynamic M) is the graph already compiled for this width.
    """
    import torch

    from .dispatch import which_path

    tr = _triton()
    x = checks.random_tensor((SMALL_M, C), torch.float16, "cuda")
    gamma = checks.random_tensor((C,), torch.float16, "cuda")
    y = checks.poisoned(x.shape, torch.float16, "cuda")
    rs.rmsnorm_silu(x, gamma, EPS, out=y)
    torch.cuda.synchronize()
    cmp = _check(y, x, gamma, "float16")
    k = rs.build_rmsnorm_silu(C, "float16")
    us = lambda f: timing.median_ms(f) * 1e3  # noqa: E731
    op_us = us(lambda: rs.rmsnorm_silu(x, gamma, EPS, out=y))
    raw_us = us(lambda: k(x, gamma, y, EPS))
    eager_us = us(lambda: eager(x, gamma))
    peers = {"kernel_launch_only": {"value": raw_us, "unit": "us", "latency_ms": raw_us / 1e3},
             "eager_torch": {"value": eager_us, "unit": "us", "latency_ms": eager_us / 1e3}}
    if compiled is not None:
        compiled.mark(x)
        compiled(x, gamma)
        c_us = us(lambda: compiled(x, gamma))
        peers["torch_compile"] = {"value": c_us, "unit": "us", "latency_ms": c_us / 1e3}
    if C in tr.TUNED_CONFIGS:
        t_us = us(lambda: tr.rmsnorm_silu_triton(x, gamma, EPS, out=y))
        peers["triton_existing"] = {"value": t_us, "unit": "us", "latency_ms": t_us / 1e3}
    if liger is not None:
        try:
            l_us = us(lambda: liger(x, gamma))
            peers["liger"] = {"value": l_us, "unit": "us", "latency_ms": l_us / 1e3, "name": liger_note}
        except Exception as exc:
            peers["liger"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    rec = results.make_record(
        suite=SUITE, kernel="rmsnorm_silu", nbytes=traffic_bytes(SMALL_M, C),
        config={"C": C, "kernel_config": rs.default_config(C).as_dict(), "dispatch_path": which_path(C),
                "regime": "latency", "eps": EPS, "dynamic_m": True},
        shape={"name": f"M={SMALL_M}", "leading": [SMALL_M], "M": SMALL_M, "C": C}, dtype="float16",
        metric="latency", value=op_us, unit="us", latency_ms=op_us / 1e3,
        reference={"name": "eager torch F.silu(F.rms_norm(x))", "value": eager_us, "unit": "us",
                   "latency_ms": eager_us / 1e3},
        ceiling=None, peers=peers,
        correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok,
                     "tolerance": cmp.tolerance},
    )
    g = lambda k: f"{peers[k]['value']:.1f}" if k in peers and "value" in peers[k] else "-"  # noqa: E731
    print(f"{C:>5} {'M=' + str(SMALL_M) + ' latency (us)':<22} {'float16':<9} op {op_us:.1f}, launch {raw_us:.1f}, "
          f"eager {eager_us:.1f}, compile {g('torch_compile')}, triton {g('triton_existing')}, "
          f"liger {g('liger')}", flush=True)
    return rec


def _vae_records(cases):
    """VAE residual block end to end, eager norm vs the drop-in, fp16; plus the norm alone."""
    import torch

    from . import vae_block
    from .dispatch import which_path

    out = []
    torch.backends.cudnn.benchmark = True   # let cuDNN pick its best conv algorithm (both configurations)
    print("\nVAE residual block (norm+SiLU -> conv -> norm+SiLU -> conv -> +x), fp16, channels-last:")
    for C, conv, lead in cases:
        shape = (*lead, C)
        block, x = vae_block.make_block_and_input(C, shape, conv=conv, dtype=torch.float16, device="cuda")
        y_eager = block(x, norm="eager")
        y_fused = block(x, norm="fused")
        torch.cuda.synchronize()
        cmp = checks.compare(y_fused, y_eager.float(), tolerance=checks.TOLERANCE["float16"])
        eager_ms = timing.median_ms(lambda: block(x, norm="eager"))
        fused_ms = timing.median_ms(lambda: block(x, norm="fused"))
        h = checks.random_tensor(shape, torch.float16, "cuda")
        norm_eager_ms = timing.median_ms(lambda: vae_block.eager_norm_silu(h, block.gamma1))
        norm_fused_ms = timing.median_ms(lambda: vae_block.fused_norm_silu(h, block.gamma1))
        rec = results.make_record(
            suite=SUITE, kernel="vae_block_e2e",
            config={"C": C, "conv": conv, "dispatch_path": which_path(C), "regime": "end-to-end",
                    "kernel_config": rs.default_config(C).as_dict(),
                    "block": "norm+SiLU -> conv -> norm+SiLU -> conv -> +x (lessons/rmsnorm/vae_block.py)"},
            shape={"name": "BTHWC", "leading": list(lead), "M": x.numel() // C, "C": C}, dtype="float16",
            metric="end-to-end latency", value=fused_ms, unit="ms", latency_ms=fused_ms,
            reference={"name": "same block with eager F.silu(F.rms_norm(x))", "value": eager_ms, "unit": "ms",
                       "latency_ms": eager_ms},
            ceiling=None,
            peers={"speedup": {"value": eager_ms / fused_ms, "unit": "x", "what": "eager block / drop-in block"},
                   "norm_only_eager": {"value": norm_eager_ms * 1e3, "unit": "us", "latency_ms": norm_eager_ms},
                   "norm_only_fused": {"value": norm_fused_ms * 1e3, "unit": "us", "latency_ms": norm_fused_ms}},
            correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok,
                         "tolerance": cmp.tolerance, "reference": "the same block with the eager norm (fp16)"},
        )
        out.append(rec)
        print(f"  C={C} {conv} {shape}: eager {eager_ms:.3f} ms -> drop-in {fused_ms:.3f} ms "
              f"({eager_ms / fused_ms:.2f}x); norm alone {norm_eager_ms * 1e3:.0f} us -> {norm_fused_ms * 1e3:.0f} us "
              f"[{which_path(C)}]; {cmp}", flush=True)
        del block, x, h, y_eager, y_fused
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------------------------
# Tuning sweep (prints; records nothing)
# ---------------------------------------------------------------------------------------------

def sweep_configs(C: int) -> list:
    """The default config and its neighbours: other group sizes, block sizes, 2 rows per thread."""
    base = rs.default_config(C)
    cands = [base]
    for g in rs.valid_groups(C):
        if g >= 2 and g != base.group and (C // rs.VEC) // g <= 8:
            cands.append(dataclasses.replace(base, group=g, threads=128 if g <= 8 else 256))
    cands += [dataclasses.replace(base, threads=t) for t in (128, 256, 512) if t != base.threads]
    cands += [dataclasses.replace(base, rows_per_thread=2)]
    return list(dict.fromkeys(cands))


def sweep(widths=(96, 160, 320, 640, 1024), dtype="float16", M=LARGE_M, *, workers=None, arch=None):
    """Time ``sweep_configs(C)`` for each width at M rows; print a table; return the rows."""
    import torch

    runtime.require_gpu("the RMSNorm sweep")
    jobs = [(C, dtype, cfg) for C in widths for cfg in sweep_configs(C)]
    kernels = compile_many(jobs, arch=arch, workers=workers)
    ceil = timing.measure_ceilings(dtypes=("float16",))
    rows = []
    print(f"copy ceiling {ceil.copy_gbps:.0f} GB/s; M = {M}, {dtype}")
    print(f"{'C':>5} {'group':>5} {'threads':>7} {'rows/thr':>8} {'block_m':>7} {'GB/s':>7} {'/copy':>6}  check")
    for C in widths:
        tdt = getattr(torch, dtype)
        x = checks.random_tensor((M, C), tdt, "cuda")
        gamma = checks.random_tensor((C,), tdt, "cuda")
        nbytes = traffic_bytes(M, C, x.element_size())
        for cfg in sweep_configs(C):
            k = kernels[(C, dtype, cfg)]
            row = {"C": C, "config": cfg.as_dict()}
            if isinstance(k, Exception):
                row["error"] = f"compile: {type(k).__name__}"
                print(f"{C:>5} {cfg.group:>5} {cfg.threads:>7} {cfg.rows_per_thread:>8} compile failed")
                rows.append(row)
                continue
            y = checks.poisoned(x.shape, tdt, "cuda")
            k(x, gamma, y, EPS)
            torch.cuda.synchronize()
            cmp = _check(y, x, gamma, dtype)
            ms = timing.median_ms(lambda: k(x, gamma, y, EPS))
            row.update(gbps=gbps(nbytes, ms), ms=ms, ok=cmp.ok, rel_error=cmp.rel_error,
                       default=cfg == rs.default_config(C))
            rows.append(row)
            mark = " <- default" if row["default"] else ""
            print(f"{C:>5} {cfg.group:>5} {cfg.threads:>7} {cfg.rows_per_thread:>8} "
                  f"{cfg.block_m():>7} {row['gbps']:7.0f} {row['gbps'] / ceil.copy_gbps:6.2f}  "
                  f"{'ok' if cmp.ok else 'WRONG'}{mark}", flush=True)
        del x
        torch.cuda.empty_cache()
    print("\nbest correct config per width:")
    for C in widths:
        good = [r for r in rows if r["C"] == C and r.get("ok")]
        if good:
            best = max(good, key=lambda r: r["gbps"])
            dflt = next((r for r in good if r.get("default")), None)
            print(f"  C={C}: {best['config']} {best['gbps']:.0f} GB/s"
                  + (f" (default {dflt['gbps']:.0f} GB/s)" if dflt else ""))
    return rows
