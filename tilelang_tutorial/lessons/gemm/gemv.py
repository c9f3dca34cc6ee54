"""GEMV-shaped GEMM + ReLU for a few rows (M <= ``max_m``): plain CUDA cores, no tensor cores.

At M <= 8 the tensor-core tile wastes at least 56 of its 64 rows, and what bounds the time is
reading B once (N x K x 2 bytes). Here each block owns ``block_N`` columns of C and all of K:
a thread owns 8 adjacent columns (one 16-byte load of a row of B) and every ``k_lanes``-th row of
K, and keeps ``max_m x 8`` fp32 sums in registers; the ``k_lanes`` partial sums of each column
are added through shared memory at the end, then the ReLU, the cast and one bounded store. One
launch, no split-K pass: the ReLU comes after the whole sum.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import functools

import tilelang.language as T

VEC = 8          # 16-byte loads of 16-bit data


def gemv_relu_program(N, K, max_m=8, block_N=32, k_lanes=64, unroll=4, in_dtype="float16",
                      accum_dtype="float32"):
    """``C = ReLU(A @ B)`` for ``m <= max_m`` rows (dynamic ``m``); N a multiple of 8."""
    m = T.dynamic("m")
    n_lanes = block_N // VEC
    rows_per_step = k_lanes * unroll
    outputs = max_m * block_N
    outputs_per_thread = -(-outputs // (n_lanes * k_lanes))

    @T.prim_func
    def gemv_relu_kernel(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), threads=(n_lanes, k_lanes)) as bx:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            acc = T.alloc_local((max_m, VEC), accum_dtype)
            b_rows = T.alloc_local((unroll, VEC), in_dtype)
            a_vals = T.alloc_local((unroll, max_m), in_dtype)
            partial = T.alloc_shared((k_lanes, max_m, block_N), accum_dtype)
            column = bx * block_N + tn * VEC
            for i in T.unroll(max_m):
                for v in T.unroll(VEC):
                    acc[i, v] = 0
            for ko in T.serial(T.ceildiv(K, rows_per_step)):
                # `unroll` independent 16-byte loads of B in flight per thread, then the arithmetic
                for u in T.unroll(unroll):
                    k = ko * rows_per_step + u * k_lanes + tk
                    for v in T.vectorized(VEC):
                        b_rows[u, v] = T.if_then_else((k < K) and (column < N), B[k, column + v], 0)
                    for i in T.unroll(max_m):
                        a_vals[u, i] = T.if_then_else((k < K) and (i < m), A[i, k], 0)
                for u in T.unroll(unroll):
                    for i in T.unroll(max_m):
                        for v in T.unroll(VEC):
                            acc[i, v] += T.cast(a_vals[u, i], accum_dtype) * T.cast(b_rows[u, v], accum_dtype)
            for i in T.unroll(max_m):
                for v in T.unroll(VEC):
                    partial[tk, i, tn * VEC + v] = acc[i, v]
            # add the k_lanes partial sums of each output, ReLU, cast, store
            for o in T.unroll(outputs_per_thread):
                flat = (tk * n_lanes + tn) * outputs_per_thread + o
                i = flat // block_N
                j = flat % block_N
                total = T.alloc_local((1,), accum_dtype)
                if flat < outputs:
                    total[0] = 0
                    for lane in T.serial(k_lanes):
                        total[0] += partial[lane, i, j]
                    if i < m and bx * block_N + j < N:
                        C[i, bx * block_N + j] = T.cast(T.max(total[0], 0), in_dtype)

    return gemv_relu_kernel


#: the knobs a GEMV build is keyed on, as a hashable tuple of (name, value)
GEMV_DEFAULTS = (("max_m", 8), ("block_N", 32), ("k_lanes", 64), ("unroll", 4))


@functools.lru_cache(maxsize=None)
def _build(N, K, knobs, dtype, arch):
    from ... import runtime

    return runtime.compile_kernel(gemv_relu_program(N, K, in_dtype=dtype, **dict(knobs)), arch=arch)


def build_gemv_relu(N: int, K: int, knobs=GEMV_DEFAULTS, dtype: str = "float16", arch: str | None = None):
    """Compile (once per key) the GEMV kernel, called as ``kernel(A, B, C)``."""
    from ... import runtime

    return _build(int(N), int(K), tuple(knobs), dtype, arch or runtime.current_arch())
