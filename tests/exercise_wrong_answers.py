"""Plausible wrong answers to the notebooks' exercises: fixtures for tests/test_exercises.py.

Each is a mistake a reader could make; the checkers must reject it with a message that helps.
They are test fixtures, not solutions (the solutions are in ``tilelang_tutorial/solutions/``).
Kernels are defined in this file because ``T.prim_func`` needs real source.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


# --- notebook 01 --------------------------------------------------------------------------------

def row_max_unmasked(N, dtype, block_M=64, block_N=256):
    """Row max without masking the ragged last tile: zero-filled columns win on negative rows (GPU)."""
    M = T.dynamic("M")

    @T.prim_func
    def row_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            T.fill(best, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                T.copy(X[bx * block_M, k * block_N], x_frag)
                T.reduce_max(x_frag, part, dim=1)
                for i in T.Parallel(block_M):
                    best[i] = T.max(best[i], part[i])
            T.copy(best, Out[bx * block_M])

    return row_max


def transpose_scattered(M, N, dtype="float16", block=64):
    """Transpose that stages A in shared memory but writes B from registers: scattered stores (CPU)."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            a_tile = T.alloc_shared((block, block), dtype)
            b_tile = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], a_tile)
            for i, j in T.Parallel(block, block):
                b_tile[i, j] = a_tile[j, i]
            T.copy(b_tile, B[bx * block, by * block])

    return transpose


def transpose_swapped_blocks(M, N, dtype="float16", block=64):
    """Fast, but the output tile goes to B[by, bx] instead of B[bx, by]: wrong on non-square A (GPU)."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            a_tile = T.alloc_fragment((block, block), dtype)
            b_tile = T.alloc_shared((block, block), dtype)
            T.copy(A[by * block, bx * block], a_tile)
            for i, j in T.Parallel(block, block):
                b_tile[j, i] = a_tile[i, j]
            T.copy(b_tile, B[by * block, bx * block])

    return transpose


# --- notebook 02 --------------------------------------------------------------------------------

def gemm_bias_gelu_no_bias(M, N, K, in_dtype):
    """The bias parameter was forgotten: 3 tensors instead of 4 (CPU, no compile)."""
    from tilelang_tutorial.kernels.gemm_relu import gemm_relu_program

    return gemm_relu_program(M, N, K, in_dtype=in_dtype)


def gemm_bias_gelu_wrong_order(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """GELU applied *before* adding the bias (GPU)."""
    inv_sqrt2 = 0.7071067811865476

    @T.prim_func
    def gemm_gelu_bias(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        Bias: T.Tensor((N,), in_dtype),
        C: T.Tensor((M, N), in_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                col = T.min(bx * block_N + j, N - 1)
                x = C_local[i, j]
                C_local[i, j] = 0.5 * x * (1.0 + T.erf(x * inv_sqrt2)) + T.cast(Bias[col], "float32")
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_gelu_bias


def gemm_bt_untransposed_shape(M, N, K, in_dtype):
    """B declared (K, N) as in the notebook's kernel, not (N, K) like an nn.Linear weight (CPU)."""
    from tilelang_tutorial.kernels.gemm_relu import gemm_relu_program

    return gemm_relu_program(M, N, K, in_dtype=in_dtype)


def gemm_bt_serial(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """Transposed B done right, but the K loop is T.serial: no software pipeline (CPU, compiles)."""

    @T.prim_func
    def gemm_bt(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bt


def gemm_bt_wrong_tile(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """(N, K) B, but the tile is loaded from B[k, n] coordinates: wrong values (GPU)."""

    @T.prim_func
    def gemm_bt(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bt


# --- notebook 05 --------------------------------------------------------------------------------

_LOG2_E = 1.4426950408889634


def wrong_residual_no_layout(C, dtype="float16"):
    """Plausible wrong answer: right math, but the layout is left to inference (naive)."""
    block_m, threads = 8, 128
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            h = T.alloc_fragment((block_m, C), "float32")
            sq = T.alloc_fragment((block_m, C), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, C), dtype)
            for i, j in T.Parallel(block_m, C):
                h[i, j] = T.Cast("float32", X[bx * block_m + i, j]) + T.Cast("float32", R[bx * block_m + i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] / C + eps)
            for i, j in T.Parallel(block_m, C):
                v = h[i, j] * rstd[i] * T.Cast("float32", Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def wrong_residual_after_norm(C, dtype="float16"):
    """Plausible wrong answer: fast layout, but the residual is added after the norm."""
    from tilelang_tutorial.kernels.rmsnorm_silu import default_config, row_group_layout

    cfg = default_config(C, dtype)
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, C), dtype), R: T.Tensor((m, C), dtype), Gamma: T.Tensor((C,), dtype),
             Y: T.Tensor((m, C), dtype), eps: T.float32):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            x = T.alloc_fragment((block_m, C), dtype)
            r = T.alloc_fragment((block_m, C), dtype)
            sq = T.alloc_fragment((block_m, C), "float32")
            rstd = T.alloc_fragment((block_m,), "float32")
            y = T.alloc_fragment((block_m, C), dtype)
            T.annotate_layout({x: row_group_layout(block_m, C, group, threads),
                               r: row_group_layout(block_m, C, group, threads),
                               sq: row_group_layout(block_m, C, group, threads),
                               y: row_group_layout(block_m, C, group, threads)})
            T.copy(X[bx * block_m, 0], x)
            T.copy(R[bx * block_m, 0], r)
            for i, j in T.Parallel(block_m, C):
                sq[i, j] = T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] / C + eps)
            for i, j in T.Parallel(block_m, C):
                v = T.Cast("float32", x[i, j]) * rstd[i] * T.Cast("float32", Gamma[j]) + T.Cast("float32", r[i, j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -_LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def rmsnorm_config_warp_per_row():
    """A warp per row, as for C = 256: 32 lanes do not divide C/8 = 80 vectors (CPU, no compile)."""
    from tilelang_tutorial.kernels.rmsnorm_silu import RMSNormSiLUConfig

    return RMSNormSiLUConfig(group=32, threads=256)


# --- notebooks 03 and 04 (answers, not kernels) ---------------------------------------------------

#: 32x32 fp16 conflict table guessed from notebook 03's 64-wide tile (8-way / 32-way): wrong.
CONFLICT_TABLE_FROM_64_WIDE = [[8, 32], [1, 1]]
#: One element of padding: rows 130 B apart still put rows 0 and 1 in bank 0; 4 is not 16-B aligned.
PADDING_TOO_SMALL = {"column_pad": 1, "ldmatrix_pad": 4}
#: One warpgroup for the 64 x 512 accumulator: 256 registers per thread.
WARP_CONFIG_ONE_WARPGROUP = {"block_H": 64, "threads": 128, "policy": "FullCol"}
#: Rows split between warpgroups: inference cannot (64-row wgmma) and splits columns instead.
WARP_CONFIG_FULLROW = {"block_H": 64, "threads": 256, "policy": "FullRow"}


def combine_mean(o_partial, lse):
    """Every split weighted equally (CPU)."""
    return o_partial.mean(dim=-2)


def combine_no_max_subtraction(o_partial, lse):
    """Right weights, but 2^lse overflows fp32 for large lse (CPU)."""
    import torch

    w = torch.exp2(lse)
    return ((w / w.sum(-1, keepdim=True))[..., None] * o_partial).sum(-2)
