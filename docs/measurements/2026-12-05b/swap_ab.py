"""The GEMM with A and B swapped in the tensor-core instruction ("swap AB"), for a few hundred rows.

Question. Past 128 rows the op still trails torch where M is a few hundred and N is wide
(275 x 7176 x 6528: 0.63x on an H100 on 2026-12-05, 0.68x on the H200 with every tile and split;
356 x 7176 x 5272, 637 x 3616 x 7856, 650 x 3744 x 8056 at 0.69-0.79x). The rows quantise badly:
``wgmma`` is 64 rows tall per warpgroup, so 275 rows take three 128-row tiles (the third 19 rows
full) or two 256-row tiles; its *width* (n) can be any multiple of 8 up to 256. Computing the
transposed tile, ``C^T = B^T A^T``, puts N on the 64-row side and M on the free width: 275 rows
become two tiles 144 wide (288, 5 % padding), and 57 tiles of 128 columns of N make 114 blocks,
one wave of 132 SMs.

The kernel: each block computes a ``block_N x block_M`` tile of C^T in an fp32 fragment, with
``T.gemm(B_shared, A_shared, acc, transpose_A=True, transpose_B=True)`` (B's tile is K x N,
so it enters as the transposed A operand; A's tile is M x K, the transposed B operand), then
the ReLU and a store of the tile, transposed, into C (through shared memory, or from the
fragment).

Prediction (to test): at 275 x 7176 x 6528 fp16 the swapped kernel on 114 blocks of 128 x 144 does
2 x 128 x 144 x 6528 FLOP per block, about 45 us at 700 TFLOP/s over 132 SMs, against the op's
93 us on the H100 and torch's 59 us (do_bench, L2 flushed; 41 us in the profiler): at or above
torch there. Where it is not, the rows were not what limited the op.

    python3 swap_ab.py              # on the GPU: check and time every candidate at every shape
    python3 swap_ab.py --resources  # anywhere: compile for sm_90a, registers and spills (ptxas)
    python3 swap_ab.py --emulate    # anywhere: run small ragged shapes in the tile emulator
"""
import sys, time

import tilelang.language as T

from tilelang_tutorial import checks, runtime, timing


