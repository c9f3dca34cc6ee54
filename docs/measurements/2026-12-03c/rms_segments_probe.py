"""RMSNorm's thin bf16 margins (goal 3), probed on the H200: the power-of-two rule against the
package's warp-segment kernel (``lessons/rmsnorm/warp_segments.py``: a row held by W whole warps,
the sum within each warp and then across the W warps through shared memory).

Widths: every bf16 width the last ``rmsnorm_widths_bf16`` record put below 0.913 of copy, and
their neighbours (6176-6400, 7392-7520, 4128-4256, 3104-3232), plus fp16 at 6176/6272/6400.
Candidates per width:

  rule       the op's power-of-two layout (kernel.default_config)
  gG/mbB     G lanes of the row (a power of two), registers capped for B blocks per SM
  wW/rR/mbB  warp segments: W warps a row, R rows a block, registers capped for B blocks per SM

Each checked against the fp32 reference on a poisoned output (and on 37 ragged rows), then timed
two ways on 2^27 elements (256 MB of input): do_bench's median with the L2 flushed, and CUDA events
around 30 back-to-back calls; printed as ratios to the copy bandwidth measured in the same run,
in two rounds (the second in reverse order) so that drift shows.

    python3 rms_segments_probe.py            # on the GPU
    python3 rms_segments_probe.py --smoke    # here: every candidate builds for sm_90a (registers, spills)
"""
import os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.rmsnorm import kernel as rs
from tilelang_tutorial.lessons.rmsnorm.warp_segments import WarpSegmentConfig, warp_segment_rmsnorm_silu_program


def g(group, mb):
    return rs.RMSNormSiLUConfig(group=group, threads=max(256, group), fast_sigmoid=True, min_blocks=mb)


def w(W, R, mb):
    return WarpSegmentConfig(warps=W, rows_per_block=R, min_blocks=mb)


def cands(C, dt):
    out = [("rule", rs.default_config(C, dt))]
    if 6176 <= C <= 6400:
        out += [("w5/r1/mb6", w(5, 1, 6)), ("w5/r1/mb5", w(5, 1, 5))]
    elif 7392 <= C <= 7520:
        out += [("g256/mb5", g(256, 5)), ("w5/r1/mb5", w(5, 1, 5)), ("w6/r1/mb5", w(6, 1, 5))]
    elif 4128 <= C <= 4256:
        out += [("g128/mb5", g(128, 5)), ("w3/r2/mb4", w(3, 2, 4)), ("w3/r2/mb5", w(3, 2, 5)),
                ("w6/r1/mb5", w(6, 1, 5)), ("w6/r1/mb6", w(6, 1, 6))]
    elif 3104 <= C <= 3232:
        out += [("g64/mb3", g(64, 3)), ("w3/r2/mb5", w(3, 2, 5)), ("w3/r2/mb6", w(3, 2, 6)), ("w5/r1/mb6", w(5, 1, 6))]
    return out


def program(C, dt, cfg):
    if isinstance(cfg, WarpSegmentConfig):
        return warp_segment_rmsnorm_silu_program(C, dt, cfg)
    return rs.rmsnorm_silu_program(C, dt, cfg)


def job(j):
    C, dt, cfg = j
    runtime.compile_kernel(program(C, dt, cfg), arch="sm_90a")


PLAN = ([(C, "bfloat16") for C in range(6176, 6401, 32)] + [(C, "float16") for C in (6176, 6272, 6400)]
        + [(C, "bfloat16") for C in range(7392, 7521, 32)]
        + [(C, "bfloat16") for C in range(4128, 4257, 32)]
        + [(C, "bfloat16") for C in range(3104, 3233, 32)])


def main():
    import torch
    from tilelang_tutorial import inspector
    from tilelang_tutorial.lessons.rmsnorm.bench import gbps, traffic_bytes, widths_rows
    from tilelang_tutorial.lessons.rmsnorm.sweep import _back_to_back_ms

    t0 = time.time()
    jobs = [(C, dt, cfg) for C, dt in PLAN for _, cfg in cands(C, dt)]
    got = runtime.precompile(jobs, "rms_segments_probe:job")
    print(f"precompiled {sum(e is None for e in got.values())} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    copy = timing.measure_copy_gbps()
    print(f"copy ceiling {copy:.0f} GB/s", flush=True)
    for round_ in (1, 2):
        for C, dt in (PLAN if round_ == 1 else PLAN[::-1]):
            tdt = getattr(torch, dt)
            M = widths_rows(C)
            x = checks.random_tensor((M, C), tdt, "cuda")
            gamma = checks.random_tensor((C,), tdt, "cuda")
            y = checks.poisoned(x.shape, tdt, "cuda")
            ref = rs.rmsnorm_silu_reference(x, gamma, 1e-5)
            xr, yr = x[:37].contiguous(), checks.poisoned((37, C), tdt, "cuda")
            nbytes = traffic_bytes(M, C, x.element_size())
            row = []
            for name, cfg in cands(C, dt):
                if got.get((C, dt, cfg)) is not None:
                    row.append(f"{name} BUILD FAILED {str(got[(C, dt, cfg)])[:80]}")
                    continue
                k = runtime.compile_kernel(program(C, dt, cfg), arch="sm_90a")
                u = inspector.resource_usage(k)["main_kernel"]
                y.copy_(checks.poisoned(x.shape, tdt, "cuda"))
                k(x, gamma, y, 1e-5)
                k(xr, gamma, yr, 1e-5)
                torch.cuda.synchronize()
                cmp = checks.compare(y, ref, tolerance=checks.TOLERANCE[dt])
                cmpr = checks.compare(yr, ref[:37], tolerance=checks.TOLERANCE[dt])
                if not (cmp.ok and cmpr.ok):
                    row.append(f"{name} WRONG {cmp} / ragged {cmpr}")
                    continue
                ms = timing.median_ms(lambda: k(x, gamma, y, 1e-5), warmup_ms=5, rep_ms=15)
                loop = _back_to_back_ms(lambda: k(x, gamma, y, 1e-5))
                spill = f" spill{u['spill_stores']}" if u["spill_stores"] else ""
                row.append(f"{name}[{u['registers']}r{spill}] {gbps(nbytes, ms) / copy:.3f}/{gbps(nbytes, loop) / copy:.3f}")
            print(f"r{round_} {dt:<8} C={C:>5}: " + ", ".join(row), flush=True)
            x = y = ref = xr = yr = None
            torch.cuda.empty_cache()
    print(f"rms_segments_probe: {time.time() - t0:.0f} s", flush=True)


def smoke():
    from tilelang_tutorial import inspector
    for C, dt in PLAN[::4]:
        for name, cfg in cands(C, dt):
            k = runtime.compile_kernel(program(C, dt, cfg), arch="sm_90a")
            print(dt, C, name, inspector.resource_usage(k)["main_kernel"], flush=True)


if __name__ == "__main__":
    smoke() if "--smoke" in sys.argv else main()
