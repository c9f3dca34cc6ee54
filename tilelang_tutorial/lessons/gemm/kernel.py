"""C = ReLU(A @ B): a tiled GEMM with the activation fused into its epilogue.

Design
------
* One thread block computes one ``block_M x block_N`` tile of C. It walks the K dimension in
  ``block_K`` steps: each step copies a tile of A and a tile of B from global into **shared**
  memory (``T.copy``) and multiplies them on the tensor cores into a **fragment** (registers,
  ``T.alloc_fragment``) that holds the fp32 partial sums (``T.gemm``).
* ``T.Pipelined(..., num_stages=S)`` keeps S shared-memory buffers in flight, so the copies of
  step k+1.. overlap the multiply of step k. On Hopper (sm_90a) TileLang turns the copies into
  TMA loads issued by a dedicated *producer* warpgroup that signals mbarriers, and the multiply
  into ``wgmma`` issued by the *consumer* warpgroups (warp specialization, ``setmaxnreg``); on
  Ampere/Ada (sm_80/sm_89) it becomes ``cp.async`` + ``mma.sync``.
* The epilogue (ReLU, then the cast to the input dtype) runs on the fragment while it is still in
  registers: C is written once, never re-read. That is the whole point of fusing: torch's
  ``relu(a @ b)`` writes C, then reads and writes it again.
* ``T.use_swizzle(panel)`` remaps which C tile each block computes (in panels of ``panel`` tiles),
  so blocks that run at the same time share rows of A / columns of B in L2; the hardware's launch
  order is unchanged.
* Ragged shapes: M, N, K need not be multiples of the tile. Loads past the edge read zeros (TMA
  fills out-of-bounds boxes with zeros; the non-TMA paths are predicated and zero-filled), zeros
  add nothing to the dot products, and TileLang bounds the final store to C. When a row pitch is
  not a multiple of 16 bytes (N or K not a multiple of 8 for 16-bit types) TMA cannot describe the
  tensor and TileLang falls back to predicated loads: still correct, slower.
* ``dynamic_m=True`` declares M with ``T.dynamic("m")``: one compiled kernel serves every batch
  size (the grid and the bounds checks read ``m`` at launch time). N and K stay compile-time
  constants (they are the weight's shape), which lets TileLang prove most bounds away.

The op, :func:`.op.gemm_relu`, always builds the dynamic-M kernel, keyed on (N, K, dtype, config), so
a model that calls it with many batch sizes compiles once per configuration the rule picks
(:mod:`.rule`: the tile, and a split of K for small M x N, from measured rates).
"""
# No `from __future__ import annotations`: T.prim_func evaluates the annotations of the kernel
# (T.Tensor(shape, dtype)) against the factory's local variables.
import functools

import tilelang.language as T

from ... import runtime

from .configs import (  # noqa: F401  (re-exported: gr.SEED_CONFIG, gr.GemmConfig, ...)
    POLICIES, SEED_CONFIG, SUPPORTED_DTYPES, SWIZZLE_ORDERS, TUNED_CONFIGS, GemmConfig, tuned_config,
)


def gemm_relu_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                      policy="Square", swizzle_panel=4, swizzle_order="column", in_dtype="float16",
                      accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """``C = ReLU(A @ B)`` with A (M, K), B (K, N) and C (M, N) row-major, C in ``in_dtype``.
    With ``dynamic_m`` the M argument is ignored and M becomes the runtime size ``m``."""
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_kernel(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        # One block per C tile: grid x walks N, grid y walks M.
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            # Remap which C tile each block computes (the hardware's launch order is unchanged), in
            # panels of `swizzle_panel` tiles, so that blocks running at the same time share rows
            # of A / columns of B in L2.
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            T.clear(C_local)

            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                # Tile copies global -> shared, the source named by the tile's top-left corner (the
                # extent is the destination's shape); out-of-range elements arrive as zeros.
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                # Tensor-core multiply-accumulate into the fp32 fragment.
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)

            # Fused epilogue, on registers: ReLU, then one bounded store (cast to in_dtype).
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            if store_via_shared:
                C_shared = T.alloc_shared((block_M, block_N), in_dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_relu_kernel


def _program_kwargs(config: GemmConfig) -> dict:
    return config.as_dict()


@functools.lru_cache(maxsize=None)
def _build(M, N, K, config: GemmConfig, dtype: str, dynamic_m: bool, arch: str, factory=None):
    program = (factory or gemm_relu_program)(M, N, K, in_dtype=dtype, dynamic_m=dynamic_m, **_program_kwargs(config))
    # No out_idx: the caller passes C, so tests can hand in a poisoned buffer.
    return runtime.compile_kernel(program, arch=arch)


def build_gemm_relu(N: int, K: int, *, M: int | None = None, config: GemmConfig | None = None,
                    dtype: str = "float16", arch: str | None = None, program=None):
    """Compile (once per key) the kernel for a given N, K, dtype and config.

    ``M=None`` (the default) builds the dynamic-M kernel that serves every M. The compiled kernel
    is called as ``kernel(A, B, C)``. ``program``: a factory with :func:`gemm_relu_program`'s
    signature to build instead of this module's (a notebook passes its own kernel cell's).
    """
    config = config or SEED_CONFIG
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"dtype must be one of {SUPPORTED_DTYPES}, got {dtype!r}")
    if N <= 0 or K <= 0 or (M is not None and M <= 0):
        raise ValueError(f"N, K (and a static M) must be positive, got M={M}, N={N}, K={K}")
    arch = arch or runtime.current_arch()
    if program is None:
        return _build(M, int(N), int(K), config, dtype, M is None, arch)
    return _build(M, int(N), int(K), config, dtype, M is None, arch, program)


def gemm_relu_reference(a, b):
    """ReLU(A @ B) computed in fp32 from the same (rounded) inputs."""
    import torch

    return torch.relu(a.to(torch.float32) @ b.to(torch.float32))