def gemm_relu_swap_program(N, K, block_N=128, block_M=144, block_K=64, num_stages=4, threads=256,
                           in_dtype="float16", accum_dtype="float32", store_via_shared=True):
    """``C = ReLU(A @ B)`` (A: m x K, B: K x N, C: m x N, row-major; m dynamic) computed tile by tile
    as ``C^T = B^T A^T``: the block's fragment is ``block_N`` rows of N by ``block_M`` columns of M."""
    m = T.dynamic("m")

    @T.prim_func
    def gemm_relu_swap_kernel(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        # grid x walks N (the tensor cores' rows here), grid y walks M (their width)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_N, block_M), accum_dtype)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                # (B_shared)^T (block_N x block_K) times (A_shared)^T (block_K x block_M)
                T.gemm(B_shared, A_shared, acc, transpose_A=True, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
            if store_via_shared:
                C_shared = T.alloc_shared((block_M, block_N), in_dtype)
                for i, j in T.Parallel(block_N, block_M):
                    C_shared[j, i] = T.max(acc[i, j], 0)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                for i, j in T.Parallel(block_N, block_M):
                    if by * block_M + j < m and bx * block_N + i < N:
                        C[by * block_M + j, bx * block_N + i] = T.max(acc[i, j], 0)

    return gemm_relu_swap_kernel


def shape_inputs(M, N, K, dt):
    """fresh inputs for one shape on the GPU: ``(a, b, fp32 reference, poisoned C, torch's ms)``,
    torch ``relu(a @ b)`` timed (do_bench median, L2 flushed) on them"""
    import torch
    from tilelang_tutorial.lessons.gemm import bench, kernel as gr

    a, b = bench._inputs(M, N, K, dt)
    out = checks.poisoned((M, N), a.dtype, "cuda")
    return a, b, gr.gemm_relu_reference(a, b), out, timing.median_ms(lambda: torch.relu(a @ b))


def checked_ms(f, out, ref, dt):
    """``f()`` checked on a poisoned ``out`` twice, timed (do_bench median, L2 flushed), checked once
    more after the timing: (ms, "ok" or what failed)"""
    import torch

    oks = []
    for _ in range(2):
        out.copy_(checks.poisoned(tuple(out.shape), out.dtype, "cuda"))
        f(); torch.cuda.synchronize()
        oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
    ms = timing.median_ms(f)
    out.copy_(checks.poisoned(tuple(out.shape), out.dtype, "cuda"))
    f(); torch.cuda.synchronize()
    oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
    return ms, ("ok" if all(oks) else "WRONG " + str(oks))


def build_swap(N, K, dtype, block_N=128, block_M=144, block_K=64, num_stages=4, threads=256,
               store_via_shared=True, arch=None):
    prog = gemm_relu_swap_program(N, K, block_N, block_M, block_K, num_stages, threads, dtype,
                                  store_via_shared=store_via_shared)
    return runtime.compile_kernel(prog, arch=arch or runtime.current_arch())


def swap_tiles(M, N):
    """Candidate (block_N, block_M) for M rows: the rows split into 1-6 tiles of equal width
    (rounded up to 16, at most 256), N in tiles of 128 (two warpgroups of 64 rows)."""
    out = []
    for parts in range(1, 7):
        w = -(-M // parts)
        w = -(-w // 16) * 16
        if w > 256:
            continue
        # the grid has ceil(M / w) rows of tiles (first written as `parts`, which double-counted
        # widths two splits share: swap_ab.log's repeated lines are the same kernel timed twice)
        blocks = -(-M // w) * -(-N // 128)
        if blocks <= 2 * 132:
            out.append((128, w, blocks))
    return out


#: (M, N, K, dtype): the few-block misses past 128 rows, then controls
SHAPES = [(275, 7176, 6528, "float16"), (356, 7176, 5272, "float16"), (637, 3616, 7856, "float16"),
          (650, 3744, 8056, "float16"), (260, 1280, 7800, "float16"), (781, 1464, 4144, "bfloat16"),
          (228, 2336, 5672, "float16"), (183, 1248, 5024, "float16"), (227, 4560, 3056, "float16"),
          (593, 3200, 6176, "bfloat16"), (128, 4096, 4096, "float16"), (78, 4096, 4096, "bfloat16")]


def stages_for(block_N, block_M, block_K=64):
    """as many stages (up to 8) as fit 216 KiB (TileLang puts the C tile in the pipeline's buffers
    after the K loop: the --resources run reads 3 x 40 KiB for the 128 x 192 tile)"""
    stage = (block_N + block_M) * block_K * 2
    return max(2, min(8, (216 * 1024) // stage))


def jobs():
    out = []
    for M, N, K, dt in SHAPES:
        for bn, bm, _ in swap_tiles(M, N):
            out.append((N, K, dt, bn, bm, stages_for(bn, bm)))
    return sorted(set(out))


def job(j):
    N, K, dt, bn, bm, st = j
    build_swap(N, K, dt, bn, bm, 64, st)


if __name__ == "__main__":
    t0 = time.time()
    if "--emulate" in sys.argv:
        import re
        import torch

        runtime.force_emulation(True)
        from tilelang_tutorial.lessons.gemm import kernel as gr
        # M under one tile, one tile exactly, a ragged second tile, several; N = 200 and 264 leave a
        # partial column tile, K = 136 and 200 a partial step; widths 16 (the narrowest), 48 and 144
        # (not powers of two), 256 (the widest); one and two consumer warpgroups; C poisoned (NaN)
        cases = [(5, 200, 136, 64, 16), (48, 200, 136, 64, 48), (130, 200, 136, 64, 48), (37, 200, 136, 64, 144),
                 (300, 200, 136, 64, 144), (260, 200, 136, 64, 256), (150, 264, 200, 128, 80)]
        for dt in ("float16", "bfloat16"):
            tdt = getattr(torch, dt)
            for M, N, K, bn, bm in cases:
                k = build_swap(N, K, dt, bn, bm, 64, 2, 2 * bn, arch="sm_90a")
                a, b = checks.random_tensor((M, K), tdt, "cpu"), checks.random_tensor((K, N), tdt, "cpu")
                out = checks.poisoned((M, N), tdt, "cpu")
                runtime.run(k, a, b, out)
                r = checks.compare(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt])
                print(f"emulated {M}x{N}x{K} {dt} tile {bn}x{bm}: {r}")
        # the swap is in the instruction: n = the width of M, A operand (B's tile) read transposed
        k = build_swap(7176, 6528, "float16", 128, 144, 64, 6, arch="sm_90a")
        print("wgmma in the 128 x 144 build:", sorted(set(re.findall(r"wgmma_ss<[^>]*>", k.get_kernel_source()))))
        sys.exit(0)
    if "--resources" in sys.argv:
        from tilelang_tutorial import inspector

        runtime.set_arch("sm_90a")
        got = runtime.precompile(jobs(), "swap_ab:job")
        for j in sorted(got):
            if got[j] is not None:
                print("compile failed", j, repr(got[j])[:400]); continue
            N, K, dt, bn, bm, st = j
            k = build_swap(N, K, dt, bn, bm, 64, st)
            u = list(inspector.resource_usage(k).values())[0]
            print(f"{N}x{K} {dt:<8} {bn}x{bm} s{st}: {u.get('registers')} registers, "
                  f"{u.get('spill_stores', 0)}/{u.get('spill_loads', 0)} bytes spilled, "
                  f"smem {runtime.dynamic_shared_memory(k)}", flush=True)
        print(f"{time.time() - t0:.0f} s")
        sys.exit(0)

    import torch
    sys.path.insert(0, (__file__.rsplit("/", 1)[0] or ".") + "/../2026-12-02b")
    from gemm_peer import kernels_of
    from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench

    got = runtime.precompile(jobs(), "swap_ab:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in sorted(bad):
        print("compile failed", j, repr(got[j])[:300])
    choices = {s: rule.choose(*s) for s in SHAPES}
    bench.prebuild_rule(choices)
    print(f"compiled in {time.time() - t0:.0f} s", flush=True)

    summary = []
    for M, N, K, dt in SHAPES:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        ms, ok = checked_ms(lambda: gr.gemm_relu(a, b, out=out), out, ref, dt)
        best = (ms, "rule " + choices[(M, N, K, dt)].label)
        print(f"\n{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {choices[(M, N, K, dt)].label} "
              f"{ms * 1e3:.1f} us {tt / ms:.2f}x {ok}", flush=True)
        for kern in kernels_of(lambda: a @ b):
            print("   torch:", kern, flush=True)
        for bn, bm, blocks in swap_tiles(M, N):
            st = stages_for(bn, bm)
            if (N, K, dt, bn, bm, st) in bad:
                continue
            k = build_swap(N, K, dt, bn, bm, 64, st)
            sms, sok = checked_ms(lambda: k(a, b, out), out, ref, dt)
            print(f"   swap {bn}x{bm} s{st} {blocks:>4} blocks {sms * 1e3:7.1f} us {tt / sms:5.2f}x {sok}", flush=True)
            if sok == "ok" and sms < best[0]:
                best = (sms, f"swap {bn}x{bm}")
        summary.append(f"{M}x{N}x{K} {dt}: rule {tt / ms:.2f}x, best {best[1]} {tt / best[0]:.2f}x")
        del a, b, out, ref
        torch.cuda.empty_cache()
    print("\n" + "\n".join(summary))
    print(f"swap_ab: {time.time() - t0:.0f} s")
