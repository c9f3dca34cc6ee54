"""TileLang kernels written only to test the CPU emulator (tilelang_tutorial.emulate).

They are deliberately different from the lessons' kernels so the tests exercise the emulator's
generality: other tile shapes, loop forms, thread-level (SIMT) code, atomics, scans, prints,
hand-written warp specialisation, and a few deliberately broken kernels for the error tests.
``T.prim_func`` needs real source, so every kernel lives in a factory here.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernels' annotations.
import tilelang.language as T


# ---------------------------------------------------------------------------------------------
# elementwise / copies
# ---------------------------------------------------------------------------------------------
def copy_scale(N, dtype="float16", block_M=32, block_N=64, threads=128):
    """y = x * alpha + 1 through shared memory and a fragment; M dynamic."""
    M = T.dynamic("M")

    @T.prim_func
    def copy_scale_kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), alpha: T.float32):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_M, block_N), dtype)
            yf = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(X[by * block_M, bx * block_N], xs)
            for i, j in T.Parallel(block_M, block_N):
                yf[i, j] = T.Cast("float32", xs[i, j]) * alpha + 1.0
            T.copy(yf, Y[by * block_M, bx * block_N])      # fp32 fragment -> dtype: a casting copy

    return copy_scale_kernel


def dynamic_rows(dtype="float32", block=64):
    """Shapes (m * 64, 32) and (m, 32): one dynamic size used in an expression."""
    m = T.dynamic("m")

    @T.prim_func
    def dynamic_rows_kernel(X: T.Tensor((m * 64, 32), dtype), S: T.Tensor((m, 32), dtype)):
        with T.Kernel(m, threads=64) as bx:
            xs = T.alloc_fragment((block, 32), dtype)
            s = T.alloc_fragment((32,), dtype)
            T.copy(X[bx * block, 0], xs)
            T.reduce_sum(xs, s, dim=0)
            T.copy(s, S[bx, 0])

    return dynamic_rows_kernel


def shared_transpose(M, N, dtype="float16", block=32):
    """B = A^T with a shared tile read down its columns."""

    @T.prim_func
    def shared_transpose_kernel(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            tile = T.alloc_shared((block, block), dtype)
            out = T.alloc_fragment((block, block), dtype)
            T.copy(A[by * block, bx * block], tile)
            for i, j in T.Parallel(block, block):
                out[i, j] = tile[j, i]
            T.copy(out, B[bx * block, by * block])

    return shared_transpose_kernel


def select_kernel(N, threshold=0.5):
    """T.if_then_else (elementwise select, and a guarded read past the tile) and an `if` mask."""

    @T.prim_func
    def select_kernel_(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            xs = T.alloc_shared((64,), "float32")
            T.copy(X[bx * 64], xs)
            for i in T.Parallel(64):
                # the true branch reads xs[i + 1], which is past the tile for i == 63: only lanes
                # that select it are checked (lazy, like the GPU's ?:)
                Y[bx * 64 + i] = T.if_then_else(i < 63, T.max(xs[i], xs[i + 1]), xs[i])
            for i in T.Parallel(64):
                if xs[i] > threshold:
                    Z[bx * 64 + i] = xs[i]
                else:
                    Z[bx * 64 + i] = -xs[i]

    return select_kernel_


# ---------------------------------------------------------------------------------------------
# reductions, scans, atomics
# ---------------------------------------------------------------------------------------------
def row_softmax(N, dtype="float16", block_M=16):
    """softmax over the last dim of an (M, N) matrix, whole rows per block (N <= 512), M dynamic."""
    M = T.dynamic("M")
    log2e = 1.4426950408889634

    @T.prim_func
    def row_softmax_kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - mx[i]) * log2e)
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * block_M, 0])

    return row_softmax_kernel


def reduce_kernel(M, N, kind, dim, clear=True, dtype="float32", out_dtype=None):
    """One T.reduce_<kind> of a whole (M, N) tile along ``dim``; with clear=False the destination
    starts from Init (the combine with the existing values is what is tested)."""
    out_dtype = out_dtype or dtype
    out_len = M if dim == 1 else N

    @T.prim_func
    def reduce_kernel_(X: T.Tensor((M, N), dtype), Init: T.Tensor((out_len,), out_dtype),
                       Out: T.Tensor((out_len,), out_dtype)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), dtype)
            r = T.alloc_fragment((out_len,), out_dtype)
            T.copy(X, x)
            T.copy(Init, r)
            T.reduce(x, r, kind, dim, clear)
            T.copy(r, Out)

    return reduce_kernel_


def cumsum_kernel(M, N, dtype="float32", reverse=False):
    """Inclusive prefix sums along the rows of a shared tile (T.cumsum), and of one row (1-d)."""

    @T.prim_func
    def cumsum_kernel_(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), R: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), dtype)
            row = T.alloc_shared((N,), dtype)
            T.copy(X, s)
            T.copy(s[0, :], row)
            T.cumsum(s, dim=1, reverse=reverse)
            T.cumsum(row, dim=0)
            T.copy(s, Y)
            T.copy(row, R)

    return cumsum_kernel_


def histogram(N, bins=16, block=128):
    """Atomic histogram of int32 values in [0, bins) plus an atomic float total (duplicates
    accumulate: every lane of T.Parallel is its own atomic)."""

    @T.prim_func
    def histogram_kernel(V: T.Tensor((N,), "int32"), W: T.Tensor((N,), "float32"),
                         H: T.Tensor((bins,), "int32"), Total: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    T.atomic_add(H[V[bx * block + i]], 1)
                    T.atomic_add(Total[0], W[bx * block + i])

    return histogram_kernel


def tile_atomic_sum(M, N, block_M=32):
    """Column sums via a tile-level T.atomic_add of each block's partial sums into global memory."""

    @T.prim_func
    def tile_atomic_sum_kernel(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            part = T.alloc_fragment((N,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, part, dim=0)
            T.atomic_add(S[0:N], part)

    return tile_atomic_sum_kernel


# ---------------------------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------------------------
def gemm(M, N, K, dtype="float16", transpose_A=False, transpose_B=False, block_M=64, block_N=64, block_K=32,
         num_stages=2, accum="float32", out_dtype=None, threads=128):
    """C = A @ B with A (M, K) or (K, M) [transpose_A], B (K, N) or (N, K) [transpose_B]."""
    out_dtype = out_dtype or dtype
    a_shape = (K, M) if transpose_A else (M, K)
    b_shape = (N, K) if transpose_B else (K, N)
    a_tile = (block_K, block_M) if transpose_A else (block_M, block_K)
    b_tile = (block_N, block_K) if transpose_B else (block_K, block_N)

    @T.prim_func
    def gemm_kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            As = T.alloc_shared(a_tile, dtype)
            Bs = T.alloc_shared(b_tile, dtype)
            Cf = T.alloc_fragment((block_M, block_N), accum)
            T.clear(Cf)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if transpose_A:
                    T.copy(A[ko * block_K, by * block_M], As)
                else:
                    T.copy(A[by * block_M, ko * block_K], As)
                if transpose_B:
                    T.copy(B[bx * block_N, ko * block_K], Bs)
                else:
                    T.copy(B[ko * block_K, bx * block_N], Bs)
                T.gemm(As, Bs, Cf, transpose_A=transpose_A, transpose_B=transpose_B)
            T.copy(Cf, C[by * block_M, bx * block_N])

    return gemm_kernel


def gemm_bias_epilogue(M, N, K, dtype="float16", block=64):
    """C = A^T B + bias with a register-held A operand (fragment), a T.grid epilogue and T.unroll."""

    @T.prim_func
    def gemm_bias_kernel(A: T.Tensor((K, M), dtype), B: T.Tensor((K, N), dtype), Bias: T.Tensor((N,), "float32"),
                         C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            As = T.alloc_shared((32, block), dtype)
            Bs = T.alloc_shared((32, block), dtype)
            Cf = T.alloc_fragment((block, block), "float32")
            T.fill(Cf, 0)
            for ko in T.serial(T.ceildiv(K, 32)):
                T.copy(A[ko * 32, by * block], As)
                T.copy(B[ko * 32, bx * block], Bs)
                T.gemm(As, Bs, Cf, transpose_A=True)
            for i, j in T.grid(block, block // 4):
                for u in T.unroll(4):
                    Cf[i, j * 4 + u] = Cf[i, j * 4 + u] + Bias[T.min(bx * block + j * 4 + u, N - 1)]
            T.copy(Cf, C[by * block, bx * block])

    return gemm_bias_kernel


# ---------------------------------------------------------------------------------------------
# thread-level code
# ---------------------------------------------------------------------------------------------
def simt_dot(N, K):
    """One thread per row: a per-thread local accumulator over a T.serial loop, then a per-thread
    store -- SIMT-style code reading the thread index."""

    @T.prim_func
    def simt_dot_kernel(A: T.Tensor((N, K), "float32"), x: T.Tensor((K,), "float32"), y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            acc = T.alloc_local((1,), "float32")
            tx = T.get_thread_binding()
            row = bx * 128 + tx
            acc[0] = 0.0
            for k in T.serial(K):
                acc[0] += A[row, k] * x[k]
            if row < N:
                y[row] = acc[0]

    return simt_dot_kernel


def warp_shuffle_sum(N):
    """Warp sums with T.shfl_xor (butterfly) and a shared array written by lane 0 of each warp,
    read back after T.sync_threads()."""

    @T.prim_func
    def warp_sum_kernel(X: T.Tensor((N,), "float32"), S: T.Tensor((N // 32,), "float32"),
                        Total: T.Tensor((N // 128,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            v = T.alloc_local((1,), "float32")
            part = T.alloc_shared((4,), "float32")
            tx = T.get_thread_binding()
            v[0] = X[bx * 128 + tx]
            for s in T.unroll(5):
                v[0] += T.shfl_xor(v[0], 16 >> s)
            if tx % 32 == 0:
                S[bx * 4 + tx // 32] = v[0]
                part[tx // 32] = v[0]
            T.sync_threads()
            if tx == 0:
                Total[bx] = part[0] + part[1] + part[2] + part[3]

    return warp_sum_kernel


def block_votes(N, threads=128, guarded=False):
    """Per block: __syncthreads_count of X > 0, __syncthreads_or of X < -2.5, __syncthreads_and of
    X > -3, and the index of the block's one thread holding X == 100, assembled bit by bit from
    count votes (that thread alone votes each bit: how a CTA agrees on one thread's value without
    shared memory). ``guarded``: the count vote under ``if tx < 64``, which the GPU does not allow."""

    @T.prim_func
    def block_votes_kernel(X: T.Tensor((N,), "float32"), Out: T.Tensor((N // threads, 4), "int32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("float32")
            marked = T.alloc_var("int32")
            v = X[bx * threads + tx]
            if guarded:
                if tx < 64:
                    Out[bx, 0] = T.syncthreads_count(T.if_then_else(v > 0, 1, 0))
            else:
                Out[bx, 0] = T.syncthreads_count(T.if_then_else(v > 0, 1, 0))
            Out[bx, 1] = T.syncthreads_or(T.if_then_else(v < -2.5, 1, 0))
            Out[bx, 2] = T.syncthreads_and(T.if_then_else(v > -3, 1, 0))
            marked = 0
            for k in T.unroll(8):
                marked += T.syncthreads_count(T.if_then_else(v == 100, (tx >> k) & 1, 0)) * (1 << k)
            Out[bx, 3] = marked

    return block_votes_kernel


def block_vote_in_a_role():
    """A block vote inside one warp-specialised role (threads 0-127 of 256), which the GPU does not
    allow: the producer's threads never reach that barrier."""

    @T.prim_func
    def block_vote_in_a_role_kernel(X: T.Tensor((128,), "float32"), Out: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=256) as bx:
            xs = T.alloc_shared((128,), "float32")
            full = T.alloc_barrier([128])
            tx = T.get_thread_binding()
            if tx < 128:      # consumer
                T.barrier_wait(full[0], 0)
                Out[bx] = T.syncthreads_count(T.if_then_else(xs[tx] > 0, 1, 0))
            else:             # producer
                T.tma_copy(X[0:128], xs, barrier=full[0])
                T.barrier_arrive(full[0])

    return block_vote_in_a_role_kernel


def print_kernel():
    """T.print of a scalar expression, a shared buffer, a fragment and a message."""

    @T.prim_func
    def print_kernel_(X: T.Tensor((4,), "float16"), n: T.int32):
        with T.Kernel(2, threads=32) as bx:
            s = T.alloc_shared((4,), "float16")
            f = T.alloc_fragment((2, 2), "float32")
            T.copy(X, s)
            T.fill(f, 1.5)
            T.print(n + bx, msg="n plus bx")
            T.print(s)
            T.print(f, msg="frag")
            T.print(msg="done")

    return print_kernel_


def producer_consumer(steps=5, bm=16, n=32, parity_bug=False, missing_arrive=False, threads=256):
    """Hand-written warp specialisation with mbarriers: a producer warpgroup fills a 2-stage ring,
    a consumer warpgroup doubles each stage; optionally with a wrong parity or a missing release."""
    rows = steps * bm

    @T.prim_func
    def producer_consumer_kernel(X: T.Tensor((rows, n), "float16"), Y: T.Tensor((rows, n), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            xs = T.alloc_shared((2, bm, n), "float16")
            yf = T.alloc_fragment((bm, n), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            tx = T.get_thread_binding()
            if tx < 128:      # consumer
                for k in T.serial(steps):
                    T.barrier_wait(full[k % 2], (k // 2) % 2)
                    for i, j in T.Parallel(bm, n):
                        yf[i, j] = T.Cast("float32", xs[k % 2, i, j]) * 2
                    if not missing_arrive:
                        T.barrier_arrive(empty[k % 2])
                    T.copy(yf, Y[k * bm, 0])
            else:             # producer
                for k in T.serial(steps):
                    if parity_bug:
                        T.barrier_wait(empty[k % 2], (k // 2) % 2)
                    else:
                        T.barrier_wait(empty[k % 2], 1 - (k // 2) % 2)
                    T.tma_copy(X[k * bm:(k + 1) * bm, :], xs[k % 2, :, :], barrier=full[k % 2])
                    T.barrier_arrive(full[k % 2])

    return producer_consumer_kernel


def named_barrier_roles(n=64):
    """Two roles exchange data through shared memory with a named barrier (bar.sync 1, 256) and a
    final __syncthreads; the role of threads 0-127 also uses a per-thread local."""

    @T.prim_func
    def named_barrier_kernel(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((n,), "float32")
            t = T.alloc_shared((n,), "float32")
            tx = T.get_thread_binding()
            if tx < 128:
                T.copy(X, s)
                T.sync_threads(1, 256)
            else:
                T.sync_threads(1, 256)
                for i in T.Parallel(n):
                    t[i] = s[i] * 3.0
            T.sync_threads()
            T.copy(t, Y)

    return named_barrier_kernel


# ---------------------------------------------------------------------------------------------
# deliberately broken kernels (error tests)
# ---------------------------------------------------------------------------------------------
def gemm_without_clear(M=64, N=64, K=64):
    @T.prim_func
    def gemm_no_clear(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            Cf = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, Cf)          # accumulates into never-initialised registers
            T.copy(Cf, C)

    return gemm_no_clear


def shared_read_past_end():
    @T.prim_func
    def forward_difference(X: T.Tensor((64, 128), "float32"), Y: T.Tensor((64, 128), "float32")):
        with T.Kernel(2, threads=128) as bx:
            xs = T.alloc_shared((32, 128), "float32")
            yf = T.alloc_fragment((32, 128), "float32")
            T.copy(X[bx * 32, 0], xs)
            for i, j in T.Parallel(32, 128):
                yf[i, j] = xs[i, j + 1] - xs[i, j]      # j + 1 == 128 is past the tile
            T.copy(yf, Y[bx * 32, 0])

    return forward_difference


def global_row_past_end(access):
    """Row 5 of a 5x8 tensor: TileLang guards each index dimension separately but leaves a
    constant index unguarded, so a performed access to ``X[5, j]`` reads (writes) the memory after
    the tensor on the GPU. ``access``: "select_read" (a ``T.if_then_else`` arm the lanes of row 4
    select), "store_under_if", "atomic", "thread_read" (the threads of a thread-index ``if``),
    "serial_read" (a scalar index); the ones that perform nothing: "unselected_read" (an arm no
    lane selects), "false_guards" (``if`` conditions that never hold)."""
    if access == "select_read":
        @T.prim_func
        def select_read(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
            with T.Kernel(1, threads=64):
                for i, j in T.Parallel(5, 8):
                    Y[i, j] = T.if_then_else(i == 4, X[5, j], X[i, j])
        return select_read
    if access == "store_under_if":
        @T.prim_func
        def store_under_if(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
            with T.Kernel(1, threads=64):
                for i, j in T.Parallel(5, 8):
                    if i == 4:
                        Y[5, j] = X[i, j]
        return store_under_if
    if access == "atomic":
        @T.prim_func
        def atomic_past_end(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
            with T.Kernel(1, threads=64):
                for j in T.Parallel(8):
                    T.atomic_add(Y[5, j], X[0, j])
        return atomic_past_end
    if access == "thread_read":
        @T.prim_func
        def thread_read(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
            with T.Kernel(1, threads=64):
                tx = T.get_thread_binding()
                if tx < 8:
                    Y[0, tx] = X[5, tx]
        return thread_read
    if access == "serial_read":
        @T.prim_func
        def serial_read(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
            with T.Kernel(1, threads=64):
                for k in T.serial(8):
                    Y[0, k] = X[5, k]
        return serial_read
    if access == "unselected_read":
        @T.prim_func
        def unselected_read(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
            with T.Kernel(1, threads=64):
                for i, j in T.Parallel(5, 8):
                    Y[i, j] = T.if_then_else(X[i, j] == X[i, j], X[i, j], X[5, j])   # false only for NaN
        return unselected_read
    assert access == "false_guards", access

    @T.prim_func
    def false_guards(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
        with T.Kernel(2, threads=64) as bx:
            tx = T.get_thread_binding()
            for i, j in T.Parallel(5, 8):
                if bx == 0:
                    Y[i, j] = X[i, j]
                if i == 5:
                    Y[5, j] = X[5, j]
            if tx >= 64:
                Y[5, 0] = X[5, 0]
            if bx == 2:
                T.atomic_add(Y[5, 0], X[0, 0])

    return false_guards


def global_row_after_guard():
    """Row i + 1 of a 5x8 tensor, read in a ``T.if_then_else`` arm and written under an ``if`` by
    the lanes of row 4: an index with a variable is guarded (the CUDA reads the safe value 0 and
    drops the store), so row 4 of Y is 0."""

    @T.prim_func
    def row_after(X: T.Tensor((5, 8), "float32"), Y: T.Tensor((5, 8), "float32")):
        with T.Kernel(1, threads=64):
            for i, j in T.Parallel(5, 8):
                Y[i, j] = T.if_then_else(i == 4, X[i + 1, j], X[i, j])
            for i, j in T.Parallel(5, 8):
                if i == 4:
                    Y[i + 1, j] = X[i, j]

    return row_after


def global_constant_row_of_dynamic_tensor():
    """``X[5, j]`` of an (M, 8) tensor: in range only when M > 5, which only the run can tell."""
    M = T.dynamic("M")

    @T.prim_func
    def constant_row(X: T.Tensor((M, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=64):
            for j in T.Parallel(8):
                Y[j] = X[5, j]

    return constant_row


def unsupported_extern():
    @T.prim_func
    def uses_extern(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i] = T.call_extern("float32", "my_device_function", X[i])

    return uses_extern


def unsupported_grid_sync():
    @T.prim_func
    def uses_grid_sync(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            for i in T.Parallel(32):
                Y[bx * 32 + i] = X[bx * 32 + i]
            T.sync_grid()            # a cooperative-launch grid barrier: blocks run one by one here

    return uses_grid_sync


def loop_forms(N=64):
    """T.serial with a start and a step, T.vectorized, a while loop over a T.alloc_var, T.grid,
    integer arithmetic (truncating T.truncdiv / floor //) and a 2-d thread block (threads=(32, 4))."""

    @T.prim_func
    def loop_forms_kernel(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32"), Z: T.Tensor((4, 32), "int32"),
                          W: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=(32, 4)) as bx:
            acc = T.alloc_var("int32")
            cnt = T.alloc_var("int32")
            loc = T.alloc_local((4,), "int32")
            tx, ty, tz = T.get_thread_bindings()
            acc = 0
            for i in T.serial(3, N, 5):               # 3, 8, 13, ...
                acc += X[i]
            cnt = 0
            while cnt < 7:
                cnt += 1
            for v in T.vectorized(4):
                loc[v] = v * cnt
            for i in T.Parallel(N):
                Y[i] = T.truncdiv(X[i] - 50, 7) * 1000 + (X[i] - 50) // 7
            Z[ty, tx] = ty * 100 + tx
            W[0] = acc
            W[1] = cnt
            for i, j in T.grid(2, 3):
                W[2 + i * 3 + j] = loc[j + i] + i * 10

    return loop_forms_kernel


def safe_value_row_max(N, block_N=128):
    """Row max of a ragged tile without masking: T.annotate_safe_value(-inf) makes the out-of-range
    part of each tile read as -inf instead of 0."""

    @T.prim_func
    def safe_row_max(X: T.Tensor((8, N), "float32"), Out: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((8, block_N), "float32")
            best = T.alloc_fragment((8,), "float32")
            T.annotate_safe_value({X: -T.infinity("float32")})
            T.fill(best, -T.infinity("float32"))
            for k in T.serial(T.ceildiv(N, block_N)):
                for i, j in T.Parallel(8, block_N):
                    x[i, j] = X[i, k * block_N + j]
                T.reduce_max(x, best, dim=1, clear=False)
            T.copy(best, Out)

    return safe_row_max


def parallel_print():
    """T.print inside T.Parallel: one line per iteration."""

    @T.prim_func
    def parallel_print_kernel(X: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=2) as bx:
            for i in T.Parallel(4):
                T.print(X[i], msg="x")

    return parallel_print_kernel


MATH_FUNCS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "erf", "floor", "ceil",
              "sin", "cos", "pow", "max", "min", "fdividef", "expf", "round", "clamp")


def math_kernel(N, dtype="float32"):
    """One output row per element-wise intrinsic (see MATH_FUNCS), on a positive input x and a
    signed input y."""

    @T.prim_func
    def math_kernel_(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype), Out: T.Tensor((len(MATH_FUNCS), N), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Out[0, i] = T.exp(Y[i])
                Out[1, i] = T.exp2(Y[i])
                Out[2, i] = T.log(X[i])
                Out[3, i] = T.log2(X[i])
                Out[4, i] = T.sqrt(X[i])
                Out[5, i] = T.rsqrt(X[i])
                Out[6, i] = T.abs(Y[i])
                Out[7, i] = T.tanh(Y[i])
                Out[8, i] = T.sigmoid(Y[i])
                Out[9, i] = T.erf(Y[i])
                Out[10, i] = T.floor(Y[i])
                Out[11, i] = T.ceil(Y[i])
                Out[12, i] = T.sin(Y[i])
                Out[13, i] = T.cos(Y[i])
                Out[14, i] = T.pow(X[i], Y[i])
                Out[15, i] = T.max(X[i], Y[i])
                Out[16, i] = T.min(X[i], Y[i])
                Out[17, i] = T.call_extern(dtype, "__fdividef", Y[i], X[i])
                Out[18, i] = T.call_extern(dtype, "__expf", Y[i])
                Out[19, i] = T.round(Y[i] * 2)
                Out[20, i] = T.clamp(Y[i], -0.5, T.infinity(dtype))

    return math_kernel_


def int8_gemm(M, N, K):
    """int8 x int8 -> int32 accumulation."""

    @T.prim_func
    def int8_gemm_kernel(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K), "int8"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            As = T.alloc_shared((64, 64), "int8")
            Bs = T.alloc_shared((64, 64), "int8")
            Cf = T.alloc_fragment((64, 64), "int32")
            T.clear(Cf)
            for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * 64, ko * 64], As)
                T.copy(B[bx * 64, ko * 64], Bs)
                T.gemm(As, Bs, Cf, transpose_B=True)
            T.copy(Cf, C[by * 64, bx * 64])

    return int8_gemm_kernel


def two_kernels():
    """Two T.Kernel launches in one prim_func (they run in order): SIMT code, then a producer /
    consumer pair of roles reading what the first kernel wrote."""

    @T.prim_func
    def two_kernels_(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32"), Z: T.Tensor((128,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            t1 = bx * 128 + tx
            Y[t1] = X[t1] * 2
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((128,), "float32")
            bar = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx < 128:
                T.barrier_wait(bar[0], 0)
                T.copy(s, Z)
            else:
                T.copy(Y[128:256], s)
                T.barrier_arrive(bar[0])

    return two_kernels_


# ---------------------------------------------------------------------------------------------
# Blackwell (sm_100a): tensor memory and TCGEN5MMA
# ---------------------------------------------------------------------------------------------
def tmem_gemm_preloaded(M, N, K, clear_first=True, user_wait=False, barrier_count=1, block_N=64, block_K=32):
    """C = (clear_first ? 0 : C0) + A @ B in fp32 with the accumulator in tensor memory. The TMEM
    tile is first loaded with C0 (fragment -> TMEM, tcgen05.st); then the K loop runs
    ``T.gemm(..., mbar=, clear_accum=(ko == 0) if clear_first else False)``. ``user_wait`` adds a
    (redundant) ``T.mbarrier_wait_parity(mma_done, ko % 2)`` after each synchronous GEMM;
    ``barrier_count`` != 1 is a broken completion barrier (the MMA's commit is one arrival)."""
    block_M = 128

    @T.prim_func
    def tmem_gemm_preloaded_kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                                   C0: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_t = T.alloc_tmem([block_M, block_N], "float32")
            mma_done = T.alloc_barrier(barrier_count)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(C0[by * block_M, bx * block_N], C_l)
            T.copy(C_l, C_t)                                  # tcgen05.st: TMEM holds C0
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                if clear_first:
                    T.gemm(A_s, B_s, C_t, mbar=mma_done, clear_accum=ko == 0)
                else:
                    T.gemm(A_s, B_s, C_t, mbar=mma_done, clear_accum=False)
                if user_wait:
                    T.mbarrier_wait_parity(mma_done, ko % 2)   # passes: the MMA has arrived
            T.copy(C_t, C_l)                                  # tcgen05.ld
            T.copy(C_l, C[by * block_M, bx * block_N])

    return tmem_gemm_preloaded_kernel


def tcgen05_gemm_explicit(M, N, K, parity_shift=0, commit="mbar", block_N=64, block_K=32):
    """The explicit asynchronous form: ``T.tcgen05_gemm`` never waits; the kernel waits itself.
    ``commit="mbar"``: the GEMM arrives on the barrier (``mbar=``); ``commit="arrive"``: the GEMM
    has no barrier and one warp commits with ``T.tcgen05_mma_arrive``. ``parity_shift=1`` waits
    for the wrong phase (a deadlock)."""
    block_M = 128

    @T.prim_func
    def tcgen05_gemm_explicit_kernel(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
                                     C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "bfloat16")
            B_s = T.alloc_shared((block_N, block_K), "bfloat16")
            C_t = T.alloc_tmem([block_M, block_N], "float32")
            bar = T.alloc_barrier(1)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            tx = T.get_thread_binding()
            for ko in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                if commit == "mbar":
                    T.tcgen05_gemm(A_s, B_s, C_t, transpose_B=True, mbar=bar, clear_accum=ko == 0)
                else:
                    T.tcgen05_gemm(A_s, B_s, C_t, transpose_B=True, mbar=None, clear_accum=ko == 0)
                    if tx < 32:
                        T.tcgen05_mma_arrive(bar)             # one warp: one arrival
                T.mbarrier_wait_parity(bar, (ko + parity_shift) % 2)
            T.copy(C_t, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return tcgen05_gemm_explicit_kernel


def tmem_gemm_warp_specialised(M, N, K, block_N=64, block_K=32):
    """Hand-written warp specialisation around a synchronous TCGEN5MMA: a producer warpgroup loads
    the tiles into a one-slot buffer, the consumer warpgroup runs ``T.gemm(..., mbar=)`` into TMEM
    (the emulator's implicit wait happens inside a role) and releases the slot."""
    block_M = 128

    @T.prim_func
    def tmem_gemm_ws_kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                            C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_t = T.alloc_tmem([block_M, block_N], "float32")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            loaded = T.alloc_barrier(128)
            consumed = T.alloc_barrier(128)
            mma_done = T.alloc_barrier(1)
            tx = T.get_thread_binding()
            if tx < 128:      # consumer: the MMA and the epilogue
                for ko in T.serial(T.ceildiv(K, block_K)):
                    T.barrier_wait(loaded[0], ko % 2)
                    T.gemm(A_s, B_s, C_t, mbar=mma_done, clear_accum=ko == 0)
                    T.barrier_arrive(consumed[0])
                T.copy(C_t, C_l)
                T.copy(C_l, C[by * block_M, bx * block_N])
            else:             # producer
                for ko in T.serial(T.ceildiv(K, block_K)):
                    T.barrier_wait(consumed[0], 1 - ko % 2)
                    T.copy(A[by * block_M, ko * block_K], A_s)
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                    T.barrier_arrive(loaded[0])

    return tmem_gemm_ws_kernel


def tmem_gemm_unsupported(what):
    """GEMM forms the emulator (or TileLang) rejects: ``"2cta"`` (a CTA-pair MMA),
    ``"no_mbar"`` (T.gemm into TMEM without a completion barrier), ``"tcgen05_fragment"``
    (T.tcgen05_gemm into registers)."""
    N_B = 32 if what == "2cta" else 64

    @T.prim_func
    def tmem_gemm_unsupported_kernel(A: T.Tensor((128, 32), "float16"), B: T.Tensor((32, N_B), "float16"),
                                     C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, N_B), "float16")
            C_t = T.alloc_tmem([128, 64], "float32")
            C_l = T.alloc_fragment((128, 64), "float32")
            bar = T.alloc_barrier(1)
            T.copy(A, A_s)
            T.copy(B, B_s)
            if what == "2cta":
                T.tcgen05_gemm(A_s, B_s, C_t, mbar=bar, clear_accum=True, use_2cta=True)
            elif what == "no_mbar":
                T.gemm(A_s, B_s, C_t, clear_accum=True)
            else:
                T.tcgen05_gemm(A_s, B_s, C_l, mbar=bar, clear_accum=True)
            T.mbarrier_wait_parity(bar, 0)
            T.copy(C_t, C_l)
            T.copy(C_l, C)

    return tmem_gemm_unsupported_kernel
