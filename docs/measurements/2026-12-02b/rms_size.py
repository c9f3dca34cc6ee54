"""RMSNorm + SiLU at the missed widths: the op's kernel at the widths suite's M and at X = 2^27
elements, against a torch copy of the same bytes and the 2 GiB copy ceiling (do_bench, L2 flushed)."""
import sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.rmsnorm import kernel as rs, bench

POINTS = [(32, "float16"), (32, "bfloat16"), (64, "float16"), (96, "float16"), (6176, "float16"),
          (2592, "bfloat16"), (5152, "bfloat16"), (5216, "bfloat16"), (6176, "bfloat16"), (1024, "float16"), (4096, "float16")]


def job(j):
    C, dt = j
    rs.build_rmsnorm_silu(C, dt, config=rs.config_for(C, dt))


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


if __name__ == "__main__":
    t0 = time.time()
    runtime.precompile(sorted(set(POINTS)), "rms_size:job")
    print(f"precompiled in {time.time() - t0:.0f} s", flush=True)
    ceiling = timing.measure_copy_gbps()
    print(f"copy ceiling (2 GiB fp32, torch) {ceiling:.0f} GB/s", flush=True)
    for C, dt in POINTS:
        tdt = getattr(torch, dt)
        k = rs.build_rmsnorm_silu(C, dt, config=rs.config_for(C, dt))
        for M in sorted({bench.rows_for(C), bench.MAX_ELEMENTS // C}):
            x = checks.random_tensor((M, C), tdt, "cuda")
            g = checks.random_tensor((C,), tdt, "cuda")
            y = checks.poisoned(x.shape, tdt, "cuda")
            k(x, g, y, 1e-5); torch.cuda.synchronize()
            cmp = checks.compare(y, rs.rmsnorm_silu_reference(x, g, 1e-5), tolerance=checks.TOLERANCE[dt])
            nb = bench.traffic_bytes(M, C, 2)
            ms = min(timing.median_ms(lambda: k(x, g, y, 1e-5)) for _ in range(3))
            cp = min(timing.median_ms(lambda: y.copy_(x)) for _ in range(3))
            print(f"C={C:>5} {dt:<9} M={M:>8} X={x.numel() * 2 / 2**20:6.0f} MiB: kernel {ms * 1e3:7.1f} us "
                  f"{gbps(nb, ms):6.0f} GB/s = {gbps(nb, ms) / ceiling:.3f} of the ceiling; same-bytes copy "
                  f"{cp * 1e3:7.1f} us {gbps(2 * x.numel() * 2, cp):6.0f} GB/s = {gbps(2 * x.numel() * 2, cp) / ceiling:.3f}; "
                  f"kernel/copy(same bytes) {cp / ms:.3f}  {'ok' if cmp.ok else 'WRONG'} {cmp.rel_error:.1e}", flush=True)
            del x, y
        torch.cuda.empty_cache()
