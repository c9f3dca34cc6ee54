"""Sweep ``rmsnorm_candidates``: layouts and code-generation choices of the RMSNorm + SiLU kernel
timed side by side on a sample of widths, fp16 and bf16 (prints; records nothing).

    python -m tilelang_tutorial sweep rmsnorm_candidates            # the sample below
    python -m tilelang_tutorial sweep rmsnorm_candidates 1056 4128  # chosen widths
    python -m tilelang_tutorial sweep rmsnorm_candidates --budget=100   # no new width after 100 s

For each width and dtype, every candidate (:func:`candidates`) is checked against the fp32
reference on a poisoned output and timed two ways: do_bench's median with the L2 flushed before
each call, and CUDA events around 30 back-to-back calls (X is 256 MiB, five times the L2); each
entry prints both, as ratios to the copy bandwidth measured in the same run. A first block times
the small-row calls at C = 96 back to back (the drop-in's Triton path against the TileLang kernel
and eager torch), host time counted.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace

from ... import checks, runtime, timing
from . import kernel as rs
from . import op

#: widths: the worst of the recorded fp16 sweep (just past each doubling of the group: 1056,
#: 2080, 4128; the bf16 ones 992, 2880), their brackets' exact fits (1280, 2560, 5120), small
#: rows, and a spread up to 8192
SAMPLE_WIDTHS = (32, 64, 96, 160, 288, 544, 640, 800, 992, 1024, 1056, 1248, 1280, 1312,
                 1568, 2080, 2528, 2560, 2880, 3104, 3616, 4096, 4128, 5088, 5120, 6176, 8160, 8192)
DTYPES = ("float16", "bfloat16")
EPS = 1e-5
#: widths where the rule missed 0.90 of copy in the recorded width suites (2026-12-01, fp16 or
#: bf16), with a neighbour that met it: they get more candidates (:func:`candidates`)
MISSED_WIDTHS = (32, 64, 2592, 5152, 5216, 6176, 6400, 6688, 7008, 7328)


def candidates(C: int) -> list[rs.RMSNormSiLUConfig]:
    """The layouts timed at width C: the op's (the rule, :func:`.kernel.default_config`), the same
    group with the IEEE division and no register cap (the kernel before the rule), and the rule
    with the other register cap (4 <-> 5 blocks per SM; 4 where the rule caps at 3).

    (Window 1 of 2026-12-01 timed, at the 28 sample widths, the then measured table's group with
    the IEEE division, and the fast sigmoid with the table's group capped at 4 blocks per SM and
    with the old rule's group, at most 4 vectors a lane, capped at 3, 4 and 5: the rule was fitted
    to those figures: measurements/2026-12-01-rmsnorm_candidates.log beside this module.)"""
    rule = rs.default_config(C)
    ieee = rs.RMSNormSiLUConfig(group=rule.group, threads=rule.threads)
    other = rs.RMSNormSiLUConfig(group=rule.group, threads=rule.threads, fast_sigmoid=True,
                                 min_blocks={4: 5, 5: 4}.get(rule.min_blocks, 4))
    # the rule's misses in the recorded width suites (C = 32 at 0.84 of copy, fp16 6176-7328 at
    # 0.89, bf16 2592 and 5152-5216 at 0.89): more rows per block (more bytes in flight per block)
    # for them, and twice the threads (the 2026-12-02 sweep of all ten: no candidate reached 0.90
    # at C = 32, fp16 6176 or bf16 2592, 5152, 5216 and 6176;
    # docs/measurements/2026-12-02/rmsnorm_missed_widths.log)
    more = [replace(rule, rows_per_thread=2), replace(rule, rows_per_thread=4),
            replace(rule, threads=2 * rule.threads)] if C in MISSED_WIDTHS else []
    # rows of at most 8 vectors: every other group too (one lane a row, no butterfly; one vector a
    # lane) -- the 2026-12-01 evening sweep left C = 32 at 0.84 with the rule's group of 2
    groups = [replace(rule, group=g, threads=max(256, g)) for g in rs.valid_groups(C)
              if g != rule.group] if C in MISSED_WIDTHS and C <= 8 * rs.VEC else []
    return [rule, ieee, other] + more + groups


def label(cfg: rs.RMSNormSiLUConfig) -> str:
    return (f"g{cfg.group}/t{cfg.threads}" + ("/fast" if cfg.fast_sigmoid else "/ieee")
            + (f"/mb{cfg.min_blocks}" if cfg.min_blocks else "")
            + (f"/r{cfg.rows_per_thread}" if cfg.rows_per_thread > 1 else ""))


def _back_to_back_ms(fn, calls: int = 30, repeats: int = 3) -> float:
    """The second method: CUDA events around ``calls`` back-to-back calls, median of ``repeats``
    (no flush needed: X is 256 MiB, five times the L2)."""
    import statistics

    import torch

    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def jobs(widths=SAMPLE_WIDTHS, dtypes=DTYPES):
    return [(C, dt, cfg) for dt in dtypes for C in widths for cfg in candidates(C)]


def _small_rows_c96():
    """C = 96 at M in {1, 2048, 16384}, back to back: Triton launch, TileLang kernel, eager."""
    import torch
    import torch.nn.functional as F

    from . import triton_existing as tr
    import triton

    print("\nC = 96, small rows, back to back (us per call, host time counted):", flush=True)
    for cfg in candidates(96)[:2]:
        k = op.build_rmsnorm_silu(96, "float16", config=cfg)
        for M in (1, 2048, 16384):
            x = checks.random_tensor((M, 96), torch.float16, "cuda")
            gamma = checks.random_tensor((96,), torch.float16, "cuda")
            y = checks.poisoned(x.shape, torch.float16, "cuda")
            k(x, gamma, y, EPS)
            torch.cuda.synchronize()
            ok = checks.compare(y, rs.rmsnorm_silu_reference(x, gamma, EPS), tolerance=checks.TOLERANCE["float16"])
            block_c, rows, num_warps = tr.TUNED_CONFIGS[96]
            launch = tr._rmsnorm_silu_kernel[(triton.cdiv(M, rows),)]
            t_tl = timing.measure(lambda: k(x, gamma, y, EPS), regime="call")
            t_tr = timing.measure(lambda: launch(x, gamma, y, M, EPS, D=96, BLOCK_C=block_c, ROWS=rows,
                                                 num_warps=num_warps), regime="call")
            t_eager = timing.measure(lambda: F.silu(F.rms_norm(x, (96,), gamma, EPS)), regime="call")
            print(f"  {label(cfg):<18} M={M:>6}: tilelang kernel {t_tl.ms * 1e3:6.1f} (check {t_tl.check_ms * 1e3:6.1f}), "
                  f"triton launch {t_tr.ms * 1e3:6.1f}, eager {t_eager.ms * 1e3:6.1f}; {ok}", flush=True)


def main(argv=None) -> int:
    import torch

    argv = list(argv or [])
    widths = tuple(int(a) for a in argv if a.isdigit()) or SAMPLE_WIDTHS
    budget_s = next((float(a.split("=")[1]) for a in argv if a.startswith("--budget=")), 100.0)
    if not runtime.mode().can_run or runtime.mode().device != "cuda":
        print(f"sweep rmsnorm_candidates needs a GPU: {runtime.describe_mode()}", file=sys.stderr)
        return 2
    from .bench import gbps, traffic_bytes, widths_rows

    t0 = time.time()
    copy = timing.measure_copy_gbps()
    print(f"copy ceiling {copy:.0f} GB/s ({time.time() - t0:.0f} s)", flush=True)

    def build(C, dt, cfg):
        # one at a time, as they are needed (loaded from the kernel cache when this CPU compiled them)
        try:
            return op.build_rmsnorm_silu(C, dt, config=cfg)
        except Exception as exc:  # a configuration the compiler rejects is reported, not fatal
            return exc
    summary = []
    try:
        _small_rows_c96()
    except Exception as exc:  # the width sweep below still runs
        print(f"C = 96 small rows failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    # width by width, both dtypes in turn: a run cut short loses the last widths, not a dtype
    for C in widths:
        if time.time() - t0 > budget_s:
            print(f"stopping before C = {C}: {budget_s:.0f} s budget spent", flush=True)
            break
        for dt in DTYPES:
            tdt = getattr(torch, dt)
            M = widths_rows(C)
            x = checks.random_tensor((M, C), tdt, "cuda")
            gamma = checks.random_tensor((C,), tdt, "cuda")
            y = checks.poisoned(x.shape, tdt, "cuda")
            ref = rs.rmsnorm_silu_reference(x, gamma, EPS)
            nbytes = traffic_bytes(M, C, x.element_size())
            row = []
            for cfg in candidates(C):
                k = build(C, dt, cfg)
                if isinstance(k, Exception):
                    row.append((cfg, None, f"build failed: {type(k).__name__}: {str(k)[:80]}"))
                    continue
                y.fill_(float("nan"))
                k(x, gamma, y, EPS)
                torch.cuda.synchronize()
                cmp = checks.compare(y, ref, tolerance=checks.TOLERANCE[dt])
                if not cmp.ok:
                    row.append((cfg, None, f"WRONG {cmp}"))
                    continue
                ms = timing.median_ms(lambda: k(x, gamma, y, EPS), warmup_ms=5, rep_ms=15)
                loop_ms = _back_to_back_ms(lambda: k(x, gamma, y, EPS))
                row.append((cfg, gbps(nbytes, ms), gbps(nbytes, loop_ms)))
            timed = [r for r in row if r[1]]
            best = max(timed, key=lambda r: r[1]) if timed else None
            if best:
                summary.append((dt, C, row[0][1] and row[0][1] / copy, best[1] / copy, best[2] / copy, label(best[0])))
            print(f"{dt:<8} C={C:>5} M={M:>8}: " + ", ".join(
                f"{label(c)} {g / copy:.2f}/{loop / copy:.2f}" if g else f"{label(c)} {loop}" for c, g, loop in row)
                + (f" | best {label(best[0])}" if best else ""), flush=True)
            x = y = ref = None      # free them before the next width
            torch.cuda.empty_cache()
    print("\nsummary (ratio to copy): dtype C baseline best (do_bench, flushed) best (back to back) (label)")
    for dt, C, base, best, loop, lab in summary:
        print(f"  {dt:<8} {C:>5} {base or 0:.2f} {best:.2f} {loop:.2f} {lab}")
    for dt in DTYPES:
        bests = [b for d, _, _, b, _, _ in summary if d == dt]
        if bests:
            print(f"  {dt}: best-of-candidates min {min(bests):.2f}, below 0.90 at {sum(b < 0.90 for b in bests)} "
                  f"of {len(bests)} widths")
    print(f"sweep rmsnorm_candidates: {time.time() - t0:.0f} s", flush=True)
    return 0
