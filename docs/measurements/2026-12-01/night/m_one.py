"""GPU experiment: the 128 x 64 tile at 64 < M <= 128: notebook 02's kernel (rows filled), two
slices (two multiplies), and two clamped 64-row boxes into one 128-row tile (one multiply)."""
import sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk
from tilelang_tutorial.lessons.gemm.rule import SMALL_M_TILES
from last_row_variants import VARIANTS

TILE = "m128n64k64s6"
NAMES = ("plain", "two_slice", "one_buffer")
WIDTHS = ((8192, 8192), (8192, 2048), (4096, 4096), (2048, 8192))
DTYPES = ("bfloat16", "float16")
MS = (65, 72, 80, 88, 93, 96, 104, 112, 119, 127, 128)


def build(N, K, dtype, v):
    return gk._build(None, N, K, SMALL_M_TILES[TILE], dtype, True, "sm_90a", VARIANTS[v])


def precompile_job(job):
    build(*job)


if __name__ == "__main__":
    jobs = [(N, K, d, v) for (N, K) in WIDTHS for d in DTYPES for v in NAMES]
    if "--precompile" in sys.argv:
        got = runtime.precompile(jobs, "m_one:precompile_job")
        print("precompiled", sum(e is None for e in got.values()), "of", len(got),
              [str(e)[:300] for e in got.values() if e is not None])
        sys.exit(0)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    t0 = time.time()
    for dtype in DTYPES:
        tdt = getattr(torch, dtype)
        for (N, K) in WIDTHS:
            print(f"\n== {dtype} N x K = {N} x {K}, tile {TILE}: do_bench median us (L2 flushed); x = torch / ours", flush=True)
            print(f"{'M':>4} {'torch':>7} " + " ".join(f"{v:>20}" for v in NAMES))
            kernels = {v: runtime.launcher(build(N, K, dtype, v)) for v in NAMES}
            for M in MS:
                a = checks.random_tensor((M, K), tdt, "cuda")
                b = checks.random_tensor((K, N), tdt, "cuda")
                ref = gk.gemm_relu_reference(a, b)
                ct = torch.empty((M, N), dtype=tdt, device="cuda")
                tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=30, return_mode="median") * 1e3
                cells = []
                for v, fn in kernels.items():
                    c = checks.poisoned((M, N), tdt, "cuda")
                    fn(a, b, c)
                    torch.cuda.synchronize()
                    ok = checks.compare(c, ref, tolerance=checks.TOLERANCE[dtype]).ok
                    us = do_bench(lambda: fn(a, b, c), warmup=5, rep=30, return_mode="median") * 1e3
                    cells.append(f"{us:7.1f} {tt / us:5.2f}x {'ok' if ok else 'WRONG'}")
                print(f"{M:>4} {tt:7.1f} " + " ".join(f"{s:>20}" for s in cells), flush=True)
    print(f"total {time.time() - t0:.0f} s")
