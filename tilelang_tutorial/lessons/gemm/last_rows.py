"""The last row of tiles: kernels of the op whose TMA boxes of ``A`` never reach past ``M``.

Notebook 02's kernel loads each block's ``block_M`` rows of ``A`` as one TMA box starting at row
``by * block_M``; where that box runs past ``M`` the TMA unit fills the missing rows with zeros.
The fill is correct but not free: on the H200 the kernel's time grows with the number of filled
rows (at ``N = K = 4096`` the 64 x 64 tile took 28.1 us at M = 65 and 22.5-22.6 us from M = 104 to 128,
where torch stays near 20 us; ``docs/performance-log.md``, 2026-12-01 night). Two kernels avoid it:

* :func:`clamped_program`: the last row of tiles starts at ``m - block_M`` instead, so its box
  lies inside ``A`` whenever ``m >= block_M``. Its first rows are rows the tile above also
  computes; both blocks compute them from the same data in the same order and store the same
  values, so the overlap is harmless.
* :func:`two_box_program`: a 128-row tile for ``64 < m < 128`` (one row of tiles, so there is
  nothing to clamp to): ``A`` comes in as two 64-row TMA boxes, each clamped to ``m - 64``, into
  the two halves of one shared tile, and each half of ``C`` goes back to the rows it came from.

``rule.choose`` says which kernel a shape gets (``GemmChoice.last_rows``); notebook 02b,
section 9, shows both and what they measured.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T

SLICE = 64      # wgmma's rows: the smallest tile, and the two-box kernel's box


def clamped_program(M, N, K, block_M=64, block_N=64, block_K=64, num_stages=4, threads=128,
                    policy="Square", swizzle_panel=0, swizzle_order="column", in_dtype="float16",
                    accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """``C = ReLU(A @ B)`` as :func:`.kernel.gemm_relu_program`, with the last row of tiles moved
    up to end at row ``m`` (the op uses it for its small-M tiles, which store from registers)."""
    if store_via_shared:
        raise ValueError("clamped_program stores C from registers: store_via_shared must be False")
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
            # The tile's first row: by * block_M, but never past m - block_M (0 when m < block_M).
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


def two_box_program(M, N, K, block_M=128, block_N=64, block_K=64, num_stages=6, threads=128,
                    policy="Square", swizzle_panel=0, swizzle_order="column", in_dtype="float16",
                    accum_dtype="float32", dynamic_m=False, store_via_shared=False):
    """``C = ReLU(A @ B)`` with each ``2 x SLICE``-row tile of ``A`` loaded as two 64-row TMA boxes,
    each starting no later than row ``m - 64``, into one shared tile (one multiply per step); the
    two halves of ``C`` are stored at the rows their boxes came from."""
    if block_M != 2 * SLICE or store_via_shared:
        raise ValueError(f"two_box_program needs block_M = {2 * SLICE} and store_via_shared False, "
                         f"got block_M={block_M}, store_via_shared={store_via_shared}")
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_two_box(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)
            last_box = T.max(m - SLICE, 0)
            top = T.min(by * block_M, last_box)              # the rows of A the upper half holds
            bottom = T.min(by * block_M + SLICE, last_box)   # ... and the lower half
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                # Regions on both sides (not corners): each copy is one 64-row TMA box into its half.
                T.copy(A[top:top + SLICE, ko * block_K:(ko + 1) * block_K], A_shared[0:SLICE, 0:block_K])
                T.copy(A[bottom:bottom + SLICE, ko * block_K:(ko + 1) * block_K],
                       A_shared[SLICE:2 * SLICE, 0:block_K])
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local[0:SLICE, 0:block_N], C[top:top + SLICE, bx * block_N:(bx + 1) * block_N])
            T.copy(C_local[SLICE:2 * SLICE, 0:block_N], C[bottom:bottom + SLICE, bx * block_N:(bx + 1) * block_N])

    return gemm_relu_two_box


#: GemmChoice.last_rows -> the factory the op builds ("filled": notebook 02's kernel, the TMA
#: filling rows past M with zeros)
PROGRAMS = {"filled": None, "clamped": clamped_program, "two boxes": two_box_program}


def program_for(last_rows: str):
    """The factory for a choice's ``last_rows`` (None: notebook 02's ``gemm_relu_program``)."""
    try:
        return PROGRAMS[last_rows]
    except KeyError:
        raise ValueError(f"last_rows must be one of {sorted(PROGRAMS)}, got {last_rows!r}") from None
