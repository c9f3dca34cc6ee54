"""GPU experiment: the rule's kernel for each shape, plain against edge-clamped, torch beside them."""
import sys, time, random, math
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk, rule
from last_row_variants import VARIANTS

DTYPES = ("bfloat16", "float16")
WIDTHS = ((4096, 4096), (8192, 8192), (8192, 2048), (2048, 8192))
MS_A = (64, 65, 80, 93, 104, 119, 128)
KNOWN = ((275, 7176, 6528), (858, 4944, 1008), (639, 7280, 6608), (2896, 3128, 4080), (650, 3744, 8056),
         (6000, 720, 2528), (3001, 5000, 4040), (129, 1001, 999), (4096, 4096, 4096), (8192, 8192, 8192))


def random_shapes(n=12, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        M = max(129, int(round(2 ** rng.uniform(7.1, 13))))
        out.append((M, 8 * rng.randint(64, 1024), 8 * rng.randint(64, 1024)))
    return out


def cases():
    out = [(M, N, K, d) for d in DTYPES for (N, K) in WIDTHS for M in MS_A]
    out += [(M, N, K, d) for d in DTYPES for (M, N, K) in KNOWN + tuple(random_shapes())]
    return out


def jobs():
    js = []
    for (M, N, K, d) in cases():
        ch = rule.choose(M, N, K, d, "sm_90a")
        if ch.split > 1 or ch.gemv:
            continue
        for v in ("plain", "edge"):
            js.append((N, K, ch.config, d, v))
    return list(dict.fromkeys(js))


def build(N, K, cfg, d, v):
    return gk._build(None, N, K, cfg, d, True, "sm_90a", VARIANTS[v])


def precompile_job(job):
    build(*job)


if __name__ == "__main__":
    if "--precompile" in sys.argv:
        got = runtime.precompile(jobs(), "m_edge:precompile_job")
        print("precompiled", sum(e is None for e in got.values()), "of", len(got),
              [str(e)[:300] for e in got.values() if e is not None])
        sys.exit(0)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    t0 = time.time()
    print(f"{'shape':<20} {'dt':<5} {'tile':<34} {'torch':>7} {'plain':>7} {'x':>5} {'edge':>7} {'x':>5}  checks")
    for (M, N, K, d) in cases():
        ch = rule.choose(M, N, K, d, "sm_90a")
        if ch.split > 1 or ch.gemv:
            continue
        tdt = getattr(torch, d)
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        ref = gk.gemm_relu_reference(a, b)
        ct = torch.empty((M, N), dtype=tdt, device="cuda")
        tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=30, return_mode="median") * 1e3
        cells, oks = [], []
        for v in ("plain", "edge"):
            fn = runtime.launcher(build(N, K, ch.config, d, v))
            c = checks.poisoned((M, N), tdt, "cuda")
            fn(a, b, c)
            torch.cuda.synchronize()
            oks.append(checks.compare(c, ref, tolerance=checks.TOLERANCE[d]).ok)
            us = do_bench(lambda: fn(a, b, c), warmup=5, rep=30, return_mode="median") * 1e3
            cells.append(f"{us:7.1f} {tt / us:5.2f}")
        print(f"{f'{M}x{N}x{K}':<20} {d[:4]:<5} {ch.config.label if hasattr(ch.config, 'label') else ch.name:<34} {tt:7.1f} "
              + " ".join(cells) + "  " + " ".join("ok" if o else "WRONG" for o in oks), flush=True)
        del a, b, ref, ct
    print(f"total {time.time() - t0:.0f} s")
