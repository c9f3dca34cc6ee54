"""The last row of tiles: kernels of the op whose TMA boxes of ``A`` stop at ``M`` (or within 7 rows of it).

Notebook 02's kernel loads each block's ``block_M`` rows of ``A`` as one TMA box starting at row
``by * block_M``; where that box runs past ``M`` the TMA unit fills the missing rows with zeros.
The fill is correct but not free: the kernel's time grows with the number of filled rows. Three
kernels avoid it:

* :func:`clamped_program`: the last row of tiles starts at ``m - block_M`` instead, so its box
  lies inside ``A`` whenever ``m >= block_M``. Its first rows are rows the tile above also
  computes; both blocks compute them from the same data in the same order and store the same
  values, so the overlap is harmless.
* :func:`two_box_program`: a 128-row tile for ``64 < m < 128`` (one row of tiles, so there is
  nothing to clamp to): ``A`` comes in as two 64-row TMA boxes, each clamped to ``m - 64``, into
  the two halves of one shared tile, and each half of ``C`` goes back to the rows it came from.
* :func:`short_box_program`: for ``m <= 64`` (one row of 64-row tiles) a box of ``A`` only
  ``a_rows`` tall (``m`` rounded up to 8), and :func:`short_partial_program`, the same for the
  split-K partial kernel.

Past 128 rows the rows are wasted another way: ``wgmma`` is 64 rows tall per warpgroup, so 275
rows take three 128-row tiles, the third 19 rows full. :func:`swapped_program` puts M on the
instruction's *width* instead (any multiple of 8 up to 256): it computes ``C^T = B^T A^T``, so 275
rows become two tiles 144 wide.

``rule.choose`` says which kernel a shape gets (``GemmChoice.last_rows``); notebook 02b shows them.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import functools

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
    if block_M != 2 * SLICE or block_K != SLICE or store_via_shared:
        raise ValueError(f"two_box_program needs block_M = {2 * SLICE}, block_K = {SLICE} and store_via_shared "
                         f"False, got block_M={block_M}, block_K={block_K}, store_via_shared={store_via_shared}")
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


def _check_short(a_rows, block_M, block_K):
    if block_M != SLICE or block_K not in (64, 128, 256) or a_rows % 8 or not 8 <= a_rows <= SLICE:
        raise ValueError(f"a short box needs block_M = {SLICE}, block_K in 64, 128, 256 and a_rows a multiple "
                         f"of 8 in 8..{SLICE}, got block_M={block_M}, block_K={block_K}, a_rows={a_rows}")


def short_box_program(M, N, K, block_M=64, block_N=64, block_K=64, num_stages=4, threads=128,
                      policy="Square", swizzle_panel=0, swizzle_order="column", in_dtype="float16",
                      accum_dtype="float32", dynamic_m=False, store_via_shared=False, a_rows=SLICE):
    """``C = ReLU(A @ B)`` for ``m <= a_rows <= 64`` (one row of tiles): each box of ``A`` is only
    ``a_rows`` tall. The tile's other rows are never loaded; the rows of ``C`` they make are never
    stored (row i of ``C`` reads row i of ``A`` only). The op builds it only where ``m <= a_rows``."""
    _check_short(a_rows, block_M, block_K)
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_short_box(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                # One box per 64 columns (a row of 128 bytes, the shared tile's swizzle unit): the
                # `if`s test Python ints, so they are decided here, not in the kernel.
                k0 = ko * block_K
                T.copy(A[0:a_rows, k0:k0 + 64], A_shared[0:a_rows, 0:64])
                if block_K > 64:
                    T.copy(A[0:a_rows, k0 + 64:k0 + 128], A_shared[0:a_rows, 64:128])
                if block_K > 128:
                    T.copy(A[0:a_rows, k0 + 128:k0 + 192], A_shared[0:a_rows, 128:192])
                    T.copy(A[0:a_rows, k0 + 192:k0 + 256], A_shared[0:a_rows, 192:256])
                T.copy(B[k0, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=warp_policy)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local[0:a_rows, 0:block_N], C[0:a_rows, bx * block_N:(bx + 1) * block_N])

    return gemm_relu_short_box


def short_partial_program(N, K, split, block_M=64, block_N=128, block_K=64, num_stages=4, threads=128,
                          policy="Square", in_dtype="float16", accum_dtype="float32", a_rows=SLICE):
    """:func:`.split_k.gemm_partial_program` with :func:`short_box_program`'s boxes of ``A``
    (``m <= a_rows <= 64``)."""
    _check_short(a_rows, block_M, block_K)
    m = T.dynamic("m")
    k_steps = -(-K // block_K)
    steps_per_split = -(-k_steps // split)
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_partial_short_box(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        W: T.Tensor((split, m, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), split, threads=threads) as (bx, bz):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for ko in T.Pipelined(steps_per_split, num_stages=num_stages):
                k0 = (bz * steps_per_split + ko) * block_K     # a last slice past K reads zeros
                T.copy(A[0:a_rows, k0:k0 + 64], A_shared[0:a_rows, 0:64])
                if block_K > 64:
                    T.copy(A[0:a_rows, k0 + 64:k0 + 128], A_shared[0:a_rows, 64:128])
                if block_K > 128:
                    T.copy(A[0:a_rows, k0 + 128:k0 + 192], A_shared[0:a_rows, 128:192])
                    T.copy(A[0:a_rows, k0 + 192:k0 + 256], A_shared[0:a_rows, 192:256])
                T.copy(B[k0, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc, policy=warp_policy)
            T.copy(acc[0:a_rows, 0:block_N], W[bz, 0:a_rows, bx * block_N:(bx + 1) * block_N])

    return gemm_partial_short_box


def swapped_program(M, N, K, block_M=144, block_N=128, block_K=64, num_stages=4, threads=256,
                    policy="FullRow", swizzle_panel=0, swizzle_order="column", in_dtype="float16",
                    accum_dtype="float32", dynamic_m=False, store_via_shared=True):
    """``C = ReLU(A @ B)`` computed tile by tile as ``C^T = B^T A^T``: each block holds ``block_N``
    rows of N (the tensor cores' 64-row side, one warpgroup per 64) by ``block_M`` columns of M
    (their width) in its fragment, then stores the tile transposed, through shared memory, into
    C. ``block_M`` is still the block's rows of M, so a grid of ``ceil(N / block_N) x ceil(m /
    block_M)`` blocks covers C as in notebook 02's kernel."""
    if store_via_shared is not True or swizzle_panel:
        raise ValueError("swapped_program stores C through shared memory and has no block swizzle: "
                         f"store_via_shared must be True and swizzle_panel 0, got {store_via_shared}, {swizzle_panel}")
    m = T.dynamic("m") if dynamic_m else M
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def gemm_relu_swapped(
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
                T.gemm(B_shared, A_shared, acc, transpose_A=True, transpose_B=True, policy=warp_policy)
            C_shared = T.alloc_shared((block_M, block_N), in_dtype)
            for i, j in T.Parallel(block_N, block_M):
                C_shared[j, i] = T.max(acc[i, j], 0)          # ReLU, cast, and the transpose back
            T.copy(C_shared, C[by * block_M, bx * block_N])   # one bounded (TMA) store

    return gemm_relu_swapped


def short_rows(M: int) -> int:
    """The short box's height for M <= 64 rows: M rounded up to a multiple of 8 (the swizzle's row group)."""
    return max(8, -(-M // 8) * 8)


#: GemmChoice.last_rows -> the factory the op builds ("filled": notebook 02's kernel, the TMA
#: filling rows past M with zeros; "short": short_box_program with the choice's a_rows; "swapped":
#: M on the instruction's width)
PROGRAMS = {"filled": None, "clamped": clamped_program, "two boxes": two_box_program, "short": short_box_program,
            "swapped": swapped_program}


@functools.lru_cache(maxsize=None)
def _bound(factory, a_rows):
    """``factory`` with ``a_rows`` fixed, one object per pair (the op's build cache keys on it)."""
    def program(*args, **kwargs):
        return factory(*args, a_rows=a_rows, **kwargs)
    program.__name__ = program.__qualname__ = f"{factory.__name__}[a_rows={a_rows}]"
    return program


def program_for(last_rows: str, a_rows: int = 0):
    """The factory for a choice's ``last_rows`` (None: notebook 02's ``gemm_relu_program``)."""
    if last_rows not in PROGRAMS:
        raise ValueError(f"last_rows must be one of {sorted(PROGRAMS)}, got {last_rows!r}")
    if last_rows == "short":
        return _bound(short_box_program, a_rows)
    return PROGRAMS[last_rows]


def partial_for(last_rows: str, a_rows: int = 0):
    """The split-K partial factory for a choice (None: split_k's ``gemm_partial_program``)."""
    return _bound(short_partial_program, a_rows) if last_rows == "short" else None


#: the emulator's checks for a short box: not "uninit" -- the tile's rows past a_rows are read by
#: T.gemm without ever being written, by design (they only make rows of C that are never stored)
EMULATOR_CHECKS = {"short": "races,limits"}
