"""RMSNorm's last misses of goal 3 (fp16 7200-7360, bf16 6176-6240 and 3104), probed on the H200.

Found here first (ptxas, no GPU): at C = 7200-7360 the rule gives 256 lanes of 4 vectors capped
for 5 blocks (48 registers); in fp16 that build spills (16 bytes stored, 24 loaded), in bf16 it
does not -- and the width suites read fp16 0.896-0.905 of copy there against bf16 0.931-0.944 (so bf16 there: the rule against a
4-block cap).
Candidates per width and dtype:

  rule        the op's layout (kernel.default_config)
  gG/mbB      G lanes of the row (a power of two), registers capped for B blocks per SM
  wWvV/mbB    rms_warps.py: W whole warps own a row (W not a power of two), V vectors a lane,
              the sum within each warp then across the W warps through shared memory

Each checked against the fp32 reference on a poisoned output (and on 37 ragged rows), then timed
two ways on 2^27 elements (256 MB of input): do_bench's median with the L2 flushed, and CUDA events
around 30 back-to-back calls; printed as ratios to the copy bandwidth measured in the same run.

    python3 rms_probe.py
"""
import os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.rmsnorm import kernel as rs
import rms_warps


def cfg(g, mb):
    return ("g", rs.RMSNormSiLUConfig(group=g, threads=max(256, g), fast_sigmoid=True, min_blocks=mb))


def cands(C, dt):
    rule = rs.default_config(C, dt)
    out = [("rule", ("g", rule))]
    if dt == "float16":
        out += [("g256/mb4", cfg(256, 4))]
        for W, V in ((5, 6), (6, 5)):
            out += [(f"w{W}v{V}/mb{mb}", ("w", (W, V, mb))) for mb in (4, 5)]
    elif C > 7168:     # past the band: the rule's 256 lanes of 4 under a 5-block cap (no spill in bf16)
        out += [("g256/mb4", cfg(256, 4))]
    elif C >= 6000:
        out += [("g128/mb4", cfg(128, 4))]
        if C <= 6400:
            out += [(f"w5v5/mb{mb}", ("w", (5, 5, mb))) for mb in (4, 5, 6)]
    else:   # 3104 .. 3168: 388-396 vectors
        out += [("g128/mb4", cfg(128, 4)), ("g64/mb3", cfg(64, 3)), ("g64/mb4", cfg(64, 4))]
        out += [(f"w7v2/mb{mb}", ("w", (7, 2, mb))) for mb in (5, 6)]
    return out


def program(C, dt, spec):
    kind, c = spec
    if kind == "g":
        return rs.rmsnorm_silu_program(C, dt, c)
    W, V, mb = c
    return rms_warps.program(C, dt, W, V, min_blocks=mb)


def job(j):
    C, dt, spec = j
    runtime.compile_kernel(program(C, dt, spec), arch="sm_90a")


PLAN = ([(C, "float16") for C in range(7200, 7361, 32)]
        + [(C, "bfloat16") for C in (6176, 6208, 6240, 6304, 6432, 6688, 6944, 7136)]
        + [(C, "bfloat16") for C in (3104, 3136, 3168)]
        + [(C, "bfloat16") for C in (7200, 7264, 7328)])


def main():
    import torch
    from tilelang_tutorial import inspector
    from tilelang_tutorial.lessons.rmsnorm.bench import gbps, traffic_bytes, widths_rows
    from tilelang_tutorial.lessons.rmsnorm.sweep import _back_to_back_ms

    t0 = time.time()
    jobs = [(C, dt, spec) for C, dt in PLAN for _, spec in cands(C, dt)]
    got = runtime.precompile(jobs, "rms_probe:job")
    print(f"precompiled {sum(e is None for e in got.values())} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    copy = timing.measure_copy_gbps()
    print(f"copy ceiling {copy:.0f} GB/s", flush=True)
    for C, dt in PLAN:
        tdt = getattr(torch, dt)
        M = widths_rows(C)
        x = checks.random_tensor((M, C), tdt, "cuda")
        gamma = checks.random_tensor((C,), tdt, "cuda")
        y = checks.poisoned(x.shape, tdt, "cuda")
        ref = rs.rmsnorm_silu_reference(x, gamma, 1e-5)
        xr, yr = x[:37].contiguous(), checks.poisoned((37, C), tdt, "cuda")
        nbytes = traffic_bytes(M, C, x.element_size())
        row = []
        for name, spec in cands(C, dt):
            if got.get((C, dt, spec)) is not None:
                row.append(f"{name} BUILD FAILED {str(got[(C, dt, spec)])[:80]}")
                continue
            k = runtime.compile_kernel(program(C, dt, spec), arch="sm_90a")
            u = inspector.resource_usage(k)["main_kernel"]
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
        print(f"{dt:<8} C={C:>5}: " + ", ".join(row), flush=True)
        x = y = ref = None
        torch.cuda.empty_cache()
    print(f"rms_probe: {time.time() - t0:.0f} s", flush=True)


def smoke():
    """Here, without a GPU: each branch's candidates build for sm_90a (ptxas registers and spills)."""
    from tilelang_tutorial import inspector
    for C, dt in ((7200, "float16"), (6176, "bfloat16"), (3104, "bfloat16"), (7200, "bfloat16")):
        for name, spec in cands(C, dt):
            k = runtime.compile_kernel(program(C, dt, spec), arch="sm_90a")
            print(dt, C, name, inspector.resource_usage(k)["main_kernel"], flush=True)


if __name__ == "__main__":
    smoke() if "--smoke" in sys.argv else main()
