"""GPU experiment: 64 < M <= 128 where N / 64 is 66 ... 99: two rows of clamped 64 x 64 tiles
(more than 132 blocks) against one row of 128 x 64 tiles in two boxes (N / 64 blocks)."""
import sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk, last_rows
from tilelang_tutorial.lessons.gemm.rule import SMALL_M_TILES

NS = (4352, 4608, 5120, 5744, 6272)
KS = (4096, 6056)
MS = (65, 93, 121)
DTYPES = ("float16", "bfloat16")
VARIANTS = {"two rows, clamped": ("m64n64k128s4", "clamped"), "one row, two boxes": ("m128n64k64s6", "two boxes")}


def build(N, K, d, v):
    tile, rows = VARIANTS[v]
    return gk.build_gemm_relu(N, K, config=SMALL_M_TILES[tile], dtype=d, arch="sm_90a", program=last_rows.program_for(rows))


def precompile_job(job):
    build(*job)


if __name__ == "__main__":
    jobs = [(N, K, d, v) for N in NS for K in KS for d in DTYPES for v in VARIANTS]
    if "--precompile" in sys.argv:
        got = runtime.precompile(jobs, "m_band:precompile_job")
        print("precompiled", sum(e is None for e in got.values()), "of", len(got),
              [str(e)[:300] for e in got.values() if e is not None])
        sys.exit(0)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    print(f"{'shape':<18} {'dt':<5} {'torch':>7} " + " ".join(f"{v:>26}" for v in VARIANTS))
    for d in DTYPES:
        tdt = getattr(torch, d)
        for N in NS:
            for K in KS:
                ks = {v: runtime.launcher(build(N, K, d, v)) for v in VARIANTS}
                for M in MS:
                    a = checks.random_tensor((M, K), tdt, "cuda")
                    b = checks.random_tensor((K, N), tdt, "cuda")
                    ref = gk.gemm_relu_reference(a, b)
                    ct = torch.empty((M, N), dtype=tdt, device="cuda")
                    tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=30, return_mode="median") * 1e3
                    cells = []
                    for v, fn in ks.items():
                        c = checks.poisoned((M, N), tdt, "cuda")
                        fn(a, b, c)
                        torch.cuda.synchronize()
                        ok = checks.compare(c, ref, tolerance=checks.TOLERANCE[d]).ok
                        us = do_bench(lambda: fn(a, b, c), warmup=5, rep=30, return_mode="median") * 1e3
                        cells.append(f"{us:7.1f} {tt / us:5.2f}x {'ok' if ok else 'WRONG'}")
                    print(f"{f'{M}x{N}x{K}':<18} {d[:4]:<5} {tt:7.1f} " + " ".join(f"{s:>26}" for s in cells), flush=True)
