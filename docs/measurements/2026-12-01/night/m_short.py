"""GPU experiment: M <= 64, the rule's kernel(s) against the same tile with A's box only
ceil(M / 8) * 8 rows tall (short_box.py), torch beside."""
import sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk, rule, split_k
from short_box import short_program, short_partial_program

WIDTHS = ((4096, 4096), (8192, 8192), (2048, 8192), (8192, 2048))
MS = (2, 3, 5, 8, 13, 16, 24, 31, 32, 40, 48, 56, 64)
EXTRA = ((3, 6112, 7728), (37, 4760, 1920), (13, 976, 5544), (9, 3920, 5080))
DTYPES = ("bfloat16", "float16")


def rows_for(M):
    return max(8, -(-M // 8) * 8)


def cases():
    out = [(M, N, K, d) for d in DTYPES for (N, K) in WIDTHS for M in MS]
    out += [(M, N, K, d) for d in DTYPES for (M, N, K) in EXTRA]
    return [c for c in out if not rule.choose(c[0], c[1], c[2], c[3], "sm_90a").gemv]


def build(M, N, K, d, variant):
    ch = rule.choose(M, N, K, d, "sm_90a")
    cfg, s = ch.config, ch.split
    if s == 1:
        fac = None if variant == "plain" else short_program(rows_for(M))
        return (gk._build(None, N, K, cfg, d, True, "sm_90a", fac),)
    if variant == "plain":
        return split_k._build(N, K, s, cfg, d, "sm_90a")
    knobs = split_k._partial_knobs(cfg)
    partial = runtime.compile_kernel(short_partial_program(rows_for(M))(N, K, s, in_dtype=d, **knobs), arch="sm_90a")
    return (partial, split_k._build(N, K, s, cfg, d, "sm_90a")[1])


def precompile_job(job):
    build(*job)


if __name__ == "__main__":
    jobs = list(dict.fromkeys((M if v == "short" else 0, N, K, d, v) for (M, N, K, d) in cases() for v in ("plain", "short")))
    if "--precompile" in sys.argv:
        jobs = [(M, N, K, d, v) for (M, N, K, d) in cases() for v in ("plain", "short")]
        got = runtime.precompile(jobs, "m_short:precompile_job")
        print("precompiled", sum(e is None for e in got.values()), "of", len(got),
              [str(e)[:300] for e in got.values() if e is not None])
        sys.exit(0)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    t0 = time.time()
    print(f"{'shape':<18} {'dt':<5} {'choice':<36} {'rows':>4} {'torch':>7} {'plain':>7} {'x':>5} {'short':>7} {'x':>5}  checks")
    for (M, N, K, d) in cases():
        ch = rule.choose(M, N, K, d, "sm_90a")
        tdt = getattr(torch, d)
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        ref = gk.gemm_relu_reference(a, b)
        ct = torch.empty((M, N), dtype=tdt, device="cuda")
        tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=30, return_mode="median") * 1e3
        cells, oks = [], []
        for v in ("plain", "short"):
            ks = [runtime.launcher(k) for k in build(M, N, K, d, v)]
            c = checks.poisoned((M, N), tdt, "cuda")
            if len(ks) == 1:
                fn = lambda: ks[0](a, b, c)
            else:
                ws = torch.empty((ch.split, M, N), dtype=torch.float32, device="cuda")
                fn = lambda: (ks[0](a, b, ws), ks[1](ws, c))
            fn()
            torch.cuda.synchronize()
            oks.append(checks.compare(c, ref, tolerance=checks.TOLERANCE[d]).ok)
            us = do_bench(fn, warmup=5, rep=30, return_mode="median") * 1e3
            cells.append(f"{us:7.1f} {tt / us:5.2f}")
        print(f"{f'{M}x{N}x{K}':<18} {d[:4]:<5} {ch.label:<36} {rows_for(M):>4} {tt:7.1f} " + " ".join(cells)
              + "  " + " ".join("ok" if o else "WRONG" for o in oks), flush=True)
    print(f"total {time.time() - t0:.0f} s")
