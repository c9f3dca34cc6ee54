"""Goal 1's last misses (the RMSNorm drop-in 3.05-3.29 us above the bare kernel call at five points
of `rmsnorm_host`), probed on the H200: what each layer of the call costs there. Nothing here is
recorded and the package is not changed: the variants are copies of the op's cached path
(`kernel._call` on a hit, GPU mode, `out` given, x 2-D) with one piece taken out at a time.

  bare         compiled(x, gamma, y, eps)                       (what rmsnorm_host calls bare)
  op           kernel.rmsnorm_silu(x, gamma, eps, out=y)
  drop-in      dispatch.fused_rmsnorm_silu(x, gamma, eps, out=y)  (what rmsnorm_host calls the op)
  hit          the op's hit path, copied: mode(), key, lookup, out-is-x check, launch
  hit-no-mode  the same without runtime.mode() (the mode taken once, outside)
  hit-min      key, lookup, launch (no mode, no out-is-x check)
  route+hit    a width -> path dict in front of `hit` (the dispatch's layer, one lookup)

Timed as rmsnorm_host times (host_cost.timed_calls: CUDA events around back-to-back calls checked
by the wall clock, 5 interleaved rounds, the order reversed every other round); printed per point
as each variant's median and its paired difference to `bare` (host_cost.paired_difference).

    python3 host_probe.py
"""
import time

import torch

from tilelang_tutorial import checks, host_cost, runtime
from tilelang_tutorial.lessons.rmsnorm import dispatch, kernel

POINTS = [(2048, 96), (16384, 96), (1, 160), (2048, 160), (1, 320), (2048, 640)]
EPS = 1e-5


def main():
    t0 = time.time()
    print(runtime.describe_mode(), flush=True)
    for M, C in POINTS:
        x = checks.random_tensor((M, C), torch.float16, "cuda")
        gamma = checks.random_tensor((C,), torch.float16, "cuda")
        y = checks.poisoned((M, C), torch.float16, "cuda")
        compiled = kernel.build_rmsnorm_silu(C, "float16")
        dispatch.fused_rmsnorm_silu(x, gamma, EPS, out=y)       # fills the op's call cache
        torch.cuda.synchronize()
        ok = checks.compare(y, kernel.rmsnorm_silu_reference(x, gamma, EPS), tolerance=checks.TOLERANCE["float16"])
        calls, m = kernel._CALLS, runtime.mode()
        key = (x.shape, x.dtype, False)
        assert calls[key][3] == "direct" and calls[key][4], calls[key]

        def hit(x=x, gamma=gamma, eps=EPS, out=y):
            mm = runtime.mode()
            h = calls.get((x.shape, x.dtype, out is None))
            if h is None or h[0] is not mm:
                raise RuntimeError("miss")
            if out is not None and out.data_ptr() == x.data_ptr():
                raise ValueError("in place")
            h[1](x, gamma, out, float(eps))
            return out

        def hit_no_mode(x=x, gamma=gamma, eps=EPS, out=y):
            h = calls.get((x.shape, x.dtype, out is None))
            if h is None or h[0] is not m:
                raise RuntimeError("miss")
            if out is not None and out.data_ptr() == x.data_ptr():
                raise ValueError("in place")
            h[1](x, gamma, out, float(eps))
            return out

        def hit_min(x=x, gamma=gamma, eps=EPS, out=y):
            calls[(x.shape, x.dtype, False)][1](x, gamma, out, float(eps))
            return out

        routes = {C: hit}

        def route_hit(x=x, gamma=gamma, eps=EPS, out=y):
            return routes[x.shape[-1]](x, gamma, eps, out)

        variants = {
            "bare": lambda: compiled(x, gamma, y, EPS),
            "op": lambda: kernel.rmsnorm_silu(x, gamma, EPS, out=y),
            "drop-in": lambda: dispatch.fused_rmsnorm_silu(x, gamma, EPS, out=y),
            "hit": lambda: hit(),
            "hit-no-mode": lambda: hit_no_mode(),
            "hit-min": lambda: hit_min(),
            "route+hit": lambda: route_hit(),
        }
        timed, failed, rounds = host_cost.timed_calls(variants)
        parts = []
        for name in variants:
            if name not in timed:
                parts.append(f"{name} not timed ({failed.get(name)})")
                continue
            diff = host_cost.paired_difference(rounds[name], rounds["bare"]) if name != "bare" else None
            parts.append(f"{name} {timed[name].ms * 1e3:.2f}" + ("" if diff is None else f" ({diff:+.2f})"))
        print(f"M={M:>5} C={C:>4} [{'ok' if ok.ok else 'WRONG'}]: " + ", ".join(parts), flush=True)
    print(f"host_probe: {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
