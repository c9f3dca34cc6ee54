"""Experiment: is the M ~ 90 slowness the TMA's out-of-bounds fill of the last row of 64-row A boxes?
Plain kernel vs the same kernel with the last row tile's origin clamped to m - block_M (no OOB rows
when m >= block_M; the overlapping rows computed twice and written with the same values)."""
import sys, time, os
import tilelang.language as T
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk
from tilelang_tutorial.lessons.gemm.rule import SMALL_M_TILES


def clamped_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                    policy="Square", swizzle_panel=4, swizzle_order="column", in_dtype="float16",
                    accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_clamped(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            row0 = T.min(by * block_M, T.max(m - block_M, 0))
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[row0, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[row0, bx * block_N])

    return gemm_relu_clamped


TILES = ("m64n64k128s4", "m64n64k64s8")
WIDTHS = ((4096, 4096), (8192, 8192), (2048, 8192))
DTYPES = ("bfloat16", "float16")
MS = (64, 65, 72, 80, 88, 93, 96, 104, 112, 119, 120, 127, 128)


def build(N, K, tile, dtype, clamped):
    return gk._build(None, N, K, SMALL_M_TILES[tile], dtype, True, "sm_90a", clamped_program if clamped else None)


def precompile_job(job):
    build(*job)


if __name__ == "__main__":
    jobs = [(N, K, t, d, c) for (N, K) in WIDTHS for t in TILES for d in DTYPES for c in (False, True)]
    if "--precompile" in sys.argv:
        got = runtime.precompile(jobs, "m_clamp:precompile_job")
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
            print(f"\n== {dtype} N x K = {N} x {K}: do_bench median us (L2 flushed); x = torch / ours", flush=True)
            print(f"{'M':>4} {'torch':>7} " + " ".join(f"{t + (' clamp' if c else ''):>20}" for t in TILES for c in (False, True)))
            kernels = {(t, c): runtime.launcher(build(N, K, t, dtype, c)) for t in TILES for c in (False, True)}
            for M in MS:
                a = checks.random_tensor((M, K), tdt, "cuda")
                b = checks.random_tensor((K, N), tdt, "cuda")
                ref = gk.gemm_relu_reference(a, b)
                ct = torch.empty((M, N), dtype=tdt, device="cuda")
                tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=30, return_mode="median") * 1e3
                cells = []
                for key, fn in kernels.items():
                    c = checks.poisoned((M, N), tdt, "cuda")
                    fn(a, b, c)
                    torch.cuda.synchronize()
                    ok = checks.compare(c, ref, tolerance=checks.TOLERANCE[dtype]).ok
                    us = do_bench(lambda: fn(a, b, c), warmup=5, rep=30, return_mode="median") * 1e3
                    cells.append(f"{us:7.1f} {tt / us:5.2f}x {'ok' if ok else 'WRONG'}")
                print(f"{M:>4} {tt:7.1f} " + " ".join(f"{s:>20}" for s in cells), flush=True)
    print(f"total {time.time() - t0:.0f} s")
