"""Plausible wrong answers to this lesson's exercises: each is a mistake a reader could make, and
the checkers must reject it with a message that helps (``tests/test_exercises.py``). Test
fixtures, not solutions; kernels are defined in a file because ``T.prim_func`` needs source.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import tilelang.language as T


def gemm_bias_gelu_no_bias(M, N, K, in_dtype):
    """The bias parameter was forgotten: 3 tensors instead of 4 (CPU, no compile)."""
    from .kernel import gemm_relu_program

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
    from .kernel import gemm_relu_program

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


def gemm_bt_no_relu(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """Transposed B right, but the epilogue's ReLU was left out: negative outputs."""

    @T.prim_func
    def gemm_bt(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bt


def gemm_bt_read_as_k_by_n(M, N, K, in_dtype, block_M=128, block_N=128, block_K=64):
    """B declared (N, K), but its tiles copied and multiplied as in the notebook's (K, N) kernel."""

    @T.prim_func
    def gemm_bt(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), in_dtype)):
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
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bt


def _bias_activation(M, N, K, in_dtype, variant, block_M=128, block_N=128, block_K=64):
    """The bias + activation kernel with one of the activations a reader might write instead of the
    exact GELU (``variant`` is a Python constant: TileLang keeps only its branch)."""
    inv_sqrt2 = 0.7071067811865476
    sqrt_2_over_pi = 0.7978845608028654

    @T.prim_func
    def gemm_bias_activation(
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
                if variant == "no bias":
                    x = C_local[i, j]
                else:
                    x = C_local[i, j] + T.cast(Bias[col], "float32")
                if variant == "tanh":
                    C_local[i, j] = 0.5 * x * (1.0 + T.tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)))
                elif variant == "sigmoid":
                    C_local[i, j] = x / (1.0 + T.exp(-1.702 * x))
                elif variant == "relu":
                    C_local[i, j] = T.max(x, 0)
                elif variant == "erf of x/2":
                    C_local[i, j] = 0.5 * x * (1.0 + T.erf(x * 0.5))
                elif variant == "no 0.5":
                    C_local[i, j] = x * (1.0 + T.erf(x * inv_sqrt2))
                else:
                    C_local[i, j] = 0.5 * x * (1.0 + T.erf(x * inv_sqrt2))
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_bias_activation


def gemm_bias_gelu_tanh(M, N, K, in_dtype):
    """GELU's tanh approximation (GPT-2's), not the exact erf form the exercise asks for."""
    return _bias_activation(M, N, K, in_dtype, "tanh")


def gemm_bias_gelu_sigmoid(M, N, K, in_dtype):
    """GELU's sigmoid approximation x * sigmoid(1.702 x)."""
    return _bias_activation(M, N, K, in_dtype, "sigmoid")


def gemm_bias_gelu_relu(M, N, K, in_dtype):
    """The lesson's ReLU kept as the activation."""
    return _bias_activation(M, N, K, in_dtype, "relu")


def gemm_bias_gelu_erf_of_half_x(M, N, K, in_dtype):
    """erf(x / 2) for erf(x / sqrt(2))."""
    return _bias_activation(M, N, K, in_dtype, "erf of x/2")


def gemm_bias_gelu_no_half(M, N, K, in_dtype):
    """x * (1 + erf(x / sqrt(2))): the factor 0.5 dropped."""
    return _bias_activation(M, N, K, in_dtype, "no 0.5")


def gemm_bias_gelu_bias_not_added(M, N, K, in_dtype):
    """Bias declared but never added."""
    return _bias_activation(M, N, K, in_dtype, "no bias")


# ------------------------------------------------------------------------------------------------
# Notebook 02b, exercise 1: split-K with atomics
# ------------------------------------------------------------------------------------------------

def _split_k_atomic(M, N, K, split, in_dtype, mistake=None, block_M=64, block_N=128, block_K=64, threads=128):
    """The split-K atomic GEMM with one plausible mistake (see the solution for the right one)."""
    k_steps = -(-K // block_K)
    steps_per_split = k_steps // split if mistake == "floor" else -(-k_steps // split)
    grid_m = M // block_M if mistake == "grid floor" else T.ceildiv(M, block_M)
    slices = 1 if mistake == "no split" else split
    steps = k_steps if mistake == "no split" else steps_per_split

    @T.prim_func
    def split_k_atomic(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), grid_m, slices, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            if mistake != "no clear":
                T.clear(acc)
            for ko in T.Pipelined(steps, num_stages=2):
                if mistake == "same slice":
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                else:
                    T.copy(A[by * block_M, (bz * steps + ko) * block_K], A_shared)
                    T.copy(B[(bz * steps + ko) * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc)
            if mistake == "relu":
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = T.max(acc[i, j], 0)
            if mistake == "copy":
                T.copy(acc, C[by * block_M, bx * block_N])
            else:
                T.atomic_add(C[by * block_M, bx * block_N], acc)

    return split_k_atomic


def split_k_copy_not_atomic(M, N, K, split, in_dtype):
    """T.copy of the partial tile into C: the slices overwrite each other."""
    return _split_k_atomic(M, N, K, split, in_dtype, "copy")


def split_k_same_slice(M, N, K, split, in_dtype):
    """bz left out of the K offset: every slice reads slice 0."""
    return _split_k_atomic(M, N, K, split, in_dtype, "same slice")


def split_k_floor_steps(M, N, K, split, in_dtype):
    """steps per slice rounded down: the end of K is never read."""
    return _split_k_atomic(M, N, K, split, in_dtype, "floor")


def split_k_relu_per_slice(M, N, K, split, in_dtype):
    """notebook 02's ReLU kept, applied to each slice's partial."""
    return _split_k_atomic(M, N, K, split, in_dtype, "relu")


def split_k_no_clear(M, N, K, split, in_dtype):
    """the accumulator never cleared."""
    return _split_k_atomic(M, N, K, split, in_dtype, "no clear")


def split_k_grid_floor(M, N, K, split, in_dtype):
    """M // block_M row blocks: the ragged last rows get no block."""
    return _split_k_atomic(M, N, K, split, in_dtype, "grid floor")


def split_k_no_split(M, N, K, split, in_dtype):
    """one block per tile walking all of K (right numbers, no split, no atomics needed)."""
    return _split_k_atomic(M, N, K, split, in_dtype, "no split")


# ------------------------------------------------------------------------------------------------
# Notebook 02b, exercise 2: a tile for a T4 (configurations, not kernels)
# ------------------------------------------------------------------------------------------------

def _t4(**changes):
    from .configs import SEED_CONFIG

    return SEED_CONFIG.replace(**changes)


T4_SEED_UNCHANGED = _t4()                          # 96 KiB
T4_BLOCK_K_48 = _t4(block_K=48)                    # 72 KiB
T4_BLOCK_K_16 = _t4(block_K=16)                    # fits, not the largest
T4_TWO_STAGES = _t4(num_stages=2)                  # fits, but changes the stage count
T4_SMALLER_TILE = _t4(block_M=64, block_N=64)      # fits, but a smaller tile
T4_AS_DICT = _t4(block_K=32).as_dict()             # the right numbers, not a GemmConfig
