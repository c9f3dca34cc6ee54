"""Kernels for the emulator's differential suite and its detectors (tests/test_emulator_differential.py).

Two groups:

* ``CASES``: valid TileLang 0.1.15 programs of constructs beyond the lessons' kernels (reductions
  written inside ``T.Parallel``, ``T.reduce_*``, atomics, ``T.Pipelined``, shared/fragment copies,
  masks, dynamic shapes, GEMM variants, warp shuffles, cumsum, ``T.Persistent`` ...). Each case
  gives its program, fresh random inputs, the outputs (poisoned) and a torch reference; the suite
  runs it in the emulator on the CPU (always) and on the GPU (``@pytest.mark.gpu``), and asserts the
  emulator gives the GPU's answer.
* kernels that trip a detector (``race_*``, ``uninit_*``, ``limit_*``) and look-alikes that must
  not (``clean_*``).

``T.prim_func`` needs real source, so every kernel lives in a factory here.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernels' annotations.
from dataclasses import dataclass, field

import tilelang.language as T
import torch

import emulate_kernels as K


# =============================================================================================
# reductions written inside T.Parallel (TileLang runs the nest serially in every thread)
# =============================================================================================
def parallel_sum_one_element(N=128, threads=128):
    @T.prim_func
    def parallel_sum(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            acc = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for i in T.Parallel(N):
                acc[0] += X[i]
            Y[0] = acc[0]
    return parallel_sum


def parallel_max_one_element(N=128, threads=128):
    @T.prim_func
    def parallel_max(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            m = T.alloc_fragment((1,), "float32")
            T.fill(m, -T.infinity("float32"))
            for i in T.Parallel(N):
                m[0] = T.max(m[0], X[i])
            Y[0] = m[0]
    return parallel_max


def parallel_dot_2d(M=4, N=32, threads=128):
    """acc[0] += X[i, j] * F[i, j] with F a fragment: TileLang replicates F and runs the nest
    serially in every thread."""
    @T.prim_func
    def parallel_dot(X: T.Tensor((M, N), "float32"), W: T.Tensor((M, N), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((M, N), "float32")
            acc = T.alloc_fragment((1,), "float32")
            T.copy(W, f)
            T.clear(acc)
            for i, j in T.Parallel(M, N):
                acc[0] += X[i, j] * f[i, j]
            Y[0] = acc[0]
    return parallel_dot


def local_sum(N=128, threads=128):
    """A one-element T.alloc_local reduction with no fragment in the nest: serial per thread."""
    @T.prim_func
    def local_sum_(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            loc = T.alloc_local((1,), "float32")
            loc[0] = 0
            for i in T.Parallel(N):
                loc[0] += X[i]
            Y[0] = loc[0]
    return local_sum_


def fragment_partial_rows(M=4, N=32):
    """acc[i] += X[i, j]: TileLang gives the j iterations to different threads (each keeps a
    partial); the emulator refuses it."""
    @T.prim_func
    def partial_rows(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((M,), "float32")
            T.clear(acc)
            for i, j in T.Parallel(M, N):
                acc[i] += X[i, j]
            T.copy(acc, Y)
    return partial_rows


def var_sum_in_parallel(N=128):
    @T.prim_func
    def var_sum(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            v = T.alloc_var("float32")
            v = 0
            for i in T.Parallel(N):
                v += X[i]
            Y[0] = v
    return var_sum


def fragment_nonzero_index(N=32):
    @T.prim_func
    def nonzero_index(X: T.Tensor((N,), "float32"), Y: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((2,), "float32")
            T.clear(acc)
            for j in T.Parallel(N):
                acc[1] += X[j]
            T.copy(acc, Y)
    return nonzero_index


# =============================================================================================
# other constructs
# =============================================================================================
def pipelined_gemm(M, N, K_, block_M=64, block_N=64, block_K=32, stages=3, dtype="float16"):
    @T.prim_func
    def pipelined(A: T.Tensor((M, K_), dtype), B: T.Tensor((K_, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            As = T.alloc_shared((block_M, block_K), dtype)
            Bs = T.alloc_shared((block_K, block_N), dtype)
            Cf = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(Cf)
            for k in T.Pipelined(T.ceildiv(K_, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], As)
                T.copy(B[k * block_K, bx * block_N], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C[by * block_M, bx * block_N])
    return pipelined


def causal_mask_scores(N=64, block=64):
    """S[i, j] = X[i, j] where j <= i else -inf, through shared and fragment tiles."""
    @T.prim_func
    def causal(X: T.Tensor((N, N), "float32"), Y: T.Tensor((N, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(N, block), threads=128) as (bx, by):
            xs = T.alloc_shared((block, block), "float32")
            f = T.alloc_fragment((block, block), "float32")
            T.copy(X[by * block, bx * block], xs)
            T.copy(xs, f)
            for i, j in T.Parallel(block, block):
                f[i, j] = T.if_then_else(bx * block + j <= by * block + i, f[i, j], -T.infinity("float32"))
            T.copy(f, Y[by * block, bx * block])
    return causal


def dynamic_rows_softmax(N=128, block_M=8):
    m = T.dynamic("m")

    @T.prim_func
    def softmax(X: T.Tensor((m, N), "float32"), Y: T.Tensor((m, N), "float32")):
        with T.Kernel(T.ceildiv(m, block_M), threads=128) as bx:
            f = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], f)
            T.reduce_max(f, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                f[i, j] = T.exp(f[i, j] - mx[i])
            T.reduce_sum(f, sm, dim=1)
            for i, j in T.Parallel(block_M, N):
                f[i, j] = f[i, j] / sm[i]
            T.copy(f, Y[bx * block_M, 0])
    return softmax


def split_k_atomic(M, N, K_, split=4, block=32):
    """Split-K GEMM: each block reduces one K slice and atomically adds its tile to C."""
    kslice = K_ // split

    @T.prim_func
    def split_k(A: T.Tensor((M, K_), "float16"), B: T.Tensor((K_, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), split, threads=128) as (bx, by, bz):
            As = T.alloc_shared((block, block), "float16")
            Bs = T.alloc_shared((block, block), "float16")
            Cf = T.alloc_fragment((block, block), "float32")
            T.clear(Cf)
            for k in T.serial(kslice // block):
                T.copy(A[by * block, bz * kslice + k * block], As)
                T.copy(B[bz * kslice + k * block, bx * block], Bs)
                T.gemm(As, Bs, Cf)
            for i, j in T.Parallel(block, block):
                T.atomic_add(C[by * block + i, bx * block + j], Cf[i, j])
    return split_k


def shared_fragment_roundtrip(M=64, N=96, block=32):
    @T.prim_func
    def roundtrip(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            s1 = T.alloc_shared((block, block), "float16")
            f = T.alloc_fragment((block, block), "float32")
            s2 = T.alloc_shared((block, block), "float16")
            T.copy(X[by * block, bx * block], s1)
            T.copy(s1, f)
            for i, j in T.Parallel(block, block):
                f[i, j] = f[i, j] * 3 - 1
            T.copy(f, s2)
            T.copy(s2, Y[by * block, bx * block])
    return roundtrip


def persistent_scale(M=256, N=64, block=32, sms=3):
    """T.Persistent: a fixed number of blocks walk the tiles of a grid."""
    tiles_m = M // block

    @T.prim_func
    def persistent(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(sms, threads=128) as bx:
            f = T.alloc_fragment((block, N), "float32")
            for tm, tn in T.Persistent([tiles_m, 1], sms, bx):
                T.copy(X[tm * block, tn * N], f)
                for i, j in T.Parallel(block, N):
                    f[i, j] = f[i, j] * 2
                T.copy(f, Y[tm * block, tn * N])
    return persistent


def loop_break_prefix_sum(N=128):
    """Sum X until the first element above 1 (T.loop_break under a condition every thread shares)."""
    @T.prim_func
    def prefix_until(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32")
            acc = 0
            for k in T.serial(N):
                if X[k] > 1.0:
                    T.loop_break()
                acc += X[k]
            Y[tx] = acc
    return prefix_until


def _prefix_until_ref(x):
    big = (x > 1.0).nonzero()
    stop = int(big[0]) if big.numel() else x.numel()
    return torch.full((128,), float(x[:stop].double().sum()))


# =============================================================================================
# detector kernels: trip / must not trip
# =============================================================================================
def race_shared_same_step(N=128):
    """Every T.Parallel iteration writes s[0]: a write-write race (different values)."""
    @T.prim_func
    def shared_race(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((1,), "float32")
            for i in T.Parallel(N):
                s[0] = X[i]
            Y[0] = s[0]
    return shared_race


def race_global_same_step(N=128):
    """Every T.Parallel iteration adds into Y[0] (global) without an atomic."""
    @T.prim_func
    def global_race(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Y[0] = Y[0] + X[i]
    return global_race


def clean_shared_same_value(N=128):
    """Every lane writes the same value into s[0] (a flag): not reported."""
    @T.prim_func
    def same_value(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((1,), "float32")
            s[0] = 0
            for i in T.Parallel(N):
                if X[i] > 0:
                    s[0] = 1
            Y[0] = s[0]
    return same_value


def race_thread_store(N=128):
    """Each thread stores its index into one shared element (SIMT code)."""
    @T.prim_func
    def thread_store(Y: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=N) as bx:
            s = T.alloc_shared((1,), "int32")
            tx = T.get_thread_binding()
            s[0] = tx
            Y[0] = s[0]
    return thread_store


def race_shift_in_shared(N=128):
    """s[i] = s[i + 1]: each thread reads the element its neighbour writes in the same step."""
    @T.prim_func
    def shift(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N + 1,), "float32")
            T.copy(X, s[0:N])
            s[N] = 0
            for i in T.Parallel(N):
                s[i] = s[i + 1] * 2
            T.copy(s[0:N], Y)
    return shift


def clean_in_place_update(N=128):
    """s[i] = s[i] * 2: each lane reads only what it writes."""
    @T.prim_func
    def in_place(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N,), "float32")
            T.copy(X, s)
            for i in T.Parallel(N):
                s[i] = s[i] * 2 + s[i]
            T.copy(s, Y)
    return in_place


def roles_exchange(steps=3, bm=16, n=32, sync="mbarrier"):
    """A producer role fills a shared tile that a consumer role reads. ``sync``: "mbarrier" (the
    roles hand the tile over with full/empty mbarriers: ordered), "none" (no barriers: a race;
    the emulator runs the consumer first, so it also reads the tile before anything wrote it)."""
    rows = steps * bm

    @T.prim_func
    def exchange(X: T.Tensor((rows, n), "float16"), Y: T.Tensor((rows, n), "float16")):
        with T.Kernel(1, threads=256) as bx:
            xs = T.alloc_shared((bm, n), "float16")
            yf = T.alloc_fragment((bm, n), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx < 128:      # consumer
                for k in T.serial(steps):
                    if sync == "mbarrier":
                        T.barrier_wait(full, k % 2)
                    T.copy(xs, yf)
                    if sync == "mbarrier":
                        T.barrier_arrive(empty)
                    T.copy(yf, Y[k * bm, 0])
            else:             # producer
                for k in T.serial(steps):
                    if sync == "mbarrier":
                        T.barrier_wait(empty, 1 - k % 2)
                    T.copy(X[k * bm, 0], xs)
                    if sync == "mbarrier":
                        T.barrier_arrive(full)
    return exchange


def uninit_missing_clear(M=8, N=64):
    """A row sum into a fragment that was never cleared (reduce_sum with clear=False)."""
    @T.prim_func
    def missing_clear(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((M, N), "float32")
            acc = T.alloc_fragment((M,), "float32")
            T.copy(X, f)
            T.reduce_sum(f, acc, dim=1, clear=False)
            T.copy(acc, Y)
    return missing_clear


def uninit_partial_copy(M=32, N=64):
    """Only the first half of a shared tile is filled, then all of it is read."""
    @T.prim_func
    def partial_copy(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), "float32")
            f = T.alloc_fragment((M, N), "float32")
            for i, j in T.Parallel(M // 2, N):
                s[i, j] = X[i, j]
            for i, j in T.Parallel(M, N):
                f[i, j] = s[i, j] + 1
            T.copy(f, Y)
    return partial_copy


def clean_masked_read(M=32, N=64):
    """The same half-filled tile, read only where it was written (a T.if_then_else mask)."""
    @T.prim_func
    def masked_read(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), "float32")
            f = T.alloc_fragment((M, N), "float32")
            for i, j in T.Parallel(M // 2, N):
                s[i, j] = X[i, j]
            for i, j in T.Parallel(M, N):
                f[i, j] = T.if_then_else(i < M // 2, s[i, j], 0)
            T.copy(f, Y)
    return masked_read


def limit_shared_gemm(M=1024, N=1024, K_=1024):
    """A GEMM with 256x256 fp32 shared tiles for A and B: 512 KiB of shared memory per block."""
    return K.gemm(M, N, K_, dtype="float32", block_M=256, block_N=256, block_K=256)


def limit_threads(N=4096):
    @T.prim_func
    def many_threads(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 2048), threads=2048) as bx:
            tx = T.get_thread_binding()
            Y[bx * 2048 + tx] = X[bx * 2048 + tx]
    return many_threads


# =============================================================================================
# the differential cases
# =============================================================================================
@dataclass
class Case:
    name: str
    build: object                 # () -> T.prim_func
    inputs: object                # () -> list of tensors (inputs and poisoned outputs, in order)
    outputs: tuple                # positions of the outputs in that list
    reference: object             # (list of tensors) -> list of expected outputs
    tol: float = 1e-5
    scalars: dict = field(default_factory=dict)


def _nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


def _marked_blocks(blocks, threads, g):
    """Normals with one value 100 per block at a random thread (emulate_kernels.block_votes)"""
    x = torch.randn(blocks, threads, generator=g)
    x[torch.arange(blocks), torch.randint(0, threads, (blocks,), generator=g)] = 100.0
    return x.reshape(-1)


def _block_votes_ref(rows):
    return torch.stack([(rows > 0).sum(1), (rows < -2.5).any(1).int(), (rows > -3).all(1).int(),
                        (rows == 100).int().argmax(1)], 1).int()


def _select_ref(x):
    """Y[i] = max(x[i], x[i + 1]) inside each 64-element tile (x read past its end is 0, the
    guarded load's safe value), x[i] for a tile's last element."""
    pad = torch.zeros(-(-x.numel() // 64) * 64 + 1)
    pad[: x.numel()] = x
    y = torch.maximum(pad[:-1], pad[1:])
    last = torch.arange(pad.numel() - 1) % 64 == 63
    y[last] = pad[:-1][last]
    return y[: x.numel()]


def _gemm_ref(a, b):
    return a.double() @ b.double()


def _cases():
    g = torch.Generator().manual_seed(25)

    def rn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    cs = [
        Case("parallel sum into fragment[0]", parallel_sum_one_element,
             lambda: [rn(128), _nan(1)], (1,), lambda t: [t[0].double().sum().reshape(1)]),
        Case("parallel max into fragment[0]", parallel_max_one_element,
             lambda: [rn(128), _nan(1)], (1,), lambda t: [t[0].max().reshape(1)], 0),
        Case("parallel dot with a replicated fragment", parallel_dot_2d,
             lambda: [rn(4, 32), rn(4, 32), _nan(1)], (2,), lambda t: [(t[0].double() * t[1].double()).sum().reshape(1)]),
        Case("parallel sum into local[0]", local_sum,
             lambda: [rn(128), _nan(1)], (1,), lambda t: [t[0].double().sum().reshape(1)]),
        Case("reduce_sum dim=1", lambda: K.reduce_kernel(64, 128, "sum", 1),
             lambda: [rn(64, 128), rn(64), _nan(64)], (2,), lambda t: [t[0].double().sum(1)]),
        Case("reduce_max dim=0, clear=False", lambda: K.reduce_kernel(32, 128, "max", 0, clear=False),
             lambda: [rn(32, 128), rn(128), _nan(128)], (2,), lambda t: [torch.maximum(t[0].max(0).values, t[1])], 0),
        Case("reduce_absmax dim=1", lambda: K.reduce_kernel(32, 64, "absmax", 1),
             lambda: [rn(32, 64), rn(32), _nan(32)], (2,), lambda t: [t[0].abs().max(1).values], 0),
        Case("cumsum dim=1 (shared, 2-d and 1-d)", lambda: K.cumsum_kernel(16, 64),
             lambda: [rn(16, 64), _nan(16, 64), _nan(64)], (1, 2),
             lambda t: [t[0].double().cumsum(1), t[0][0].double().cumsum(0)]),
        Case("histogram with atomics", lambda: K.histogram(1000, 16),
             # positive weights: a float sum in another order differs by ~1e-7 of the total only
             # where nothing cancels (a zero-mean sum's relative error is unbounded)
             lambda: [torch.randint(0, 16, (1000,), generator=g, dtype=torch.int32), rn(1000).abs() + 0.5,
                      torch.zeros(16, dtype=torch.int32), torch.zeros(1)], (2, 3),
             lambda t: [torch.bincount(t[0].long(), minlength=16).int(), t[1].double().sum().reshape(1)], 1e-5),
        Case("split-K GEMM with atomic_add", lambda: split_k_atomic(64, 64, 256),
             lambda: [rn(64, 256, dtype=torch.float16), rn(256, 64, dtype=torch.float16), torch.zeros(64, 64)], (2,),
             lambda t: [_gemm_ref(t[0], t[1])], 1e-5),
        Case("T.Pipelined GEMM, 3 stages, ragged", lambda: pipelined_gemm(100, 72, 96),
             lambda: [rn(100, 96, dtype=torch.float16), rn(96, 72, dtype=torch.float16), _nan(100, 72)], (2,),
             lambda t: [_gemm_ref(t[0], t[1])], 1e-5),
        Case("GEMM transpose_B", lambda: K.gemm(64, 64, 64, transpose_B=True, out_dtype="float32"),
             lambda: [rn(64, 64, dtype=torch.float16), rn(64, 64, dtype=torch.float16), _nan(64, 64)], (2,),
             lambda t: [_gemm_ref(t[0], t[1].T)], 1e-5),
        Case("GEMM transpose_A", lambda: K.gemm(64, 64, 64, transpose_A=True, out_dtype="float32"),
             lambda: [rn(64, 64, dtype=torch.float16), rn(64, 64, dtype=torch.float16), _nan(64, 64)], (2,),
             lambda t: [_gemm_ref(t[0].T, t[1])], 1e-5),
        Case("shared -> fragment -> shared copies", shared_fragment_roundtrip,
             lambda: [rn(64, 96, dtype=torch.float16), _nan(64, 96, dtype=torch.float16)], (1,),
             lambda t: [t[0].double() * 3 - 1], 2e-3),
        Case("causal mask with T.if_then_else", causal_mask_scores,
             lambda: [rn(64, 64), _nan(64, 64)], (1,),
             lambda t: [t[0].masked_fill(~torch.ones(64, 64, dtype=torch.bool).tril(), float("-inf"))], 0),
        Case("softmax rows, dynamic m (ragged)", dynamic_rows_softmax,
             lambda: [rn(37, 128), _nan(37, 128)], (1,), lambda t: [torch.softmax(t[0].double(), 1)], 1e-5),
        Case("warp shuffle sum", lambda: K.warp_shuffle_sum(256),
             lambda: [rn(256), _nan(8), _nan(2)], (1, 2),
             lambda t: [t[0].double().view(8, 32).sum(1), t[0].double().view(2, 128).sum(1)], 1e-5),
        Case("block votes: syncthreads_count / or / and, an index from bit votes", lambda: K.block_votes(128 * 4),
             lambda: [_marked_blocks(4, 128, g), torch.full((4, 4), -7, dtype=torch.int32)], (1,),
             lambda t: [_block_votes_ref(t[0].view(4, 128))], 0),
        Case("tile-level atomic_add of column sums", lambda: K.tile_atomic_sum(100, 64),
             lambda: [rn(100, 64), torch.zeros(64)], (1,), lambda t: [t[0].double().sum(0)], 1e-5),
        Case("int8 GEMM, int32 accumulator, transpose_B", lambda: K.int8_gemm(64, 128, 128),
             lambda: [torch.randint(-100, 100, (64, 128), generator=g, dtype=torch.int8),
                      torch.randint(-100, 100, (128, 128), generator=g, dtype=torch.int8),
                      torch.zeros(64, 128, dtype=torch.int32)], (2,),
             lambda t: [(t[0].long() @ t[1].long().T).int()], 0),
        Case("if_then_else with a read past the tile, if/else mask", lambda: K.select_kernel(200),
             lambda: [rn(200), _nan(200), _nan(200)], (1, 2),
             lambda t: [_select_ref(t[0]), torch.where(t[0] > 0.5, t[0], -t[0])], 0),
        Case("row softmax fp16, exp2, dynamic M", lambda: K.row_softmax(256),
             lambda: [rn(45, 256, dtype=torch.float16), _nan(45, 256, dtype=torch.float16)], (1,),
             lambda t: [torch.softmax(t[0].double(), 1)], 2e-3),
        Case("T.loop_break under a uniform condition", loop_break_prefix_sum,
             lambda: [rn(128), _nan(128)], (1,), lambda t: [_prefix_until_ref(t[0])], 1e-6),
        Case("T.Persistent tile walk", persistent_scale,
             lambda: [rn(256, 64), _nan(256, 64)], (1,), lambda t: [t[0] * 2], 0),
    ]
    return cs


CASES = _cases()
