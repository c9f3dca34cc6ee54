"""Sweep ``gemm_small_m``: the small-M candidates of the GEMM + ReLU on the GPU, against torch.

    python -m tilelang_tutorial sweep gemm_small_m [--budget SECONDS]

For M in {1, 8, 16, 32, 64, 128} on LLM widths ((N, K) in {4096 x 4096, 8192 x 2048, 2048 x 8192,
8192 x 8192}) plus a fixed set of random shapes, every candidate (a tile, and a split of K) is
built as the dynamic-M kernel(s) the op would run, checked once on a poisoned output against the
fp32 reference, and timed two ways next to torch ``relu(a @ b)`` measured in the same process:

* ``kern``: ``triton.testing.do_bench`` median, L2 flushed before each call (the GPU's time);
* ``call``: CUDA events around back-to-back calls of the compiled kernel(s) (host time counted,
  L2 warm: what calling it in a loop costs).

Nothing is recorded (a sweep explores; the suite ``gemm`` records what the rule picks).
"""
from __future__ import annotations

import argparse
import math
import random
import time

from ... import checks, runtime, timing
from .configs import GemmConfig

C = GemmConfig

#: candidate name -> (config, split). block_M = 64 is the smallest wgmma tile; narrow block_N
#: gives more blocks (N / block_N) to stream B with when M x N is small; a split of K more still.
CANDIDATES = {
    "m64n32k128s6": (C(64, 32, 128, 6, 128, "Square", 0, "column"), 1),
    "m64n32k64s8": (C(64, 32, 64, 8, 128, "Square", 0, "column"), 1),
    "m64n32k256s4": (C(64, 32, 256, 4, 128, "Square", 0, "column"), 1),
    "m64n16k256s5": (C(64, 16, 256, 5, 128, "Square", 0, "column"), 1),
    "m64n32k128s4": (C(64, 32, 128, 4, 128, "Square", 0, "column"), 1),
    "m64n64k128s4": (C(64, 64, 128, 4, 128, "Square", 0, "column"), 1),
    "m64n64k64s8": (C(64, 64, 64, 8, 128, "Square", 0, "column"), 1),
    "m64n128k64s4": (C(64, 128, 64, 4, 128, "Square", 4, "column"), 1),
    "m128n64k64s6": (C(128, 64, 64, 6, 128, "Square", 0, "column"), 1),
    "m128n32k64s8": (C(128, 32, 64, 8, 128, "Square", 0, "column"), 1),
    "m128n128k64s4": (C(128, 128, 64, 4, 128, "Square", 4, "column"), 1),
    "seed": (C(128, 128, 64, 3, 128, "Square", 4, "column"), 1),
    "tuned": (C(128, 256, 64, 4, 256, "FullRow", 8, "row", True), 1),
    "m256n128": (C(256, 128, 64, 3, 256, "FullRow", 8, "row", True), 1),
    "m128n128k128t256": (C(128, 128, 128, 3, 256, "Square", 8, "row"), 1),
    "m64n32k128s6/k2": (C(64, 32, 128, 6, 128, "Square", 0, "column"), 2),
    "m64n64k128s4/k2": (C(64, 64, 128, 4, 128, "Square", 0, "column"), 2),
    "m64n64k128s4/k4": (C(64, 64, 128, 4, 128, "Square", 0, "column"), 4),
    "m64n128k64s4/k2": (C(64, 128, 64, 4, 128, "Square", 0, "column"), 2),
    "m64n128k64s4/k4": (C(64, 128, 64, 4, 128, "Square", 0, "column"), 4),
}
#: GEMV candidates (CUDA cores, one launch) for M <= max_m: name -> knobs of gemv.gemv_relu_program
GEMV_CANDIDATES = {
    "gemv8": (("max_m", 8), ("block_N", 32), ("k_lanes", 64), ("unroll", 4)),
    "gemv8u8k32": (("max_m", 8), ("block_N", 32), ("k_lanes", 32), ("unroll", 8)),
    "gemv8n16": (("max_m", 8), ("block_N", 16), ("k_lanes", 64), ("unroll", 4)),
    "gemv1u8": (("max_m", 1), ("block_N", 32), ("k_lanes", 64), ("unroll", 8)),
}

