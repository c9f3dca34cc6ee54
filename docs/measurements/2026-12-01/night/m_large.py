"""GPU experiment: M > 128, the rule's pick against other tiles and K splits (fp16), torch beside."""
import sys, time, random
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk, rule, split_k
from tilelang_tutorial.lessons.gemm.configs import TUNED_CONFIGS

D = "float16"
TILES = {"tuned": TUNED_CONFIGS[D], "m128n128k128t256": dict(rule.LARGE_M_TILES)["m128n128k128t256"] if False else None}
TILES = {name: (cfg or TUNED_CONFIGS[D]) for name, cfg, _ in rule.LARGE_M_TILES}
TILES["m128n64k64s6"] = rule.SMALL_M_TILES["m128n64k64s6"]
TILES["m64n64k128s4"] = rule.SMALL_M_TILES["m64n64k128s4"]
SPLITS = {"tuned": (1, 2), "m128n128k128t256": (1, 2, 3), "narrow": (1, 2, 3, 4), "m128n64k64s6": (1, 2), "m64n64k128s4": (1, 2, 4)}
KNOWN = ((275, 7176, 6528), (858, 4944, 1008), (639, 7280, 6608), (2896, 3128, 4080), (650, 3744, 8056),
         (6000, 720, 2528), (3001, 5000, 4040), (1965, 1104, 7232), (1228, 3504, 5280), (183, 1248, 5024),
         (228, 2336, 5672), (160, 4064, 3936), (779, 7280, 5144), (1504, 912, 2320), (166, 7544, 1600),
         (516, 1744, 3744))


def cases():
    out = []
    for (M, N, K) in KNOWN:
        for name, cfg in TILES.items():
            for s in SPLITS[name]:
                if s > 1 and -(-K // cfg.block_K) < 2 * s:
                    continue
                out.append((M, N, K, name, s))
    return out


def jobs():
    return list(dict.fromkeys((N, K, name, s) for (M, N, K, name, s) in cases()))


def build(N, K, name, s):
    cfg = TILES[name]
    if s == 1:
        return (gk._build(None, N, K, cfg, D, True, "sm_90a", None),)
    return split_k._build(N, K, s, cfg, D, "sm_90a")


def precompile_job(job):
    build(*job)


if __name__ == "__main__":
    if "--precompile" in sys.argv:
        got = runtime.precompile(jobs(), "m_large:precompile_job")
        print("precompiled", sum(e is None for e in got.values()), "of", len(got),
              [str(e)[:300] for e in got.values() if e is not None])
        sys.exit(0)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    t0 = time.time()
    for (M, N, K) in KNOWN:
        tdt = getattr(torch, D)
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        ref = gk.gemm_relu_reference(a, b)
        ct = torch.empty((M, N), dtype=tdt, device="cuda")
        tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=30, return_mode="median") * 1e3
        pick = rule.choose(M, N, K, D, "sm_90a")
        rows = []
        for (m_, n_, k_, name, s) in cases():
            if (m_, n_, k_) != (M, N, K):
                continue
            ks = [runtime.launcher(k) for k in build(N, K, name, s)]
            c = checks.poisoned((M, N), tdt, "cuda")
            if s == 1:
                fn = lambda: ks[0](a, b, c)
            else:
                ws = torch.empty((s, M, N), dtype=torch.float32, device="cuda")
                fn = lambda: (ks[0](a, b, ws), ks[1](ws, c))
            fn()
            torch.cuda.synchronize()
            ok = checks.compare(c, ref, tolerance=checks.TOLERANCE[D]).ok
            us = do_bench(fn, warmup=5, rep=30, return_mode="median") * 1e3
            rows.append((us, name, s, ok))
        best = min(r for r in rows if r[3])
        print(f"\n== {M}x{N}x{K}: torch {tt:.1f} us; the rule picks {pick.name} split {pick.split}; best {best[1]}/k{best[2]} {tt / best[0]:.2f}x", flush=True)
        for us, name, s, ok in sorted(rows):
            print(f"   {name:<18} k{s}  {us:7.1f} us {tt / us:5.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        del a, b, ref, ct
    print(f"total {time.time() - t0:.0f} s")
