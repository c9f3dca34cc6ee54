# Stream-K prototype: P CTAs share tiles x k_steps iterations evenly; full tiles stored with ReLU,
# partial segments to W[cta, slot]; a fixup kernel sums a split tile's segments, ReLU, cast.
import tilelang.language as T

def streamk_program(N, K, P=132, block_M=128, block_N=256, block_K=64, num_stages=4, threads=256,
                    policy="Square", in_dtype="float16", accum_dtype="float32", store_via_shared=False):
    m = T.dynamic("m")
    kt = -(-K // block_K)
    nb = -(-N // block_N)
    warp_policy = getattr(T.GemmWarpPolicy, policy)

    @T.prim_func
    def streamk_kernel(A: T.Tensor((m, K), in_dtype), B: T.Tensor((K, N), in_dtype),
                       C: T.Tensor((m, N), in_dtype), W: T.Tensor((P, 2, block_M, block_N), accum_dtype)):
        with T.Kernel(P, threads=threads) as pid:
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            # balanced split of the tiles x kt iterations: the first r CTAs take q + 1, the rest q
            q = (T.ceildiv(m, block_M) * (nb * kt)) // P
            r = (T.ceildiv(m, block_M) * (nb * kt)) % P
            lo = pid * q + T.min(pid, r)
            hi = lo + q + T.if_then_else(pid < r, 1, 0)
            for t in T.serial(lo // kt, T.ceildiv(hi, kt)):
                k0 = T.max(lo - t * kt, 0)
                k1 = T.min(hi - t * kt, kt)
                T.clear(acc)
                for ko in T.Pipelined(k1 - k0, num_stages=num_stages):
                    T.copy(A[(t // nb) * block_M, (k0 + ko) * block_K], A_shared)
                    T.copy(B[(k0 + ko) * block_K, (t % nb) * block_N], B_shared)
                    T.gemm(A_shared, B_shared, acc, policy=warp_policy)
                if k0 == 0 and k1 == kt:
                    for i, j in T.Parallel(block_M, block_N):
                        acc[i, j] = T.max(acc[i, j], 0)
                    if store_via_shared:
                        C_shared = T.alloc_shared((block_M, block_N), in_dtype)
                        T.copy(acc, C_shared)
                        T.copy(C_shared, C[(t // nb) * block_M, (t % nb) * block_N])
                    else:
                        T.copy(acc, C[(t // nb) * block_M, (t % nb) * block_N])
                else:
                    T.copy(acc, W[pid, T.min(t - lo // kt, 1), 0, 0])
    return streamk_kernel


def fixup_program(N, K, P=132, block_M=128, block_N=256, block_K=64, out_dtype="float16", accum_dtype="float32",
                  threads=256):
    m = T.dynamic("m")
    kt = -(-K // block_K)
    nb = -(-N // block_N)

    @T.prim_func
    def streamk_fixup_kernel(W: T.Tensor((P, 2, block_M, block_N), accum_dtype), C: T.Tensor((m, N), out_dtype)):
        with T.Kernel(nb, T.ceildiv(m, block_M), threads=threads) as (tn, tm):
            part = T.alloc_fragment((block_M, block_N), accum_dtype)
            tot = T.alloc_fragment((block_M, block_N), accum_dtype)
            q = T.alloc_var("int32")
            r = T.alloc_var("int32")
            s = T.alloc_var("int32")
            c0 = T.alloc_var("int32")
            c1 = T.alloc_var("int32")
            q = (T.ceildiv(m, block_M) * (nb * kt)) // P
            r = (T.ceildiv(m, block_M) * (nb * kt)) % P
            s = (tm * nb + tn) * kt
            # owner(i): the CTA whose range holds iteration i (the first r CTAs hold q + 1)
            c0 = T.if_then_else(s < (q + 1) * r, s // (q + 1), r + (s - (q + 1) * r) // T.max(q, 1))
            c1 = T.if_then_else(s + kt - 1 < (q + 1) * r, (s + kt - 1) // (q + 1),
                                r + (s + kt - 1 - (q + 1) * r) // T.max(q, 1))
            if c0 != c1:
                T.clear(tot)
                for c in T.serial(c0, c1 + 1):
                    T.copy(W[c, T.if_then_else(c * q + T.min(c, r) >= s, 0, 1), 0, 0], part)
                    for i, j in T.Parallel(block_M, block_N):
                        tot[i, j] += part[i, j]
                for i, j in T.Parallel(block_M, block_N):
                    tot[i, j] = T.max(tot[i, j], 0)
                T.copy(tot, C[tm * block_M, tn * block_N])
    return streamk_fixup_kernel
