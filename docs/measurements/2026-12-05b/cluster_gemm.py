"""Two CTAs in a cluster sharing B's tile by TMA multicast, with the pipeline written by hand: the
small-M GEMM cuBLAS runs (``../2026-12-04b/gemm_peer_small_m.log``: ``nvjet_sm90_*_64x64_64x13``
in clusters of two, 13 stages of 64 in K) written in TileLang 0.1.15. Prepared 2026-12-05 without a
device left to run it; compiled for sm_90a on a CPU (``--compile``), never run (the tutorial's
emulator runs blocks one after another and refuses clusters).

Why by hand: inside ``T.Pipelined`` a multicast waits only on its own CTA's consumers before it
overwrites the peer's stage (``docs/tilelang-0.1.15-notes.md``, item 9e). Here every consumer thread
arrives at the "stage free" barrier of *both* CTAs (``T.mbarrier_arrive(empty[s], rank)``, a
cluster barrier), so each producer's wait on its own ``empty[s]`` means both CTAs are done with
stage ``s``: its own A may be loaded there, and rank 0 may multicast B into both. Each CTA's
``full[s]`` expects its A and B bytes (the multicast completes B's on both CTAs' barriers). The
cluster synchronises before any CTA exits, so no remote arrive lands on a CTA that has left.

The tile: 64 rows of C (one consumer warpgroup, ``wgmma`` m64) by ``block_N`` columns, ``block_K``
= 64, ``stages`` deep; grid y (rows of tiles) is rounded up to the cluster's two, a tile past
``m`` loads zeros (TMA) and stores nothing (bounded store).

Prediction (to test): at 78 x 4096 x 4096 the two CTAs of a column read B once between them where
the op's two rows of 64-row tiles read it twice, and 12 stages keep twice the op's bytes of B in
flight; if reading B from L2 twice is what holds the op at 0.89-0.90x torch there, this reaches
torch (cuBLAS's kernel is this shape). If it does not, the limit is elsewhere (launch, the last
wave, the flushed L2's write-back that every timing here carries).

    python3 cluster_gemm.py --compile   # anywhere: build for sm_90a, print the cluster parts of the code
    python3 cluster_gemm.py             # on the GPU: check (poisoned output, five calls) and time
"""
import sys, time

import tilelang.language as T

from tilelang_tutorial import checks, runtime, timing

CLUSTER = 2


def cluster_gemm_program(N, K, block_N=64, block_K=64, stages=12, in_dtype="float16", accum_dtype="float32"):
    """``C = ReLU(A @ B)``, m dynamic; the two row-tiles of a cluster share each tile of B."""
    m = T.dynamic("m")
    block_M = 64
    k_steps = -(-K // block_K)

    @T.prim_func
    def gemm_relu_cluster(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M * CLUSTER) * CLUSTER, threads=256,
                      cluster_dims=(1, CLUSTER, 1)) as (bx, by):
            A_s = T.alloc_shared((stages, block_M, block_K), in_dtype)
            B_s = T.alloc_shared((stages, block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([128] * stages)                       # this CTA's A and B of stage s landed
            empty = T.alloc_cluster_barrier([128 * CLUSTER] * stages)    # both CTAs' consumers done with stage s
            tx = T.get_thread_binding()
            if tx < 128:
                T.set_max_nreg(240, 1)
                T.fill(acc, 0)
                for ko in T.serial(k_steps):
                    s = ko % stages
                    T.barrier_wait(full[s], (ko // stages) % 2)
                    T.wgmma_gemm(A_s[s, :, :], B_s[s, :, :], acc)
                    T.wait_wgmma(0)
                    for rank in T.unroll(CLUSTER):
                        T.mbarrier_arrive(empty[s], rank)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = T.max(acc[i, j], 0)
                T.copy(acc, C[by * block_M, bx * block_N])
            else:
                T.set_max_nreg(40, 0)
                for ko in T.serial(k_steps):
                    s = ko % stages
                    T.barrier_wait(empty[s], 1 - (ko // stages) % 2)         # first pass: no wait
                    T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K], A_s[s, :, :],
                               barrier=full[s])
                    T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N], B_s[s, :, :],
                               barrier=full[s], cluster_mask=(1 << CLUSTER) - 1)
                    T.barrier_arrive(full[s])
            T.cluster_sync()

    return gemm_relu_cluster


def build(N, K, dtype="float16", block_N=64, stages=12, arch=None):
    return runtime.compile_kernel(cluster_gemm_program(N, K, block_N, 64, stages, dtype),
                                  arch=arch or runtime.current_arch())


#: the small-M shapes on the 0.90 line (the rule's record 0.89-0.90x torch on the H200)
SHAPES = [(78, 4096, 4096, "bfloat16"), (113, 4096, 4096, "bfloat16"), (128, 4096, 4096, "float16"),
          (80, 8192, 8192, "float16"), (78, 2048, 8192, "bfloat16"), (64, 4096, 4096, "float16")]
VARIANTS = [(64, 12), (64, 8), (32, 12)]          # (block_N, stages)


def job(j):
    N, K, dt, bn, st = j
    build(N, K, dt, bn, st)


if __name__ == "__main__":
    t0 = time.time()
    if "--compile" in sys.argv:
        import re

        k = build(4096, 4096, "float16", 64, 12, arch="sm_90a")
        src = k.get_kernel_source()
        print("cluster launch / multicast / remote arrive / cluster sync lines:")
        for line in src.splitlines():
            if re.search(r"cluster|multicast|arrive\(|\.wait\(|tma_load", line):
                print("   ", line.strip()[:160])
        from tilelang_tutorial import inspector

        print(inspector.resource_usage(k), "dynamic shared memory", runtime.dynamic_shared_memory(k))
        sys.exit(0)

    import torch
    from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench

    jobs = sorted({(N, K, dt, bn, st) for M, N, K, dt in SHAPES for bn, st in VARIANTS})
    got = runtime.precompile(jobs, "cluster_gemm:job")
    for j, e in sorted(got.items()):
        if e is not None:
            print("compile failed", j, repr(e)[:300])
    choices = {s: rule.choose(*s) for s in SHAPES}
    bench.prebuild_rule(choices)
    print(f"compiled in {time.time() - t0:.0f} s", flush=True)
    for M, N, K, dt in SHAPES:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        ms = timing.median_ms(lambda: gr.gemm_relu(a, b, out=out))
        print(f"\n{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {choices[(M, N, K, dt)].label} {ms * 1e3:.1f} us "
              f"{tt / ms:.2f}x", flush=True)
        for bn, st in VARIANTS:
            if got.get((N, K, dt, bn, st)) is not None:
                continue
            k = build(N, K, dt, bn, st)
            oks = []
            for _ in range(5):                       # a race shows as a wrong answer on some call
                out.copy_(checks.poisoned((M, N), a.dtype, "cuda"))
                k(a, b, out); torch.cuda.synchronize()
                oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
            cms = timing.median_ms(lambda: k(a, b, out))
            out.copy_(checks.poisoned((M, N), a.dtype, "cuda"))
            k(a, b, out); torch.cuda.synchronize()
            oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
            print(f"   cluster of 2, 64 x {bn}, {st} stages: {cms * 1e3:.1f} us {tt / cms:.2f}x "
                  f"{'ok' if all(oks) else 'WRONG ' + str(oks)}", flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"cluster_gemm: {time.time() - t0:.0f} s")
