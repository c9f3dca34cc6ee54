"""Notebook 05's RMSNorm + SiLU on the GPU: per-width bandwidth, small-M latency, the VAE block,
the one-pass kernel against the two-pass shared-memory design.

    python -m tilelang_tutorial bench rmsnorm            # run() and record in results/rmsnorm.json
    python -m tilelang_tutorial bench rmsnorm --quick    # a few widths (see ``run``)

Everything is measured in one process, on fresh random inputs, each figure timed two ways and
kept only when they agree (``timing.measure``):

* the TileLang kernel (through the op ``rmsnorm_silu``, i.e. with its Python wrapper) at every
  C in ``WIDTHS``, on 2^27 / C rows (``rows_for``: X is 256 MiB at every width), fp16 and bf16;
  effective bandwidth = (read x + write y + read gamma) / time, against the device copy
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

import time

from ... import checks, results, runtime, timing
from . import kernel as rs
from . import op
from . import two_pass

COMMAND = "python -m tilelang_tutorial bench rmsnorm"
SUITE = "rmsnorm"
#: every multiple of 32 up to 1024, then the widths of large models
WIDTHS = tuple(range(32, 1024 + 1, 32)) + (1536, 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192)
DTYPES = ("float16", "bfloat16")
LARGE_M = 1 << 20
#: X is this many elements at every width of the bandwidth records (256 MiB in 16 bits)
MAX_ELEMENTS = 1 << 27
#: the small-M (launch-bound) widths
LATENCY_WIDTHS = (96, 160, 256, 512, 640, 1024)
SMALL_M = 2048
NAIVE_WIDTHS = (96, 128, 192, 256, 640)
#: the width suites (:func:`run_widths`): every multiple of 32 up to 8192, and a few widths that are
#: multiples of 8 only (the kernel's requirement: whole 16-byte vectors)
WIDTHS_SUITE, WIDTHS_SUITE_BF16 = "rmsnorm_widths", "rmsnorm_widths_bf16"
MULTIPLES_OF_8_ONLY = (40, 104, 200, 1000, 3000)
EVERY_WIDTH = tuple(sorted(set(range(32, 8192 + 1, 32)) | set(MULTIPLES_OF_8_ONLY)))
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

def build_job(job, arch=None):
    """Build one ``(C, dtype, config_or_None_or_'naive'_or_'two_pass')`` job."""
    C, dtype, cfg = job
    if cfg == "naive":
        return rs.build_naive_rmsnorm_silu(C, dtype, arch=arch)
    if cfg == "two_pass":
        return runtime.compile_kernel(two_pass.two_pass_rmsnorm_silu_program(C, dtype), arch=arch)
    return op.build_rmsnorm_silu(C, dtype, config=cfg, arch=arch)


def _precompile_job(job):
    """Worker-process entry of :func:`compile_many` (fills TileLang's disk cache)."""
    build_job(job)


def compile_many(jobs, *, arch=None, workers=None, verbose=True):
    """Compile ``[(C, dtype, config_or_None_or_'naive'_or_'two_pass'), ...]``: first in worker
    processes (into the disk cache), then here (loads); returns {job: kernel or exception}."""
    import time

    t0 = time.time()
    if arch is None and len(jobs) > 4:
        runtime.precompile(jobs, f"{__name__}:_precompile_job", workers=workers)
    built = runtime.compile_parallel(jobs, lambda job: build_job(job, arch), workers=1, verbose=False)
    if verbose:
        ok = sum(not isinstance(k, Exception) for k in built.values())
        print(f"compiled {ok}/{len(built)} kernels in {time.time() - t0:.0f} s", flush=True)
    return built


# ---------------------------------------------------------------------------------------------
# Contenders
# ---------------------------------------------------------------------------------------------

def eager(x, gamma, eps=EPS):
    import torch.nn.functional as F

    return F.silu(F.rms_norm(x, (x.shape[-1],), gamma, eps))


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


def _check(y, x, gamma, dtype):
    return checks.compare(y, rs.rmsnorm_silu_reference(x, gamma, EPS), tolerance=checks.TOLERANCE[dtype])


def _triton():
    from . import triton_existing as tr

    return tr


# ---------------------------------------------------------------------------------------------
# The recorded benchmark
# ---------------------------------------------------------------------------------------------

def rows_for(C: int) -> int:
    """M for the bandwidth records (the op's and the width suites'): X = 2^27 elements (256 MiB in
    16 bits) at every width, so a narrow row moves as many bytes as a wide one (a copy of a few tens
    of MiB does not reach the copy bandwidth, and the goal is judged against it)."""
    return MAX_ELEMENTS // C


def _timed_peer(fn, nbytes, **extra):
    t, why = timing.measure_or_note(fn)
    if t is None:
        return dict({"error": why}, **extra)
    return dict({"value": gbps(nbytes, t.ms), "unit": "GB/s", "latency_ms": t.ms, "timing": t.as_dict()}, **extra)


def run(quick: bool = False) -> results.Run:
    """Records for suite ``rmsnorm`` (see the module docstring). Each record's figure is the op
    ``rmsnorm_silu(x, gamma, out=y)`` as a user calls it, with the configuration of the measured
    rule (:func:`.op.config_for`)."""
    import torch

    from .dispatch import which_path

    runtime.require_gpu("the RMSNorm benchmark")
    t_start = time.time()
    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    widths = (96, 160, 256, 640) if quick else WIDTHS
    dtypes = ("float16",) if quick else DTYPES
    kernels = compile_many([(C, dt, op.config_for(C, dt)) for dt in dtypes for C in widths]
                           + ([] if quick else [(C, "float16", "naive") for C in NAIVE_WIDTHS]
                              + [(C, "float16", "two_pass") for C in TWO_PASS_WIDTHS]
                              + [(C, "float16", op.config_for(C)) for C in TWO_PASS_WIDTHS + LATENCY_WIDTHS]))
    bad = {j: k for j, k in kernels.items() if isinstance(k, Exception)}
    if bad:
        raise RuntimeError(f"kernels failed to compile: {sorted(bad, key=str)}") from next(iter(bad.values()))
    ceil = timing.measure_ceilings(dtypes=("float16",))
    print(f"copy ceiling {ceil.copy_gbps:.0f} GB/s", flush=True)
    tr = _triton()
    liger, liger_note = liger_peer()
    print(f"liger: {liger_note}", flush=True)
    out = []
    ceiling = {"name": "device-to-device copy (torch, read+write)", "value": ceil.copy_gbps, "unit": "GB/s"}
    print(f"\n{'C':>5} {'M':>8} {'dtype':<9} {'TileLang':>9} {'/copy':>6} {'eager':>7} {'compile':>8} "
          f"{'triton':>7} {'liger':>7} {'x eager':>8} {'x compile':>9}  check   (GB/s)")
    for dt in dtypes:
        tdt = getattr(torch, dt)
        torch._dynamo.reset()
        # one graph for every width and row count: dynamic=True (a per-width static compile would
        # cost a compile per point; notebook 05 says which this is)
        compiled = torch.compile(eager, dynamic=True)
        for C in widths:
            M = rows_for(C)
            cfg = op.config_for(C, dt)
            x = checks.random_tensor((M, C), tdt, "cuda")
            gamma = checks.random_tensor((C,), tdt, "cuda")
            nbytes = traffic_bytes(M, C, x.element_size())
            y = checks.poisoned(x.shape, tdt, "cuda")
            op.rmsnorm_silu(x, gamma, EPS, out=y)
            torch.cuda.synchronize()
            cmp = _check(y, x, gamma, dt)
            t = timing.measure(lambda: op.rmsnorm_silu(x, gamma, EPS, out=y))
            eager_t = timing.measure(lambda: eager(x, gamma))
            peers = {"eager_torch": {"value": gbps(nbytes, eager_t.ms), "unit": "GB/s", "latency_ms": eager_t.ms,
                                     "timing": eager_t.as_dict(), "name": "F.silu(F.rms_norm(x))"}}
            correctness = {"rel_error": cmp.rel_error, "max_abs_error": cmp.max_abs_error,
                           "unwritten": cmp.unwritten, "tolerance": cmp.tolerance, "ok": cmp.ok,
                           "reference": "fp32 torch silu(rms_norm(x.float()) * gamma.float())"}
            try:
                yc = compiled(x, gamma)
                correctness["torch_compile_rel_error"] = _check(yc, x, gamma, dt).rel_error
                peers["torch_compile"] = _timed_peer(lambda: compiled(x, gamma), nbytes,
                                                     name="torch.compile(F.silu(F.rms_norm(x)), dynamic=True)")
            except Exception as exc:
                peers["torch_compile"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            if C in tr.TUNED_CONFIGS:
                yt = checks.poisoned(x.shape, tdt, "cuda")
                tr.rmsnorm_silu_triton(x, gamma, EPS, out=yt)
                torch.cuda.synchronize()
                tcmp = _check(yt, x, gamma, dt)
                correctness.update(triton_rel_error=tcmp.rel_error, triton_ok=tcmp.ok)
                peers["triton_existing"] = _timed_peer(lambda: tr.rmsnorm_silu_triton(x, gamma, EPS, out=yt), nbytes,
                                                       name="pre-existing Triton kernel (lessons/rmsnorm/triton_existing.py)")
            if liger is not None:
                try:
                    yl = liger(x, gamma)
                    correctness["liger_rel_error"] = _check(yl, x, gamma, dt).rel_error
                    peers["liger"] = _timed_peer(lambda: liger(x, gamma), nbytes, name=liger_note)
                except Exception as exc:
                    peers["liger"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            rec = results.make_record(
                suite=SUITE, kernel="rmsnorm_silu", nbytes=nbytes,
                config={"C": C, "kernel_config": cfg.as_dict(), "config_source": "rule",
                        "dispatch_path": which_path(C), "regime": "bandwidth", "eps": EPS, "dynamic_m": True},
                shape={"name": f"M={M}", "leading": [M], "M": M, "C": C},
                dtype=dt, metric="effective bandwidth", value=gbps(nbytes, t.ms), unit="GB/s", latency_ms=t.ms,
                timing=t,
                reference={"name": "eager torch F.silu(F.rms_norm(x))", "value": gbps(nbytes, eager_t.ms),
                           "unit": "GB/s", "latency_ms": eager_t.ms},
                ceiling=ceiling, peers=peers, correctness=correctness,
            )
            rec["call"] = "rmsnorm_silu(x, gamma, eps, out=y) (the op)"
            rec["floor_ms"] = nbytes / (ceil.copy_gbps * 1e9) * 1e3
            out.append(rec)
            _print_row(rec)
            del x, y
            yc = yt = yl = None  # noqa: F841  (free the peers' outputs before the next width)
            torch.cuda.empty_cache()
    torch._dynamo.reset()
    skipped: list = []
    if not quick:
        for C in LATENCY_WIDTHS:
            out += _unless_timings_disagree(lambda: [_latency_record(C, liger, liger_note)], f"latency C={C}", skipped)
        out += _unless_timings_disagree(lambda: _naive_records(ceiling), "naive kernels", skipped)
        out += _unless_timings_disagree(lambda: _two_pass_records(ceiling, kernels), "two-pass kernels", skipped)
    cases = VAE_CASES[:1] if quick else VAE_CASES
    out += _unless_timings_disagree(lambda: _vae_records(cases), "VAE block", skipped)
    print(f"\nrmsnorm benchmark: {len(out)} records in {time.time() - t_start:.0f} s", flush=True)
    if skipped:
        print(f"{len(skipped)} group(s) not recorded: their timing methods disagreed", flush=True)
    return results.Run(out, prov, goals=list(GOALS), notes={"not_recorded": skipped} if skipped else None)


def _unless_timings_disagree(make, what: str, skipped: list) -> list:
    """The records ``make()`` returns, or none (the reason kept in ``skipped`` for the run's notes)
    when one of its two timing methods disagreed: one noisy peer must not lose the whole run, and a
    figure whose timings disagree is never recorded."""
    try:
        return make()
    except timing.TimingDisagreement as exc:
        print(f"{what}: not recorded: {exc}", flush=True)
        skipped.append({"what": what, "reason": str(exc)})
        return []


GOALS = (
    {"name": "every width in the benchmark, fp16", "min": 0.90, "unit": "x copy bandwidth",
     "metric": "ratio_to_ceiling", "where": {"kernel": "rmsnorm_silu", "dtype": "float16",
                                              "config.regime": "bandwidth"}},
    {"name": "every width in the benchmark, bf16", "min": 0.90, "unit": "x copy bandwidth",
     "metric": "ratio_to_ceiling", "where": {"kernel": "rmsnorm_silu", "dtype": "bfloat16",
                                              "config.regime": "bandwidth"}},
)


# ---------------------------------------------------------------------------------------------
# rmsnorm_widths, rmsnorm_widths_bf16: the op's layout at every width
# ---------------------------------------------------------------------------------------------

def _bandwidth_timing(fn, calls: int = 20, repeats: int = 3) -> timing.Timing:
    """Two timings of a bandwidth-bound call that costs little device time (~0.1 s): do_bench's
    median with the L2 flushed before each call, and CUDA events around ``calls`` back-to-back
    calls (median of ``repeats``; the inputs are 256 MiB, five times the H200's L2, so the loop
    needs no flush). Raises ``timing.TimingDisagreement`` when they differ by more than
    ``timing.DEFAULT_TOLERANCE``; at the 0.15 ms of a sweep point both methods time the kernel."""
    import statistics

    import torch

    for _ in range(3):
        fn()
    ms = timing.median_ms(fn, warmup_ms=5, rep_ms=25)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    t = timing.Timing(ms=ms, method="triton.testing.do_bench median, L2 flushed before each call",
                      check_ms=statistics.median(times),
                      check_method=f"CUDA events around {calls} back-to-back calls (inputs 5x the L2), median of {repeats}",
                      regime="kernel", calls=calls)
    if abs(t.agreement - 1.0) > timing.DEFAULT_TOLERANCE:
        raise timing.TimingDisagreement(f"do_bench {t.ms * 1e3:.1f} us vs back to back {t.check_ms * 1e3:.1f} us")
    return t


def run_widths(quick: bool = False, dtype: str = "float16") -> results.Run:
    """Suite ``rmsnorm_widths`` (fp16; ``rmsnorm_widths_bf16``: :func:`run_widths_bf16`): the op's
    layout for each width (:func:`.op.config_for`, the rule) at every width of :data:`EVERY_WIDTH`,
    X = 2^27 elements (M = 2^27 / C rows, :func:`rows_for`), checked against the fp32 reference
    on a poisoned output and timed two ways (:func:`_bandwidth_timing`), against the copy
    bandwidth measured in the same run. One width every 8 with ``quick``."""
    import torch


    runtime.require_gpu("the RMSNorm width sweep")
    t_start = time.time()
    suite = WIDTHS_SUITE if dtype == "float16" else WIDTHS_SUITE_BF16
    prov = results.provenance(f"python -m tilelang_tutorial bench {suite}" + (" --quick" if quick else ""))
    all_widths = EVERY_WIDTH[::8] if quick else EVERY_WIDTH
    tdt = getattr(torch, dtype)
    copy = timing.measure_copy_gbps()
    ceiling = {"name": "device-to-device copy (torch, read+write)", "value": copy, "unit": "GB/s"}
    print(f"{suite}: copy ceiling {copy:.0f} GB/s", flush=True)
    # every width's kernel compiled first in worker processes (into the disk cache): one at a time
    # here would be 256 serial lowerings and nvcc runs on a fresh machine
    kernels = compile_many([(C, dtype, op.config_for(C, dtype)) for C in all_widths])
    out, notes = [], {}
    for C in all_widths:
        cfg = op.config_for(C, dtype)
        k = kernels[(C, dtype, cfg)]
        if isinstance(k, Exception):
            raise k
        M = rows_for(C)
        x = checks.random_tensor((M, C), tdt, "cuda")
        gamma = checks.random_tensor((C,), tdt, "cuda")
        y = checks.poisoned(x.shape, tdt, "cuda")
        k(x, gamma, y, EPS)
        torch.cuda.synchronize()
        cmp = _check(y, x, gamma, dtype)
        nbytes = traffic_bytes(M, C, x.element_size())
        try:
            t = _bandwidth_timing(lambda: k(x, gamma, y, EPS))
        except timing.TimingDisagreement as exc:
            notes[f"C={C}"] = f"not recorded: {exc}"
            print(f"C={C:>5}: not recorded: {exc}", flush=True)
            continue
        rec = results.make_record(
            suite=suite, kernel="rmsnorm_silu", nbytes=nbytes,
            config={"C": C, **cfg.as_dict(), "rule": cfg == rs.default_config(C, dtype)},
            shape={"M": M, "C": C}, dtype=dtype, metric="effective bandwidth", value=gbps(nbytes, t.ms),
            unit="GB/s", latency_ms=t.ms, timing=t, ceiling=ceiling,
            correctness={"ok": cmp.ok, "rel_error": cmp.rel_error, "unwritten": cmp.unwritten,
                         "tolerance": cmp.tolerance},
        )
        out.append(rec)
        print(f"C={C:>5} M={M:>8} {dtype}: group {cfg.group:>4} {rec['value']:6.0f} GB/s "
              f"({rec['ratio_to_ceiling']:.2f} of copy; back to back {gbps(nbytes, t.check_ms) / copy:.2f}) "
              f"{'ok' if cmp.ok else 'WRONG'} ({cmp.rel_error:.1e})", flush=True)
        x = y = None
    below = [r["shape"]["C"] for r in out if r["ratio_to_ceiling"] < 0.90]
    print(f"{suite}: {len(out)} widths in {time.time() - t_start:.0f} s; below 0.90 of copy at {len(below)}: "
          f"{below[:20]}", flush=True)
    return results.Run(out, prov, notes=notes, goals=[{
        "name": f"every multiple of 32 up to 8192 and C = {', '.join(map(str, MULTIPLES_OF_8_ONLY))}, {dtype}, "
                f"the op's layout", "min": 0.90,
        "unit": "x copy bandwidth", "metric": "ratio_to_ceiling"}])


def run_widths_bf16(quick: bool = False) -> results.Run:
    """Suite ``rmsnorm_widths_bf16``: :func:`run_widths` in bfloat16."""
    return run_widths(quick, dtype="bfloat16")


def _print_row(rec):
    p = rec["peers"]
    g = lambda k: f"{p[k]['value']:.0f}" if k in p and "value" in p[k] else "-"  # noqa: E731
    comp = p.get("torch_compile", {}).get("value")
    s = rec["shape"]
    print(f"{s['C']:>5} {s['name'] + ' M=' + str(s['M']):<22} {rec['dtype']:<9} {rec['value']:9.0f} "
          f"{rec['ratio_to_ceiling']:6.2f} {g('eager_torch'):>7} {g('torch_compile'):>8} {g('triton_existing'):>7} "
          f"{g('liger'):>7} {rec['ratio_to_reference']:8.2f} {(rec['value'] / comp if comp else float('nan')):9.2f}  "
          f"{'ok' if rec['correctness']['ok'] else 'WRONG'} ({rec['correctness']['rel_error']:.1e})", flush=True)


def _against_the_layout_kernel(kernel_name, k, C, config, reference_name, ceiling):
    """One fp16 record at M = 2^20 of a comparison kernel ``k`` (raw launch), with the layout-
    annotated kernel under the rule (raw launch, same inputs) as its reference."""
    import torch


    x = checks.random_tensor((LARGE_M, C), torch.float16, "cuda")
    gamma = checks.random_tensor((C,), torch.float16, "cuda")
    y = checks.poisoned(x.shape, torch.float16, "cuda")
    k(x, gamma, y, EPS)
    torch.cuda.synchronize()
    cmp = _check(y, x, gamma, "float16")
    nbytes = traffic_bytes(LARGE_M, C)
    t = timing.measure(lambda: k(x, gamma, y, EPS))
    ref_cfg = op.config_for(C)
    ref = op.build_rmsnorm_silu(C, "float16", config=ref_cfg)
    ref_ms = timing.measure(lambda: ref(x, gamma, y, EPS)).ms
    return results.make_record(
        suite=SUITE, kernel=kernel_name, nbytes=nbytes,
        config={"C": C, **config, "regime": "bandwidth", "reference_config": ref_cfg.as_dict()},
        shape={"name": "M=2^20", "leading": [LARGE_M], "M": LARGE_M, "C": C}, dtype="float16",
        metric="effective bandwidth", value=gbps(nbytes, t.ms), unit="GB/s", latency_ms=t.ms, timing=t,
        reference={"name": reference_name, "value": gbps(nbytes, ref_ms), "unit": "GB/s", "latency_ms": ref_ms},
        ceiling=ceiling,
        correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok,
                     "tolerance": cmp.tolerance},
    )


def _naive_records(ceiling):
    """The NAIVE single-pass fragment kernel (comparison only) at a few widths, fp16, M = 2^20."""
    out = []
    print("\nNAIVE fragment kernel (for notebook 05's explanation):")
    for C in NAIVE_WIDTHS:
        rec = _against_the_layout_kernel(
            "rmsnorm_silu_naive", rs.build_naive_rmsnorm_silu(C, "float16"), C,
            {"block_m": 8, "threads": 128, "variant": "naive"},
            "rmsnorm_silu (layout-annotated kernel, raw launch)", ceiling)
        out.append(rec)
        print(f"  naive C={C}: {rec['value']:.0f} GB/s vs annotated {rec['reference']['value']:.0f} GB/s; "
              f"ok={rec['correctness']['ok']}", flush=True)
    return out


def _two_pass_records(ceiling, kernels):
    """The TWO-PASS design (:mod:`.two_pass`: C in block_C chunks staged in shared
    memory, X read twice) against the one-pass kernel (rows kept in registers, X read once), fp16,
    M = 2^20, same inputs, both as raw kernel launches. ``value``: the two-pass kernel's effective
    bandwidth, counting X once (the op's useful traffic, as for every record); ``reference``: the
    one-pass kernel. Notebook 05 reads these records."""
    out = []
    print("\nTWO-PASS shared-memory design vs the one-pass kernel (notebook 05):")
    for C in TWO_PASS_WIDTHS:
        block_C = two_pass.two_pass_block_C(C)
        rec = _against_the_layout_kernel(
            "rmsnorm_silu_two_pass", kernels[(C, "float16", "two_pass")], C,
            {"block_m": 16, "block_C": block_C, "threads": 128, "variant": "two-pass"},
            "rmsnorm_silu (one pass, rows in registers, raw launch)", ceiling)
        out.append(rec)
        print(f"  two-pass C={C} (block_C {block_C}): {rec['value']:.0f} GB/s vs one-pass "
              f"{rec['reference']['value']:.0f} GB/s; ok={rec['correctness']['ok']}", flush=True)
    return out


def _latency_record(C, liger, liger_note):
    """Small M (SMALL_M rows), fp16: what calling it costs when the launch, not the bytes, is the
    limit. Every contender is timed back to back (CUDA events around a loop of calls, host time
    counted per call; checked against the wall clock) -- the regime where a per-call L2 flush
    would hide the host's work behind the flush (``timing`` explains)."""
    import torch

    from .dispatch import which_path

    tr = _triton()
    x = checks.random_tensor((SMALL_M, C), torch.float16, "cuda")
    gamma = checks.random_tensor((C,), torch.float16, "cuda")
    y = checks.poisoned(x.shape, torch.float16, "cuda")
    op.rmsnorm_silu(x, gamma, EPS, out=y)
    torch.cuda.synchronize()
    cmp = _check(y, x, gamma, "float16")
    k = op.build_rmsnorm_silu(C, "float16")
    t = timing.measure(lambda: op.rmsnorm_silu(x, gamma, EPS, out=y), regime="call")
    kernel_only = timing.measure(lambda: op.rmsnorm_silu(x, gamma, EPS, out=y))  # the same call, kernel regime

    def us_peer(fn, **extra):
        tp, why = timing.measure_or_note(fn, regime="call")
        return (dict({"value": tp.ms * 1e3, "unit": "us", "latency_ms": tp.ms, "timing": tp.as_dict()}, **extra)
                if tp else dict({"error": why}, **extra))

    eager_t = timing.measure(lambda: eager(x, gamma), regime="call")
    peers = {"kernel_launch_only": us_peer(lambda: k(x, gamma, y, EPS), name="the compiled kernel called directly"),
             "op_with_l2_flush": {"value": kernel_only.ms * 1e3, "unit": "us", "latency_ms": kernel_only.ms,
                                  "timing": kernel_only.as_dict(),
                                  "name": "the op, do_bench with an L2 flush before each call (hides host time)"},
             "eager_torch": {"value": eager_t.ms * 1e3, "unit": "us", "latency_ms": eager_t.ms,
                             "timing": eager_t.as_dict()}}
    compiled = torch.compile(eager, dynamic=True)
    try:
        compiled(x, gamma)
        peers["torch_compile"] = us_peer(lambda: compiled(x, gamma), name="torch.compile(..., dynamic=True)")
    except Exception as exc:
        peers["torch_compile"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if C in tr.TUNED_CONFIGS:
        peers["triton_existing"] = us_peer(lambda: tr.rmsnorm_silu_triton(x, gamma, EPS, out=y))
    if liger is not None:
        peers["liger"] = us_peer(lambda: liger(x, gamma), name=liger_note)
    rec = results.make_record(
        suite=SUITE, kernel="rmsnorm_silu", nbytes=traffic_bytes(SMALL_M, C),
        config={"C": C, "kernel_config": op.config_for(C).as_dict(), "config_source": "rule",
                "dispatch_path": which_path(C), "regime": "latency", "eps": EPS, "dynamic_m": True},
        shape={"name": f"M={SMALL_M}", "leading": [SMALL_M], "M": SMALL_M, "C": C}, dtype="float16",
        metric="latency", value=t.ms * 1e3, unit="us", latency_ms=t.ms, timing=t,
        reference={"name": "eager torch F.silu(F.rms_norm(x)), back to back", "value": eager_t.ms * 1e3,
                   "unit": "us", "latency_ms": eager_t.ms},
        ceiling=None, peers=peers,
        correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "ok": cmp.ok,
                     "tolerance": cmp.tolerance},
    )
    rec["call"] = "rmsnorm_silu(x, gamma, eps, out=y), back to back"
    g = lambda key: f"{peers[key]['value']:.1f}" if "value" in peers.get(key, {}) else "-"  # noqa: E731
    print(f"{C:>5} M={SMALL_M} latency (us, back to back): op {t.ms * 1e3:.1f} (with L2 flush {kernel_only.ms * 1e3:.1f}), "
          f"launch {g('kernel_launch_only')}, eager {eager_t.ms * 1e3:.1f}, compile {g('torch_compile')}, "
          f"triton {g('triton_existing')}, liger {g('liger')}", flush=True)
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
        eager_ms = timing.measure(lambda: block(x, norm="eager")).ms
        fused_t = timing.measure(lambda: block(x, norm="fused"))
        fused_ms = fused_t.ms
        h = checks.random_tensor(shape, torch.float16, "cuda")
        norm_eager_ms = timing.measure(lambda: vae_block.eager_norm_silu(h, block.gamma1)).ms
        norm_fused_ms = timing.measure(lambda: vae_block.fused_norm_silu(h, block.gamma1)).ms
        rec = results.make_record(
            suite=SUITE, kernel="vae_block_e2e",
            config={"C": C, "conv": conv, "dispatch_path": which_path(C), "regime": "end-to-end",
                    "kernel_config": op.config_for(C).as_dict(),
                    "block": "norm+SiLU -> conv -> norm+SiLU -> conv -> +x (lessons/rmsnorm/vae_block.py)"},
            shape={"name": "BTHWC", "leading": list(lead), "M": x.numel() // C, "C": C}, dtype="float16",
            metric="end-to-end latency", value=fused_ms, unit="ms", latency_ms=fused_ms, timing=fused_t,
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