#: for M > 128 only these (the small-M tiles would only be slower there)
LARGE_M = ("tuned", "m256n128", "m128n128k128t256", "m128n128k64s4", "m64n128k64s4", "m64n64k128s4",
           "m128n64k64s6")
#: the random shapes with M <= 128 try these (fewer kernels to compile per shape)
RANDOM_SMALL_M = ("m64n32k128s6", "m64n32k128s4", "m64n64k128s4", "m64n128k64s4", "m128n64k64s6",
                  "m64n64k128s4/k2")

MS = (1, 8, 16, 32, 64, 128)
WIDTHS = ((4096, 4096), (8192, 2048), (2048, 8192), (8192, 8192))
DTYPE = "float16"


def random_shapes(n: int = 10, seed: int = 20261201) -> list[tuple]:
    """LLM-like random shapes for this sweep (a fixed seed, so the CPU can compile them ahead):
    half with M log-uniform in 1..128, half in 1..8192; N and K multiples of 8 in 512..8192."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        top = 7 if i % 2 == 0 else 13
        M = max(1, int(round(2 ** rng.uniform(0, top))))
        out.append((M, 8 * rng.randint(64, 1024), 8 * rng.randint(64, 1024)))
    return out


#: what one run sweeps (``sweep``'s options change it for that run: another dtype, other rows or
#: widths, no random shapes, a subset of the candidates)
PLAN = {"dtype": DTYPE, "ms": MS, "widths": WIDTHS, "random": True, "only": None}


def shapes() -> list[tuple]:
    return ([(M, N, K) for (N, K) in PLAN["widths"] for M in PLAN["ms"]]
            + (random_shapes() if PLAN["random"] else []))


def candidates_for(M: int, N: int, K: int) -> list[str]:
    names = LARGE_M if M > 128 else tuple(CANDIDATES) if (N, K) in PLAN["widths"] else RANDOM_SMALL_M
    if PLAN["only"]:
        names = [n for n in names if n in PLAN["only"]]
    out = []
    for name in names:
        cfg, split = CANDIDATES[name]
        k_steps = math.ceil(K / cfg.block_K)
        if split > 1 and k_steps < 2 * split:
            continue
        if (N % 8 or K % 8) and (cfg.threads > 128 or cfg.block_N > 128 or cfg.block_M > 128):
            continue
        out.append(name)
    if N % 8 == 0 and K % 8 == 0:
        out += [name for name, knobs in GEMV_CANDIDATES.items()
                if M <= dict(knobs)["max_m"] and (not PLAN["only"] or name in PLAN["only"])]
    return out


def jobs() -> list[tuple]:
    """``(N, K, config, split, dtype)`` for every kernel the sweep builds (what the CPU can compile
    ahead into the kernel cache: ``bench._precompile_job`` takes these)."""
    out = []
    for (M, N, K) in shapes():
        for name in candidates_for(M, N, K):
            if name in GEMV_CANDIDATES:
                out.append(("gemv", N, K, GEMV_CANDIDATES[name], PLAN["dtype"]))
                continue
            cfg, split = CANDIDATES[name]
            out.append((N, K, cfg, split, PLAN["dtype"]))
    return list(dict.fromkeys(out))


def _precompile_job(job):
    if job[0] == "gemv":
        from . import gemv

        gemv.build_gemv_relu(job[1], job[2], job[3], job[4])
        return
    from .bench import _precompile_job as gemm_job

    gemm_job(job)


def precompile(workers=None):
    """Fill the kernel cache with every kernel of the sweep (on any machine with nvcc)."""
    got = runtime.precompile(jobs(), "tilelang_tutorial.lessons.gemm.small_m_sweep:_precompile_job", workers=workers)
    bad = {j: e for j, e in got.items() if e is not None}
    for j, e in bad.items():
        print(f"compile FAILED {j[:-1]}: {type(e).__name__}: {str(e)[:200]}")
    print(f"precompiled {len(got) - len(bad)}/{len(got)}")
    return got


def _callable(N, K, cfg, split, a, b, c):
    """The compiled kernel(s) for this candidate, as one no-argument call on (a, b) into c
    (``cfg`` a GEMV candidate's knobs when ``split`` is "gemv")."""
    import torch

    from . import gemv, kernel, split_k

    if split == "gemv":
        compiled = runtime.launcher(gemv.build_gemv_relu(N, K, cfg, PLAN["dtype"]))
        return lambda: compiled(a, b, c)
    if split > 1:
        partial, reduce = (runtime.launcher(k) for k in split_k.build_split_k(N, K, split, cfg, PLAN["dtype"]))
        workspace = torch.empty((split, a.shape[0], N), dtype=torch.float32, device=a.device)

        def call():
            partial(a, b, workspace)
            reduce(workspace, c)
        return call
    compiled = runtime.launcher(kernel.build_gemm_relu(N, K, config=cfg, dtype=PLAN["dtype"]))
    return lambda: compiled(a, b, c)


def _times(fn):
    """(do_bench median with L2 flushed, back-to-back per call with host time) in microseconds."""
    from triton.testing import do_bench

    fn()
    kern = do_bench(fn, warmup=5, rep=25, return_mode="median") * 1e3
    calls = timing._loop_calls(fn, target_ms=8.0, cap=400)
    call = timing._event_loop_ms(fn, calls, repeats=3) * 1e3
    return kern, call


def _issue_us(fn, calls=200):
    """Host time to issue one call (perf_counter around a loop of calls, no synchronize inside)."""
    import torch

    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return t


HOST_POINTS = ((1, 4096, 4096), (64, 4096, 4096))


def host_section(points=HOST_POINTS):
    """The op's own cost: gemm_relu(a, b, out=c) against the compiled kernel(s) it runs, called
    directly; host issue time per call and back-to-back time per call (events, host included)."""
    import torch

    from . import kernel, rule

    tdt = getattr(torch, PLAN["dtype"])
    print("host cost of the op (issue: host time per call, no sync; b2b: events around back-to-back calls)")
    for (M, N, K) in points:
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        c, c_bare = checks.poisoned((M, N), tdt, "cuda"), checks.poisoned((M, N), tdt, "cuda")
        choice = rule.choose(M, N, K, PLAN["dtype"])
        bare = _callable(N, K, choice.config, choice.split, a, b, c_bare)
        kernel.gemm_relu(a, b, out=c)
        bare()
        torch.cuda.synchronize()
        ref = kernel.gemm_relu_reference(a, b)
        oks = [checks.compare(x, ref, tolerance=checks.TOLERANCE[PLAN["dtype"]]).ok for x in (c, c_bare)]
        cfg = choice.config
        fns = {"bare": bare, "op": lambda: kernel.gemm_relu(a, b, out=c),
               "op(config)": lambda: kernel.gemm_relu(a, b, cfg, out=c),
               "op(new out)": lambda: kernel.gemm_relu(a, b),
               "torch": lambda: torch.relu(a @ b)}
        cells = []
        for name, fn in fns.items():
            issue = min(_issue_us(fn) for _ in range(3))
            b2b = timing._event_loop_ms(fn, 200, repeats=3) * 1e3
            cells.append(f"{name} {issue:.1f}/{b2b:.1f}")
        print(f"  {M}x{N}x{K} ({choice.name}, split {choice.split}; checks {oks}) issue/b2b us: " + ", ".join(cells),
              flush=True)


def sweep(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sweep gemm_small_m")
    parser.add_argument("--budget", type=float, default=100.0, help="stop measuring after this many seconds")
    parser.add_argument("--precompile-only", action="store_true", help="fill the kernel cache and stop")
    parser.add_argument("--dtype", choices=("float16", "bfloat16"), default=DTYPE)
    parser.add_argument("--ms", help="rows to sweep on the LLM widths, e.g. 31,52,93 (default: %s)"
                        % ",".join(map(str, MS)))
    parser.add_argument("--widths", help="N x K pairs, e.g. 4096x4096,8192x8192 (default: the four LLM widths)")
    parser.add_argument("--no-random", action="store_true", help="leave out the random shapes")
    parser.add_argument("--no-host", action="store_true", help="leave out the op's host-cost section")
    parser.add_argument("--only", help="comma-separated candidate names (default: all)")
    args = parser.parse_args(argv or [])
    default = dict(PLAN)
    PLAN.update(dtype=args.dtype, random=not args.no_random,
                ms=tuple(int(m) for m in args.ms.split(",")) if args.ms else MS,
                widths=tuple(tuple(int(v) for v in w.split("x")) for w in args.widths.split(",")) if args.widths
                else WIDTHS,
                only=tuple(args.only.split(",")) if args.only else None)
    try:
        return _sweep(args)
    finally:
        PLAN.update(default)          # this run's options end with it


def _sweep(args) -> int:
    import torch

    from . import kernel, rule

    if args.precompile_only:
        precompile()
        return 0
    try:
        runtime.require_gpu("the gemm_small_m sweep")
    except runtime.NoGPUError as exc:
        print(str(exc).split(". ")[0] + " (nothing measured)")
        return 2
    t0 = time.time()
    precompile()
    print(f"[{time.time() - t0:.0f} s] kernels ready; {torch.cuda.get_device_name()}", flush=True)
    try:
        if not args.no_host:
            host_section()
    except Exception as exc:
        print(f"host section FAILED: {type(exc).__name__}: {exc}", flush=True)
    print(f"[{time.time() - t0:.0f} s] host section done", flush=True)
    tdt = getattr(torch, PLAN["dtype"])
    best_rows = []
    for (M, N, K) in shapes():
        if time.time() - t0 > args.budget:
            print(f"budget of {args.budget:.0f} s spent: stopping before {M}x{N}x{K}", flush=True)
            break
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        ref = kernel.gemm_relu_reference(a, b)
        ct = torch.empty((M, N), dtype=tdt, device="cuda")
        tk, tc = _times(lambda: torch.relu_(torch.matmul(a, b, out=ct)))
        floor = (M * K + K * N + M * N) * 2 / 4.2e12 * 1e6
        picked = rule.choose(M, N, K, PLAN["dtype"]).label
        print(f"\n== {M}x{N}x{K} {'fp16' if PLAN['dtype'] == 'float16' else 'bf16'}: torch relu(a@b) kern {tk:.1f} us, call {tc:.1f} us; "
              f"bytes floor at 4.2 TB/s {floor:.1f} us; the rule picks {picked}", flush=True)
        rows = []
        for name in candidates_for(M, N, K):
            cfg, split = (GEMV_CANDIDATES[name], "gemv") if name in GEMV_CANDIDATES else CANDIDATES[name]
            c = checks.poisoned((M, N), tdt, "cuda")
            try:
                fn = _callable(N, K, cfg, split, a, b, c)
                fn()
                torch.cuda.synchronize()
                cmp = checks.compare(c, ref, tolerance=checks.TOLERANCE[PLAN["dtype"]])
                kern, call = _times(fn)
            except Exception as exc:                      # a tile this GPU refuses: say so, go on
                print(f"  {name:<18} FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", flush=True)
                torch.cuda.synchronize()
                continue
            rows.append((name, kern, call, cmp.ok))
            print(f"  {name:<18} kern {kern:7.1f} us {tk / kern:5.2f}x   call {call:7.1f} us {tc / call:5.2f}x  "
                  f"{'ok' if cmp.ok else 'WRONG ' + str(cmp)}", flush=True)
        good = [r for r in rows if r[3]]
        if good:
            bk = min(good, key=lambda r: r[1])
            bc = min(good, key=lambda r: r[2])
            best_rows.append((M, N, K, tk, tc, bk, bc))
        del a, b, ref, ct
    print("\nbest per shape (kern: do_bench, L2 flushed; call: back-to-back with host time)")
    print(f"{'M x N x K':<18} {'torch k':>8} {'best kern':<18} {'us':>7} {'x':>5}   {'torch c':>8} {'best call':<18} "
          f"{'us':>7} {'x':>5}")
    for M, N, K, tk, tc, bk, bc in best_rows:
        print(f"{f'{M}x{N}x{K}':<18} {tk:8.1f} {bk[0]:<18} {bk[1]:7.1f} {tk / bk[1]:5.2f}   {tc:8.1f} {bc[0]:<18} "
              f"{bc[2]:7.1f} {tc / bc[2]:5.2f}")
    print(f"total {time.time() - t0:.0f} s")
    return 0
