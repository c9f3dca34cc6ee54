"""GPU experiment: stream-K (132 CTAs share tiles x K steps evenly, a fixup kernel sums split tiles)
against the op's rule and torch, M > 128.

    python m_streamk.py --all    # 23 shapes (streamk_23_shapes.log)
    python m_streamk.py          # 5 of them, with the kernel run on one CTA per tile (streamk_one_tile_per_cta.log)
"""
import sys, time, functools
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk, rule
from tilelang_tutorial.lessons.gemm.configs import TUNED_CONFIGS
import streamk

P = 132
VARIANTS = {
    "sk_tuned_reg": dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, policy="FullRow", store_via_shared=False),
    "sk_128": dict(block_M=128, block_N=128, block_K=128, num_stages=3, threads=256, policy="Square", store_via_shared=False),
}
SHAPES_ALL = [(275, 7176, 6528, "float16"), (858, 4944, 1008, "float16"), (639, 7280, 6608, "float16"),
          (2896, 3128, 4080, "float16"), (650, 3744, 8056, "float16"), (6000, 720, 2528, "float16"),
          (3001, 5000, 4040, "float16"), (1965, 1104, 7232, "float16"), (1228, 3504, 5280, "float16"),
          (183, 1248, 5024, "float16"), (228, 2336, 5672, "float16"), (160, 4064, 3936, "float16"),
          (779, 7280, 5144, "float16"), (1504, 912, 2320, "float16"), (166, 7544, 1600, "float16"),
          (516, 1744, 3744, "float16"), (1083, 4936, 7152, "float16"), (1842, 7952, 5952, "bfloat16"),
          (437, 6312, 3144, "bfloat16"), (7618, 8032, 3856, "float16"), (278, 7408, 2032, "bfloat16"),
          (4096, 4096, 4096, "float16"), (8192, 8192, 8192, "float16")]


ALL = "--all" in sys.argv
SHAPES = SHAPES_ALL if ALL else [s for s in SHAPES_ALL if s[:3] in ((275, 7176, 6528), (650, 3744, 8056), (1228, 3504, 5280), (4096, 4096, 4096), (437, 6312, 3144))]


@functools.lru_cache(maxsize=None)
def build(N, K, dt, name, P=P):
    v = VARIANTS[name]
    sk = runtime.compile_kernel(streamk.streamk_program(N, K, P=P, in_dtype=dt, **v), arch="sm_90a")
    fx = runtime.compile_kernel(streamk.fixup_program(N, K, P=P, block_M=v["block_M"], block_N=v["block_N"],
                                                      block_K=v["block_K"], out_dtype=dt), arch="sm_90a")
    return sk, fx


def build_rule(N, K, dt, M):
    c = rule.choose(M, N, K, dt, "sm_90a")
    return gk.build_for(N, K, c.config, c.split, dt, c.last_rows, c.a_rows, "sm_90a")


def precompile_job(job):
    if job[0] == "rule":
        build_rule(*job[1:])
    else:
        build(*job)


def jobs():
    out = []
    for (M, N, K, dt) in SHAPES:
        out.append(("rule", N, K, dt, M))
        out += [(N, K, dt, name) for name in VARIANTS]
        v = VARIANTS["sk_tuned_reg"]
        if not ALL:
            out.append((N, K, dt, "sk_tuned_reg", -(-M // v["block_M"]) * -(-N // v["block_N"])))
    return out


if __name__ == "__main__":
    t0 = time.time()
    got = runtime.precompile(jobs(), "m_streamk:precompile_job")
    bad = {j: str(e).splitlines()[-1][:200] for j, e in got.items() if e is not None}
    print(f"precompiled {len(got) - len(bad)} of {len(got)} in {time.time() - t0:.0f} s", bad, flush=True)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    for (M, N, K, dt) in SHAPES:
        tdt = getattr(torch, dt)
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        ref = gk.gemm_relu_reference(a, b)
        ct = torch.empty((M, N), dtype=tdt, device="cuda")
        tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=40, return_mode="median") * 1e3
        c = checks.poisoned((M, N), tdt, "cuda")
        op = lambda: gk.gemm_relu(a, b, out=c)
        op(); torch.cuda.synchronize()
        ok = checks.compare(c, ref, tolerance=checks.TOLERANCE[dt]).ok
        rows = [(do_bench(op, warmup=5, rep=40, return_mode="median") * 1e3, "rule " + rule.choose(M, N, K, dt, "sm_90a").label, ok)]
        for name in VARIANTS:
            if (N, K, dt, name) in bad:
                continue
            sk, fx = (runtime.launcher(k) for k in build(N, K, dt, name))
            v = VARIANTS[name]
            ws = torch.empty((P, 2, v["block_M"], v["block_N"]), dtype=torch.float32, device="cuda")
            c = checks.poisoned((M, N), tdt, "cuda")
            fn = lambda: (sk(a, b, c, ws), fx(ws, c))
            fn(); torch.cuda.synchronize()
            cmp = checks.compare(c, ref, tolerance=checks.TOLERANCE[dt])
            # the pair, then the stream-K kernel alone (the difference is the fixup)
            us = do_bench(fn, warmup=5, rep=40, return_mode="median") * 1e3
            us_sk = do_bench(lambda: sk(a, b, c, ws), warmup=5, rep=40, return_mode="median") * 1e3
            rows.append((us, f"{name} (stream-K kernel alone {us_sk:.1f})", cmp.ok))
        nt = -(-M // 128) * -(-N // 256)
        if not ALL:
            sk, fx = (runtime.launcher(k) for k in build(N, K, dt, "sk_tuned_reg", nt))
            ws = torch.empty((nt, 2, 128, 256), dtype=torch.float32, device="cuda")
            c = checks.poisoned((M, N), tdt, "cuda")
            fn = lambda: sk(a, b, c, ws)
            fn(); torch.cuda.synchronize()
            cmp = checks.compare(c, ref, tolerance=checks.TOLERANCE[dt])
            rows.append((do_bench(fn, warmup=5, rep=40, return_mode="median") * 1e3, f"sk_tuned_reg P={nt} (one whole tile per CTA, no fixup)", cmp.ok))
        tiles = {n: -(-M // v["block_M"]) * -(-N // v["block_N"]) for n, v in VARIANTS.items()}
        print(f"\n== {M}x{N}x{K} {dt}: torch {tt:.1f} us; tiles {tiles}", flush=True)
        for us, name, ok in sorted(rows):
            print(f"   {name:<52} {us:7.1f} us {tt / us:5.2f}x {'ok' if ok else 'WRONG'}", flush=True)
        del a, b, ref, ct, c
    print(f"total {time.time() - t0:.0f} s")
