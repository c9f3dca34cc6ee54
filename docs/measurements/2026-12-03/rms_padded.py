"""The RMSNorm kernel's padded band: where a row's 16-byte vectors do not fill the lanes' slots
(C = 6176: 772 vectors over 256 lanes, 4 slots, a quarter empty), do fewer padded slots or
skipping their SiLU bring the op to 0.90 of copy? Candidates per width and dtype:

  rule      the op's layout (kernel.default_config), the kernel as it is
  rule+g    the same layout, the SiLU skipped on padded slots (gamma read into a register tile
            first, then `if j < C`; rms_variants.py guard 2)
  gN/mbB    a smaller group N with up to 8 slots a lane where it pads less than the rule's,
            registers capped for B blocks per SM, without (+0) and with (+g) the skip

Each checked against the fp32 reference on a poisoned output, then timed two ways on 2^27
elements (256 MB of input): do_bench's median with the L2 flushed, and CUDA events around 30
back-to-back calls; printed as ratios to the copy bandwidth measured in the same run.

    python3 rms_padded.py [C ...]
    python3 rms_padded.py --band     # the second pass (band_cands)
"""
import sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.rmsnorm import kernel as rs
from tilelang_tutorial.lessons.rmsnorm.bench import gbps, traffic_bytes, widths_rows
from tilelang_tutorial.lessons.rmsnorm.sweep import _back_to_back_ms
import rms_variants as rv

FP16 = (6176, 6400, 6688, 7008, 7296, 7328, 3104, 4096, 5120, 8192)
BF16 = (2592, 5152, 5216, 6176, 6688, 4096)
#: second pass (--band): every 64th width of the padded band in both dtypes, and bf16's other misses
BAND = tuple(range(6176, 7361, 64))
BF16_MISSES = (1312, 2592, 2656, 2720, 4128, 4192, 5152, 5184, 5216)


def fill(C, g):
    n = C // rs.VEC
    return n / (g * -(-n // g))


def cands(C, dt):
    if BAND_MODE:
        return band_cands(C, dt)
    rule = rs.default_config(C, dt)
    out = [("rule", rule, 0), ("rule+g", rule, 2)]
    n = C // rs.VEC
    for g in rs.valid_groups(C):
        slots = -(-n // g)
        if g >= 4 and g < rule.group and slots <= 8 and fill(C, g) > fill(C, rule.group) + 0.02:
            for mb in (3, 4):
                cfg = rs.RMSNormSiLUConfig(group=g, threads=max(256, g), fast_sigmoid=True, min_blocks=mb)
                out += [(f"g{g}/mb{mb}+0", cfg, 0), (f"g{g}/mb{mb}+g", cfg, 2)]
    return out


BAND_MODE = False


def band_cands(C, dt):
    """--band: the rule, and half the rule's group (up to 8 slots) capped for 3 and 4 blocks; the
    SiLU skip only at bf16's misses outside the band (where the rule's lanes hold 3 or 4 slots)."""
    rule = rs.default_config(C, dt)
    out = [("rule", rule, 0)]
    g = rule.group // 2
    if g >= 4 and -(-(C // rs.VEC) // g) <= 8:
        for mb in ((3,) if dt == "float16" else (3, 4)):
            cfg = rs.RMSNormSiLUConfig(group=g, threads=max(256, g), fast_sigmoid=True, min_blocks=mb)
            out.append((f"g{g}/mb{mb}+0", cfg, 0))
    if C not in BAND:
        out.append(("rule+g", rule, 2))
    return out


def job(j):
    C, dt, cfg, guard = j
    runtime.compile_kernel(rv.program(C, dt, cfg, guard))


def main():
    global BAND_MODE
    BAND_MODE = "--band" in sys.argv
    widths = [int(a) for a in sys.argv[1:] if a.isdigit()]
    if BAND_MODE:
        plan = [(C, "float16") for C in BAND] + [(C, "bfloat16") for C in BAND + BF16_MISSES]
    else:
        plan = [(C, "float16") for C in (widths or FP16)] + [(C, "bfloat16") for C in (widths or BF16)]
    t0 = time.time()
    jobs = [(C, dt, cfg, guard) for C, dt in plan for _, cfg, guard in cands(C, dt)]
    got = runtime.precompile(jobs, "rms_padded:job")
    print(f"precompiled {sum(e is None for e in got.values())} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    for j, e in got.items():
        if e is not None:
            print(f"  build failed {j[:2]} {j[2]} guard {j[3]}: {type(e).__name__}: {str(e)[:200]}")
    copy = timing.measure_copy_gbps()
    print(f"copy ceiling {copy:.0f} GB/s", flush=True)
    for C, dt in plan:
        tdt = getattr(torch, dt)
        M = widths_rows(C)
        x = checks.random_tensor((M, C), tdt, "cuda")
        gamma = checks.random_tensor((C,), tdt, "cuda")
        y = checks.poisoned(x.shape, tdt, "cuda")
        ref = rs.rmsnorm_silu_reference(x, gamma, 1e-5)
        nbytes = traffic_bytes(M, C, x.element_size())
        row = []
        for name, cfg, guard in cands(C, dt):
            if got.get((C, dt, cfg, guard)) is not None:
                continue
            k = runtime.compile_kernel(rv.program(C, dt, cfg, guard))
            y.fill_(float("nan"))
            k(x, gamma, y, 1e-5)
            torch.cuda.synchronize()
            cmp = checks.compare(y, ref, tolerance=checks.TOLERANCE[dt])
            if not cmp.ok:
                row.append(f"{name} WRONG {cmp}")
                continue
            ms = timing.median_ms(lambda: k(x, gamma, y, 1e-5), warmup_ms=5, rep_ms=15)
            loop = _back_to_back_ms(lambda: k(x, gamma, y, 1e-5))
            row.append(f"{name} {gbps(nbytes, ms) / copy:.3f}/{gbps(nbytes, loop) / copy:.3f}")
        print(f"{dt:<8} C={C:>5} rule g{rs.default_config(C, dt).group} fill {fill(C, rs.default_config(C, dt).group):.2f}: "
              + ", ".join(row), flush=True)
        x = y = ref = None
        torch.cuda.empty_cache()
    print(f"rms_padded: {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
