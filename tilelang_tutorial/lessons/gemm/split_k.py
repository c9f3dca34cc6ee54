"""Split-K GEMM + ReLU: for a C too small to fill the GPU (small M and N) with a long K.

One tile of C per block leaves most SMs idle when M x N holds fewer tiles than the GPU has SMs
(M = 16, N = 4096 and 128-wide tiles: 32 blocks on 132 SMs). Splitting K gives each tile
``split`` blocks, each summing one slice of K into an fp32 partial; a second kernel adds the
partials, applies the ReLU and casts. The partials cost ``2 x split x M x N x 4`` bytes of extra
traffic, small exactly when M x N is small -- which is when the split is worth it.
``rule.choose`` decides when (``notebooks/02b_gemm_in_depth.ipynb`` shows the rule).
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import functools

import tilelang.language as T

from ... import runtime
from .configs import GemmConfig

#: The reduction kernel's tile: 16 rows (small M is why we are here) by 256 columns.
REDUCE_BLOCK_M, REDUCE_BLOCK_N, REDUCE_THREADS = 16, 256, 128


def gemm_partial_program(N, K, split, block_M=64, block_N=128, block_K=64, num_stages=4, threads=128,
                         policy="Square", in_dtype="float16", accum_dtype="float32"):
    """``W[s] = A[:, Ks] @ B[Ks, :]`` in fp32 for each of ``split`` slices Ks of K (dynamic M)."""
    m = T.dynamic("m")
    k_steps = -(-K // block_K)
    steps_per_split = -(-k_steps // split)
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_partial_kernel(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        W: T.Tensor((split, m, N), accum_dtype),
    ):
        # grid z walks the K slices: blocks (bx, by, 0..split-1) share one tile of C
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), split, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for ko in T.Pipelined(steps_per_split, num_stages=num_stages):
                # a last slice that runs past K reads zeros, which add nothing
                T.copy(A[by * block_M, (bz * steps_per_split + ko) * block_K], A_shared)
                T.copy(B[(bz * steps_per_split + ko) * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc, policy=warp_policy)
            T.copy(acc, W[bz, by * block_M, bx * block_N])

    return gemm_partial_kernel


def splitk_reduce_relu_program(N, split, out_dtype="float16", accum_dtype="float32"):
    """``C = ReLU(sum_s W[s])`` cast to ``out_dtype`` (dynamic M)."""
    m = T.dynamic("m")
    bm, bn = REDUCE_BLOCK_M, REDUCE_BLOCK_N

    @T.prim_func
    def splitk_reduce_relu_kernel(
        W: T.Tensor((split, m, N), accum_dtype),
        C: T.Tensor((m, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(m, bm), threads=REDUCE_THREADS) as (bx, by):
            part = T.alloc_fragment((bm, bn), accum_dtype)
            total = T.alloc_fragment((bm, bn), accum_dtype)
            T.clear(total)
            for s in T.serial(split):
                T.copy(W[s, by * bm, bx * bn], part)
                for i, j in T.Parallel(bm, bn):
                    total[i, j] += part[i, j]
            for i, j in T.Parallel(bm, bn):
                total[i, j] = T.max(total[i, j], 0)
            T.copy(total, C[by * bm, bx * bn])

    return splitk_reduce_relu_kernel


def _partial_knobs(config: GemmConfig) -> dict:
    return {k: getattr(config, k) for k in ("block_M", "block_N", "block_K", "num_stages", "threads", "policy")}


@functools.lru_cache(maxsize=None)
def _build(N, K, split, config, dtype, arch, partial_program=None):
    partial = runtime.compile_kernel((partial_program or gemm_partial_program)(
        N, K, split, in_dtype=dtype, **_partial_knobs(config)), arch=arch)
    reduce = runtime.compile_kernel(splitk_reduce_relu_program(N, split, out_dtype=dtype), arch=arch)
    return partial, reduce


def build_split_k(N: int, K: int, split: int, config: GemmConfig, dtype: str = "float16", arch: str | None = None,
                  partial_program=None):
    """The two compiled kernels (partial GEMM, reduce + ReLU) for this N, K, split and tile;
    ``partial_program``: a factory with :func:`gemm_partial_program`'s signature to build instead
    (the op's short-box partial, :mod:`.last_rows`)."""
    if split < 2:
        raise ValueError(f"split must be >= 2 (split=1 is the plain kernel), got {split}")
    return _build(int(N), int(K), int(split), config, dtype, arch or runtime.current_arch(), partial_program)


def programs(N, K, split, config: GemmConfig, dtype: str, partial_program=None):
    """The two ``T.prim_func`` s :func:`build_split_k` compiles (what a record measured)."""
    return [(partial_program or gemm_partial_program)(N, K, split, in_dtype=dtype, **_partial_knobs(config)),
            splitk_reduce_relu_program(N, split, out_dtype=dtype)]
