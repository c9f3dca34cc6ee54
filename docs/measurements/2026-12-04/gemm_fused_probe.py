"""Split-K with the reduction fused into the GEMM kernel (``gemm_relu_split_program`` below: the block that
arrives last for its tile sums the fp32 partials, applies the ReLU, casts and resets the tile's
counter) against the op's two-kernel pair (partials, then a reduce kernel) for the same tile and
split, the op's rule and torch relu(a @ b). Few-block shapes past 128 rows (fixed ones where the
records read below 0.80x, and drawn ones) and the small-M shapes the rule splits.
do_bench medians, L2 flushed; every kernel checked on a poisoned output on three calls in a row
(the counters must come back to zero for the second and third).

    python3 gemm_fused_probe.py [SEED]
"""
import functools, math, random, sys, time
here = __file__.rsplit("/", 1)[0] or "."
sys.path.insert(0, here); sys.path.insert(0, here + "/../2026-12-02b"); sys.path.insert(0, here + "/../2026-12-03")
import torch
from tilelang_tutorial import checks, runtime, timing
from tilelang_tutorial.lessons.gemm import kernel as gr, rule, bench, split_k
from tilelang_tutorial.lessons.gemm import last_rows
import tilelang.language as T


# The fused split-K kernel this probe measured (it was not adopted: see gemm_fused_probe.log and
# docs/performance-log.md, 2026-12-04).
def gemm_relu_split_program(N, K, split, block_M=64, block_N=128, block_K=64, num_stages=4, threads=128,
                            policy="Square", in_dtype="float16", accum_dtype="float32", a_rows=0,
                            guard_cols=False):
    """``C = ReLU(A @ B)`` with K split ``split`` ways in *one* kernel (dynamic M): the op's split-K.

    Each block sums its slice of K into an fp32 fragment and writes it to ``W[slice]``, as
    :func:`gemm_partial_program` does; then one thread counts the block in for its tile of C (an
    atomic add on ``arrivals[tile]`` that returns the count before it). The block that finds
    ``split - 1`` blocks already counted is the tile's last: it reads the ``split`` partials back
    (from L2: they were written microseconds ago), sums them in slice order (0 first, so the
    result does not depend on which block came last), applies the ReLU, casts, stores C and sets
    the tile's counter back to 0 for the next call. The other blocks are done after their write.
    No second kernel: the reduction starts as soon as a tile's slices are in, not after the last
    block of the whole grid. ``arrivals`` must be zero before the first call (one ``int32`` per
    tile); a stream's calls reuse it, two streams in flight at once need one each.

    ``guard_cols``: the read-back tests the column too (``col < N``), so that TileLang's own bounds
    check folds into it (``fused_resources.md``: without it, where ``N % block_N != 0``, each load of W
    sits in its own branch, one in flight per thread); ``gemm_fused_cols.py`` measures it.

    ``a_rows`` > 0: boxes of ``A`` only ``a_rows`` tall (``m <= a_rows <= 64``, one row of tiles;
    :func:`.last_rows.short_box_program`).
    """
    if a_rows:
        from tilelang_tutorial.lessons.gemm.last_rows import _check_short   # the short boxes' rules

        _check_short(a_rows, block_M, block_K)
    m = T.dynamic("m")
    k_steps = -(-K // block_K)
    steps_per_split = -(-k_steps // split)
    warp_policy = getattr(T.GemmWarpPolicy, policy)
    n_blocks = -(-N // block_N)

    @T.prim_func
    def gemm_relu_split_kernel(
        A: T.Tensor((m, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((m, N), in_dtype),
        W: T.Tensor((split, m, N), accum_dtype),
        arrivals: T.Tensor((T.ceildiv(m, block_M) * n_blocks,), "int32"),
    ):
        with T.Kernel(n_blocks, T.ceildiv(m, block_M), split, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            arrived = T.alloc_shared((1,), "int32")
            T.clear(acc)
            for ko in T.Pipelined(steps_per_split, num_stages=num_stages):
                k0 = (bz * steps_per_split + ko) * block_K     # a last slice past K reads zeros
                if a_rows:           # a Python int: decided when the kernel is built
                    T.copy(A[0:a_rows, k0:k0 + 64], A_shared[0:a_rows, 0:64])
                    if block_K > 64:
                        T.copy(A[0:a_rows, k0 + 64:k0 + 128], A_shared[0:a_rows, 64:128])
                    if block_K > 128:
                        T.copy(A[0:a_rows, k0 + 128:k0 + 192], A_shared[0:a_rows, 128:192])
                        T.copy(A[0:a_rows, k0 + 192:k0 + 256], A_shared[0:a_rows, 192:256])
                else:
                    T.copy(A[by * block_M, k0], A_shared)
                T.copy(B[k0, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc, policy=warp_policy)
            T.copy(acc, W[bz, by * block_M, bx * block_N])
            tile = by * n_blocks + bx
            tx = T.get_thread_binding()
            # every thread's partial written before one thread counts the block in; acq_rel: the
            # writes are visible GPU-wide before the count, and the last block's reads after it
            T.sync_threads()
            if tx == 0:
                arrived[0] = T.atomic_add(arrivals[tile], 1, memory_order="acq_rel", return_prev=True)
            T.sync_threads()
            if arrived[0] == split - 1:
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = 0
                for s in T.serial(split):
                    for i, j in T.Parallel(block_M, block_N):
                        if guard_cols:
                            if by * block_M + i < m and bx * block_N + j < N:
                                acc[i, j] += W[s, by * block_M + i, bx * block_N + j]
                        else:
                            if by * block_M + i < m:
                                acc[i, j] += W[s, by * block_M + i, bx * block_N + j]
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] = T.max(acc[i, j], 0)
                T.copy(acc, C[by * block_M, bx * block_N])
                if tx == 0:
                    arrivals[tile] = 0

    return gemm_relu_split_kernel


TILES = {n: (c or gr.tuned_config("float16")) for n, c, _ in rule.LARGE_M_TILES
         if n in ("tuned", "m128n128k128t256", "narrow")}
TILES["m64n64k128s4"] = rule.SMALL_M_TILES["m64n64k128s4"]
TILES["m128n64k64s6"] = rule.SMALL_M_TILES["m128n64k64s6"]
TILES["m64n128k64s4"] = rule.SMALL_M_TILES["m64n128k64s4"]
FIXED = [(260, 1280, 7800, "float16"), (781, 1464, 4144, "bfloat16"), (637, 3616, 7856, "float16"),
         (356, 7176, 5272, "float16"), (228, 2336, 5672, "float16"), (183, 1248, 5024, "float16"),
         (145, 960, 4480, "float16"), (78, 4096, 4096, "bfloat16"), (1, 2048, 8192, "float16"),
         (16, 8192, 8192, "float16"), (64, 2048, 8192, "float16")]
KNOBS = ("block_M", "block_N", "block_K", "num_stages", "threads", "policy")


@functools.lru_cache(maxsize=None)
def build_fused(N, K, split, name, dt, a_rows=0, guard_cols=False):
    cfg = TILES[name]
    return runtime.compile_kernel(gemm_relu_split_program(
        N, K, split, in_dtype=dt, a_rows=a_rows, guard_cols=guard_cols, **{k: getattr(cfg, k) for k in KNOBS}),
        arch="sm_90a")


def cands(M, N, K):
    names = (("tuned", "m128n128k128t256", "narrow", "m64n64k128s4") if M > 128 else
             ("m64n64k128s4", "m128n64k64s6", "m64n128k64s4", "narrow"))
    out = []
    for n in names:
        c = TILES[n]
        for s in (1, 2, 3, 4):
            if s > 1 and K // s < 1024:
                continue
            blocks = math.ceil(M / c.block_M) * math.ceil(N / c.block_N) * s
            if 60 <= blocks <= 160 or (s == 1 and n == names[0]):
                out.append((n, s, blocks))
    return out


def short(M, c):
    """the op's short boxes of A (M <= 64 on a 64-row tile), 0 otherwise"""
    return last_rows.short_rows(M) if M <= 64 and c.block_M == 64 and last_rows.short_rows(M) < 64 else 0


def job(j):
    N, K, n, s, dt, kind, a_rows = j
    if kind == "fused":
        build_fused(N, K, s, n, dt, a_rows)
    elif kind == "pair":
        split_k.build_split_k(N, K, s, TILES[n], dt)
    else:
        gr.build_for(N, K, TILES[n], s, dt)


def runner(a, b, out, n, s, kind):
    M, K = a.shape
    N = b.shape[1]
    dt = str(a.dtype).replace("torch.", "")
    if s == 1:
        k = gr.build_gemm_relu(N, K, config=TILES[n], dtype=dt)
        return lambda: k(a, b, out)
    if kind == "pair":
        partial, reduce = (runtime.launcher(k) for k in split_k.build_split_k(N, K, s, TILES[n], dt))
        w = torch.empty((s, M, N), dtype=torch.float32, device=a.device)
        return lambda: (partial(a, b, w), reduce(w, out))
    c = TILES[n]
    k = build_fused(N, K, s, n, dt, short(M, c))
    w = torch.empty((s, M, N), dtype=torch.float32, device=a.device)
    counters = torch.zeros(math.ceil(M / c.block_M) * math.ceil(N / c.block_N), dtype=torch.int32, device=a.device)
    return lambda: k(a, b, out, w, counters)


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    import gemm_fewblocks as fb
    rnd = []
    while len(rnd) < 4:
        s = (rng.randint(129, 1024), 8 * rng.randint(64, 1024), 8 * rng.randint(512, 1024), ("float16", "bfloat16")[len(rnd) % 2])
        if fb.few_block(*s):
            rnd.append(s)
    shapes = FIXED + rnd
    jobs = [(N, K, n, s, dt, kind, short(M, TILES[n]) if kind == "fused" else 0)
            for M, N, K, dt in shapes for n, s, _ in cands(M, N, K)
            for kind in (("fused", "pair") if s > 1 else ("plain",))]
    t0 = time.time()
    got = runtime.precompile(jobs, "gemm_fused_probe:job")
    bad = {j for j, e in got.items() if e is not None}
    for j in bad:
        print("compile failed", j, repr(got[j])[:300])
    print(f"seed {seed}: precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    choices = {s: rule.choose(*s) for s in shapes}
    bench.prebuild_rule(choices)
    for M, N, K, dt in shapes:
        a, b = bench._inputs(M, N, K, dt)
        ref = gr.gemm_relu_reference(a, b)
        out = checks.poisoned((M, N), a.dtype, "cuda")
        gr.gemm_relu(a, b, out=out); torch.cuda.synchronize()
        ok = checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok
        tt = timing.median_ms(lambda: torch.relu(a @ b))
        tr = timing.median_ms(lambda: gr.gemm_relu(a, b, out=out))
        print(f"\n{M}x{N}x{K} {dt}: torch {tt * 1e3:.1f} us; rule {choices[(M, N, K, dt)].label} {tr * 1e3:.1f} us "
              f"{tt / tr:.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        for n, s, blocks in cands(M, N, K):
            for kind in (("fused", "pair") if s > 1 else ("plain",)):
                if (N, K, n, s, dt, kind, short(M, TILES[n]) if kind == "fused" else 0) in bad:
                    continue
                out = checks.poisoned((M, N), a.dtype, "cuda")
                f = runner(a, b, out, n, s, kind)
                oks = []
                for call in range(3):          # one launcher, three calls: the counters reset themselves
                    out.copy_(checks.poisoned((M, N), a.dtype, "cuda"))
                    f(); torch.cuda.synchronize()
                    oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
                ms = timing.median_ms(f)
                out.copy_(checks.poisoned((M, N), a.dtype, "cuda"))
                f(); torch.cuda.synchronize()     # after the timed calls too
                oks.append(checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok)
                print(f"   {kind:<5} {n:<18} k{s} {blocks:>4} blocks {ms * 1e3:7.1f} us {tt / ms:5.2f}x "
                      f"{'ok' if all(oks) else 'WRONG ' + str(oks)}", flush=True)
        del a, b, out, ref
        torch.cuda.empty_cache()
    print(f"gemm_fused_probe: {time.time() - t0:.0f} s")
