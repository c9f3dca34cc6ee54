"""GPU experiment: why the short box lost at 14 x 5432 x 656 -- the rule's tile at M = 14, N = 5432,
with A's boxes 16 rows tall (short) and 64 rows (filled), over K = 656 ... 5248 and at two more M."""
import sys, time, dataclasses
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gk, rule, last_rows

N = 5432
CASES = [(M, K, dt) for M in (14, 40) for K in (656, 1312, 2624, 5248) for dt in ("float16",)] + [(14, 656, "bfloat16"), (3, 656, "float16")]


def kinds(M, K, dt):
    c = rule.choose(M, N, K, dt, "sm_90a")
    out = {"rule (" + c.label + ")": c}
    out["filled"] = dataclasses.replace(c, last_rows="filled", a_rows=0)
    return out


def build(M, K, dt, name):
    c = kinds(M, K, dt)[name]
    return gk.build_for(N, K, c.config, c.split, dt, c.last_rows, c.a_rows, "sm_90a")


def job(j):
    build(*j)


if __name__ == "__main__":
    t0 = time.time()
    jobs = [(M, K, dt, name) for (M, K, dt) in CASES for name in kinds(M, K, dt)]
    got = runtime.precompile(jobs, "m_short_k:job")
    print(f"precompiled {sum(e is None for e in got.values())} of {len(got)} in {time.time() - t0:.0f} s",
          {j: str(e)[:200] for j, e in got.items() if e is not None}, flush=True)
    import torch
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), flush=True)
    for (M, K, dt) in CASES:
        tdt = getattr(torch, dt)
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        ref = gk.gemm_relu_reference(a, b)
        ct = torch.empty((M, N), dtype=tdt, device="cuda")
        tt = do_bench(lambda: torch.relu_(torch.matmul(a, b, out=ct)), warmup=5, rep=40, return_mode="median") * 1e3
        line = []
        for name, c in kinds(M, K, dt).items():
            ks = [runtime.launcher(k) for k in build(M, K, dt, name)]
            out = checks.poisoned((M, N), tdt, "cuda")
            if c.split > 1:
                ws = torch.empty((c.split, M, N), dtype=torch.float32, device="cuda")
                fn = lambda: (ks[0](a, b, ws), ks[1](ws, out))
            else:
                fn = lambda: ks[0](a, b, out)
            fn(); torch.cuda.synchronize()
            ok = checks.compare(out, ref, tolerance=checks.TOLERANCE[dt]).ok
            us = do_bench(fn, warmup=5, rep=40, return_mode="median") * 1e3
            line.append(f"{name} {us:6.2f} us {'ok' if ok else 'WRONG'}")
        print(f"{M:>3} x {N} x {K:<5} {dt:<9} torch {tt:6.2f} us | " + " | ".join(line), flush=True)
    print(f"total {time.time() - t0:.0f} s")
