"""Notebook 02's GEMM + ReLU on the GPU: suites ``gemm`` (seed and tuned on the squares and a
ragged shape), ``gemm_rule`` (the op through its rule on random shapes drawn afresh each run and on
small M) and ``gemm_sweep`` (the tuning grid).

    python -m tilelang_tutorial bench gemm gemm_rule      # measure and record (on a GPU)
    python -m tilelang_tutorial bench gemm_sweep

Every figure is measured here, in the same process: the TileLang kernel (the dynamic-M kernel that
``gemm_relu`` ships), torch ``relu(a @ b)`` (the unfused thing a user writes: cuBLAS, then a
separate ReLU pass over C) and cuBLAS ``a @ b`` alone (the ceiling: the fused kernel does the same
matmul and no extra pass, so matching cuBLAS is the goal). Fresh random inputs, medians from
``timing.median_ms``.
"""
from __future__ import annotations

import dataclasses
import functools
import os

from ... import checks, results, runtime, timing
from . import kernel as gr
from . import op

COMMAND = "python -m tilelang_tutorial bench gemm"
SIZES = (2048, 4096, 8192)
#: A ragged problem: M odd, N not a multiple of 128/256, K not a multiple of 64 (N, K multiples of
#: 8 keep TMA usable, see the kernel module).
RAGGED = (3001, 5000, 4040)
DTYPES = ("float16", "bfloat16")

C = gr.GemmConfig


def _sweep_grid() -> list:
    """~20 configurations around the seed and the Hopper reasoning in the kernel module."""
    seed = gr.SEED_CONFIG
    wide = C(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, policy="FullRow",
             swizzle_panel=8, swizzle_order="row")
    grid = [
        seed,
        seed.replace(swizzle_panel=8, swizzle_order="row"),
        seed.replace(num_stages=4),
        seed.replace(threads=256),
        seed.replace(threads=256, num_stages=4),
        seed.replace(block_N=256),                       # the seed post's 128-thread 128x256 (spills)
        wide,
        wide.replace(num_stages=4),
        wide.replace(num_stages=2),
        wide.replace(policy="Square"),
        wide.replace(policy="Square", num_stages=4),
        wide.replace(swizzle_panel=0),
        wide.replace(swizzle_panel=4),
        wide.replace(swizzle_panel=16),
        wide.replace(swizzle_panel=8, swizzle_order="column"),
        wide.replace(store_via_shared=True),
        wide.replace(store_via_shared=True, num_stages=2),
        wide.replace(block_K=128, num_stages=2),
        C(block_M=256, block_N=128, block_K=64, num_stages=3, threads=256, policy="FullRow",
          swizzle_panel=8, swizzle_order="row"),
        C(block_M=256, block_N=128, block_K=64, num_stages=4, threads=256, policy="FullRow",
          swizzle_panel=8, swizzle_order="row"),
        C(block_M=128, block_N=128, block_K=128, num_stages=3, threads=256, policy="Square",
          swizzle_panel=8, swizzle_order="row"),
        C(block_M=256, block_N=128, block_K=64, num_stages=3, threads=384, policy="FullRow",
          swizzle_panel=8, swizzle_order="row"),
        # Second round, around the first round's winner (C staged through shared memory):
        wide.replace(store_via_shared=True, num_stages=4),   # 256 KiB of shared memory: too much
        wide.replace(store_via_shared=True, policy="Square"),
        wide.replace(store_via_shared=True, swizzle_panel=4),
        wide.replace(store_via_shared=True, swizzle_panel=16),
        wide.replace(store_via_shared=True, block_K=32, num_stages=6),
        C(block_M=256, block_N=128, block_K=64, num_stages=3, threads=256, policy="FullRow",
          swizzle_panel=8, swizzle_order="row", store_via_shared=True),
    ]
    out = []
    for cfg in grid:  # keep order, drop duplicates (the tuned config may equal a grid entry)
        if cfg not in out:
            out.append(cfg)
    for cfg in gr.TUNED_CONFIGS.values():
        if cfg not in out:
            out.append(cfg)
    return out


SWEEP_CONFIGS = _sweep_grid()


def tflops(M, N, K, ms) -> float:
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def _precompile_job(job):
    """Worker-process entry (fills TileLang's disk cache): a plain ``(N, K, config, dtype)`` job or
    a rule job ``(N, K, config, split, dtype[, last_rows, a_rows])``."""
    from . import gemv

    if job[0] == "gemv":
        gemv.build_gemv_relu(*job[1:])
        return
    if len(job) in (5, 7):
        N, K, cfg, split, dtype, rows, a_rows = job if len(job) == 7 else job + ("filled", 0)
        op.build_for(N, K, cfg, split, dtype, rows, a_rows)
        return
    N, K, cfg, dtype = job
    gr.build_gemm_relu(N, K, config=cfg, dtype=dtype)


def compile_many(jobs, *, arch=None, workers=None, verbose=True):
    """Compile ``[(N, K, config, dtype), ...]`` (in worker processes first: TileLang's lowering
    holds the GIL); returns {job: kernel or the exception}."""
    def build(job):
        N, K, cfg, dtype = job
        return gr.build_gemm_relu(N, K, config=cfg, dtype=dtype, arch=arch)

    if arch is None and len(jobs) > 2:
        runtime.precompile(jobs, f"{__name__}:_precompile_job", workers=workers)
    return runtime.compile_parallel(jobs, build, workers=workers, verbose=verbose,
                                    describe=lambda j: f"{j[2].name} N={j[0]} K={j[1]} {j[3]}")


def _inputs(M, N, K, dtype):
    import torch

    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, "cuda")
    b = checks.random_tensor((K, N), tdt, "cuda")
    return a, b


def _check(kernel, a, b, dtype):
    """Poisoned output, one launch, relative error against the fp32 reference."""
    import torch

    c = checks.poisoned((a.shape[0], b.shape[1]), a.dtype, "cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    return checks.compare(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype])


def _peers(a, b):
    """torch relu(a @ b) and cuBLAS a @ b, measured now on the same inputs (Timing, Timing)."""
    import torch

    return timing.measure(lambda: torch.relu(a @ b)), timing.measure(lambda: a @ b)


def sweep(sizes=(4096, 8192), dtypes=("float16",), configs=None, *, workers=None, arch=None) -> list[dict]:
    """Time every config at M=N=K=size; print a table per (size, dtype); return the rows (suite
    ``gemm_sweep`` records them). Configs that fail to compile or launch are reported and kept as
    rows with an ``error``."""
    import torch

    runtime.require_gpu("the GEMM sweep")
    configs = list(configs or SWEEP_CONFIGS)
    jobs = [(n, n, cfg, dt) for n in sizes for dt in dtypes for cfg in configs]
    print(f"sweep: {len(configs)} configs x {len(sizes)} sizes x {len(dtypes)} dtypes", flush=True)
    kernels = compile_many(jobs, arch=arch, workers=workers)
    rows = []
    for n in sizes:
        for dt in dtypes:
            a, b = _inputs(n, n, n, dt)
            c = torch.empty((n, n), dtype=a.dtype, device="cuda")
            torch_t, cublas_t = _peers(a, b)
            torch_ms, cublas_ms = torch_t.ms, cublas_t.ms
            print(f"\n== M=N=K={n} {dt}: torch relu(a@b) {tflops(n, n, n, torch_ms):.0f} TFLOP/s, "
                  f"cuBLAS a@b {tflops(n, n, n, cublas_ms):.0f} TFLOP/s", flush=True)
            print(f"{'config':<46} {'ms':>8} {'TFLOP/s':>8} {'/torch':>7} {'/cuBLAS':>8}  check")
            for cfg in configs:
                k = kernels[(n, n, cfg, dt)]
                row = {"config": cfg.as_dict(), "name": cfg.name, "M": n, "N": n, "K": n, "dtype": dt,
                       "torch_relu_ms": torch_ms, "cublas_ms": cublas_ms}
                if isinstance(k, Exception):
                    row["error"] = f"compile: {type(k).__name__}: {str(k)[:300]}"
                    print(f"{cfg.name:<46} {'compile failed':>26}")
                    rows.append(row)
                    continue
                try:
                    cmp = _check(k, a, b, dt)
                    t = timing.measure(lambda: k(a, b, c))
                    ms = t.ms
                except Exception as exc:  # e.g. too much shared memory for this GPU, or timings disagree
                    row["error"] = f"launch: {type(exc).__name__}: {str(exc)[:300]}"
                    print(f"{cfg.name:<46} {'launch failed: ' + type(exc).__name__:>26}")
                    rows.append(row)
                    torch.cuda.synchronize()
                    continue
                row.update(ms=ms, timing=t.as_dict(), tflops=tflops(n, n, n, ms), ratio_to_torch=torch_ms / ms,
                           ratio_to_cublas=cublas_ms / ms, rel_error=cmp.rel_error, unwritten=cmp.unwritten,
                           ok=cmp.ok)
                rows.append(row)
                print(f"{cfg.name:<46} {ms:8.3f} {row['tflops']:8.0f} {row['ratio_to_torch']:7.2f} "
                      f"{row['ratio_to_cublas']:8.2f}  {'ok' if cmp.ok else 'WRONG ' + str(cmp)}", flush=True)
            del a, b, c
            torch.cuda.empty_cache()
    _print_best(rows)
    return rows


def run_sweep(quick: bool = False) -> results.Run:
    """Suite ``gemm_sweep``: :func:`sweep` over the grid at 4096^3 and 8192^3 (fp16), recorded."""
    prov = results.provenance("python -m tilelang_tutorial bench gemm_sweep" + (" --quick" if quick else ""))
    rows = sweep(sizes=(4096,) if quick else (4096, 8192))
    recs, failures = [], []
    for row in rows:
        M, N, K, dt = row["M"], row["N"], row["K"], row["dtype"]
        if "error" in row:
            failures.append({"config": row["config"], "shape": {"M": M, "N": N, "K": K}, "dtype": dt,
                             "error": row["error"]})
            continue
        flops = 2.0 * M * N * K
        recs.append(results.make_record(
            suite="gemm_sweep", kernel="gemm_relu", config=dict(row["config"]), shape={"M": M, "N": N, "K": K},
            dtype=dt, metric="throughput", value=row["tflops"], unit="TFLOP/s", latency_ms=row["ms"],
            timing=row["timing"], flops=flops,
            nbytes=2.0 * (M * K + K * N + M * N),
            reference={"name": "torch relu(a @ b)", "value": flops / (row["torch_relu_ms"] * 1e-3) / 1e12,
                       "unit": "TFLOP/s", "latency_ms": row["torch_relu_ms"]},
            ceiling={"name": "cuBLAS a @ b (torch, same size and dtype)",
                     "value": flops / (row["cublas_ms"] * 1e-3) / 1e12, "unit": "TFLOP/s",
                     "latency_ms": row["cublas_ms"]},
            correctness={"rel_error": row["rel_error"], "unwritten": row["unwritten"], "ok": row["ok"]}))
    return results.Run(recs, prov, notes={"failed_configs": failures})


def _print_best(rows):
    good = [r for r in rows if r.get("ok")]
    if not good:
        return
    print("\nbest correct config per (size, dtype):")
    for key in sorted({(r["M"], r["dtype"]) for r in good}):
        best = max((r for r in good if (r["M"], r["dtype"]) == key), key=lambda r: r["tflops"])
        print(f"  {key[0]} {key[1]}: {best['name']} {best['tflops']:.0f} TFLOP/s "
              f"({best['ratio_to_torch']:.2f}x torch relu(a@b), {best['ratio_to_cublas']:.2f}x cuBLAS)")
    names = {r["name"] for r in good}
    keys = {(r["M"], r["dtype"]) for r in good}
    # The config with the best worst-case ratio to torch over all sizes: a good TUNED_CONFIGS pick.
    scored = []
    for name in names:
        rs = [r for r in good if r["name"] == name]
        if len({(r["M"], r["dtype"]) for r in rs}) == len(keys):
            scored.append((min(r["ratio_to_torch"] for r in rs), name))
    if scored:
        worst, name = max(scored)
        print(f"  most robust over all sizes: {name} (worst ratio to torch {worst:.2f})")


# ---------------------------------------------------------------------------------------------
# The recorded benchmark
# ---------------------------------------------------------------------------------------------

def _problems(quick: bool):
    if quick:
        return [(4096, 4096, 4096)]
    return [(n, n, n) for n in SIZES] + [RAGGED]


def run(quick: bool = False) -> results.Run:
    """Seed and tuned configs, fp16 and bf16, at M=N=K in SIZES and a ragged problem; each record
    carries torch relu(a@b) as reference, cuBLAS a@b (same size, same dtype) as ceiling, and the
    correctness of a poisoned-output launch."""
    import torch

    runtime.require_gpu("the GEMM benchmark")
    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    ceil = timing.measure_ceilings()
    print(f"cuBLAS peak (torch a@b at {ceil.matmul_size}^3): " +
          ", ".join(f"{d} {v:.0f} TFLOP/s" for d, v in ceil.matmul_tflops.items()), flush=True)
    problems = _problems(quick)
    variants = {"seed": lambda dt: gr.SEED_CONFIG, "tuned": gr.tuned_config}
    jobs = sorted({(N, K, variants[v](dt), dt) for (_, N, K) in problems for dt in DTYPES for v in variants},
                  key=lambda j: (j[0], j[1], j[3], j[2].name))
    kernels = compile_many(jobs)
    out = []
    print(f"\n{'kernel':<18} {'M x N x K':<18} {'dtype':<9} {'TFLOP/s':>8} {'torch':>7} {'cuBLAS':>7} "
          f"{'/torch':>7} {'/cuBLAS':>8}  check")
    for (M, N, K) in problems:
        for dt in DTYPES:
            a, b = _inputs(M, N, K, dt)
            c = torch.empty((M, N), dtype=a.dtype, device="cuda")
            torch_t, cublas_t = _peers(a, b)
            torch_ms, cublas_ms = torch_t.ms, cublas_t.ms
            for variant, pick in variants.items():
                cfg = pick(dt)
                k = kernels[(N, K, cfg, dt)]
                if isinstance(k, Exception):
                    raise RuntimeError(f"{variant} config {cfg.name} does not compile for {N}x{K} {dt}") from k
                cmp = _check(k, a, b, dt)
                t = timing.measure(lambda: k(a, b, c))
                ms = t.ms
                value = tflops(M, N, K, ms)
                rec = results.make_record(
                    suite="gemm", kernel="gemm_relu",
                    config=dict(cfg.as_dict(), variant=variant),
                    shape={"M": M, "N": N, "K": K}, dtype=dt, metric="throughput", value=value,
                    unit="TFLOP/s", latency_ms=ms, timing=t, flops=2.0 * M * N * K,
                    nbytes=2.0 * (M * K + K * N + M * N),
                    reference={"name": "torch relu(a @ b)", "value": tflops(M, N, K, torch_ms),
                               "unit": "TFLOP/s", "latency_ms": torch_ms},
                    ceiling={"name": "cuBLAS a @ b (torch, same size and dtype)",
                             "value": tflops(M, N, K, cublas_ms), "unit": "TFLOP/s", "latency_ms": cublas_ms},
                    peers={"cublas_peak": {"value": ceil.matmul_tflops.get(dt), "unit": "TFLOP/s",
                                           "size": ceil.matmul_size}},
                    correctness={"rel_error": cmp.rel_error, "max_abs_error": cmp.max_abs_error,
                                 "unwritten": cmp.unwritten, "tolerance": cmp.tolerance, "ok": cmp.ok,
                                 "reference": "fp32 torch relu(a.float() @ b.float())"},
                )
                out.append(rec)
                print(f"{variant:<18} {f'{M}x{N}x{K}':<18} {dt:<9} {value:8.0f} "
                      f"{rec['reference']['value']:7.0f} {rec['ceiling']['value']:7.0f} "
                      f"{rec['ratio_to_reference']:7.2f} {rec['ratio_to_ceiling']:8.2f}  "
                      f"{'ok' if cmp.ok else 'WRONG'} ({cmp.rel_error:.1e})", flush=True)
            del a, b, c
            torch.cuda.empty_cache()
    return results.Run(out, prov)


# ---------------------------------------------------------------------------------------------
# Any shape: the rule (rule.py) on a random set and a small-M set, through the op a user calls
# ---------------------------------------------------------------------------------------------

RULE_COMMAND = "python -m tilelang_tutorial bench gemm_rule"

#: LLM widths for the small-M set: (N, K) of a square projection, an up and a down projection, a
#: large square
SMALL_M_WIDTHS = ((4096, 4096), (8192, 2048), (2048, 8192), (8192, 8192))
SMALL_M_FIXED = (1, 16, 64, 80, 128)


def draw_seed() -> int:
    """A fresh seed for a benchmark run's random shapes (recorded with the run)."""
    return int.from_bytes(os.urandom(4), "little")


def random_shapes(n: int = 12, seed: int | None = None) -> list[tuple]:
    """``n`` shapes: M log-uniform in 1..8192, N and K multiples of 8 in 512..8192, fp16 and bf16
    alternating. ``seed=None`` draws a fresh seed: a benchmark run never measures a fixed list."""
    import random

    rng = random.Random(draw_seed() if seed is None else seed)
    out = []
    for i in range(n):
        M = max(1, min(8192, int(round(2 ** rng.uniform(0, 13)))))
        out.append((M, 8 * rng.randint(64, 1024), 8 * rng.randint(64, 1024), DTYPES[i % 2]))
    return out


def small_m_shapes(extra: int = 2, seed: int | None = None) -> list[tuple]:
    """M in 1, 16, 64, 80, 128 (fp16) and ``extra`` more M drawn afresh from 2..127 (bf16), each on every
    width of :data:`SMALL_M_WIDTHS` and on one more (N, K) drawn afresh: multiples of 64 in 2048..8192
    (the fixed widths alone never ask for N between 2048 and 4096)."""
    import random

    rng = random.Random(draw_seed() if seed is None else seed)
    pool = [m for m in range(2, 128) if m not in SMALL_M_FIXED]
    drawn = sorted(rng.sample(pool, extra))
    widths = list(SMALL_M_WIDTHS) + [(64 * rng.randint(32, 128), 64 * rng.randint(32, 128))]
    return ([(M, N, K, "float16") for M in SMALL_M_FIXED for (N, K) in widths]
            + [(M, N, K, "bfloat16") for M in drawn for (N, K) in widths])


GOALS = (
    {"name": "random shapes (M 1..8192, N, K 512..8192, drawn afresh each run): geometric mean vs torch relu(a @ b)",
     "min": 0.95, "unit": "x torch", "metric": "ratio_to_reference", "aggregate": "geomean",
     "where": {"shape.set": "random"}},
    {"name": "random shapes: every shape vs torch relu(a @ b)", "min": 0.80, "unit": "x torch",
     "metric": "ratio_to_reference", "where": {"shape.set": "random"}},
    {"name": "small M (1, 16, 64, 80, 128 and two M drawn from 2..127; (N, K) in 4096 x 4096, 8192 x 2048, 2048 x 8192, "
             "8192 x 8192 and one (N, K) drawn afresh, multiples of 64 in 2048..8192) vs torch relu(a @ b)", "min": 0.90,
     "unit": "x torch", "metric": "ratio_to_reference", "where": {"shape.set": "small M"}},
)


def _rule_jobs(shapes, arch):
    from . import rule

    return {(M, N, K, dt): rule.choose(M, N, K, dt, arch) for (M, N, K, dt) in shapes}


def prebuild_rule(choices, arch=None):
    """Compile every kernel the rule picked for these shapes, in parallel."""
    from . import gemv

    jobs = {("gemv", N, K, c.gemv, dt) if c.gemv else (N, K, c.config, c.split, dt, c.last_rows, c.a_rows)
            for (M, N, K, dt), c in choices.items()}
    # and the contrast beside each kernel of the last row of tiles (rule_records'): notebook 02's
    # kernel(s) on the same tile, or for the swapped kernel the rule's pick without the swap
    for (M, N, K, dt), c in choices.items():
        if c.last_rows != "filled":
            _, peer = contrast_choice(c, M, N, K, dt)
            jobs.add((N, K, peer.config, peer.split, dt, peer.last_rows, peer.a_rows))
    jobs = sorted(jobs, key=str)

    def build(job):
        if job[0] == "gemv":
            return gemv.build_gemv_relu(job[1], job[2], job[3], job[4], arch)
        N, K, cfg, split, dt, rows, a_rows = job
        return op.build_for(N, K, cfg, split, dt, rows, a_rows, arch)

    if arch is None:
        runtime.precompile(jobs, f"{__name__}:_precompile_job")
    built = runtime.compile_parallel(jobs, build, verbose=False)
    bad = {j: e for j, e in built.items() if isinstance(e, Exception)}
    if bad:
        (j, e), = list(bad.items())[:1]
        raise RuntimeError(f"{len(bad)} rule kernels failed to compile, e.g. {j}: {e}") from e


#: random shapes per gemm_rule run: M is log-uniform in 1..8192, and 24 draws put about six shapes
#: between 129 and 1536 rows, enough for the goal "none below 0.80x torch" to be judged on
RANDOM_COUNT = 24


def rule_sets(quick: bool = False, seed: int | None = None):
    """``([(set name, (M, N, K, dtype)), ...], seed)``: the random set and the small-M set, drawn
    from ``seed`` (fresh when None)."""
    seed = draw_seed() if seed is None else seed
    shapes = random_shapes(8 if quick else RANDOM_COUNT, seed=seed)
    small = small_m_shapes(1 if quick else 2, seed=seed + 1)
    if quick:
        small = [s for s in small if (s[1], s[2]) != (8192, 8192)]
    return [("random", s) for s in shapes] + [("small M", s) for s in small], seed


def rule_records(sets, skipped: list | None = None) -> list:
    """One record per shape: ``gemm_relu(a, b, out=c)`` as a user calls it (the rule picks the
    kernel) against torch ``relu(a @ b)``, both measured here, now, on the same inputs. A shape
    whose two timing methods disagree (for the op or for torch) is left out with the reason, in
    ``skipped``, rather than stopping the run."""
    import time

    import torch

    arch = runtime.current_arch()
    t0 = time.time()
    choices = _rule_jobs([s for _, s in sets], arch)
    prebuild_rule(choices)
    print(f"\nrule: compiled {len({(N, K, c.label) for (M, N, K, dt), c in choices.items()})} "
          f"kernels for {len(sets)} shapes in {time.time() - t0:.0f} s", flush=True)
    print(f"{'set':<8} {'M x N x K':<18} {'dtype':<9} {'choice':<30} {'us':>8} {'torch us':>8} "
          f"{'/torch':>7}  check")
    out = []
    for set_name, (M, N, K, dt) in sets:
        choice = choices[(M, N, K, dt)]
        a, b = _inputs(M, N, K, dt)
        c = checks.poisoned((M, N), a.dtype, "cuda")
        op.gemm_relu(a, b, out=c)
        torch.cuda.synchronize()
        cmp = checks.compare(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt])
        try:
            t = timing.measure(lambda: op.gemm_relu(a, b, out=c))
            torch_t = timing.measure(lambda: torch.relu(a @ b))
        except timing.TimingDisagreement as exc:
            print(f"{set_name:<8} {f'{M}x{N}x{K}':<18} {dt:<9} not recorded: {exc}", flush=True)
            if skipped is not None:
                skipped.append({"set": set_name, "shape": [M, N, K, dt], "reason": str(exc)})
            del a, b, c
            continue
        flops = 2.0 * M * N * K
        peers = {}
        if choice.last_rows != "filled":      # the contrast (contrast_choice)
            key, peer = _contrast_peer(a, b, choice, dt, M, N, K)
            if peer is not None:
                peers[key] = peer
        rec = results.make_record(
            suite="gemm_rule", kernel="gemm_relu", config=dict(choice.as_dict(), variant="rule", arch=arch),
            shape={"M": M, "N": N, "K": K, "set": set_name}, dtype=dt, metric="throughput",
            value=tflops(M, N, K, t.ms), unit="TFLOP/s", latency_ms=t.ms, timing=t, flops=flops,
            nbytes=2.0 * (M * K + K * N + M * N),
            reference={"name": "torch relu(a @ b)", "value": tflops(M, N, K, torch_t.ms), "unit": "TFLOP/s",
                       "latency_ms": torch_t.ms, "timing": torch_t.as_dict()},
            ceiling=None, peers=peers,
            correctness={"rel_error": cmp.rel_error, "unwritten": cmp.unwritten, "tolerance": cmp.tolerance,
                         "ok": cmp.ok, "reference": "fp32 torch relu(a.float() @ b.float())"},
        )
        rec["call"] = "gemm_relu(a, b, out=c) (the rule chooses)"
        out.append(rec)
        label = choice.label
        print(f"{set_name:<8} {f'{M}x{N}x{K}':<18} {dt:<9} {label:<30} {t.ms * 1e3:8.1f} {torch_t.ms * 1e3:8.1f} "
              f"{rec['ratio_to_reference']:7.2f}  {'ok' if cmp.ok else 'WRONG'} ({cmp.rel_error:.1e}; {t.regime})",
              flush=True)
        del a, b, c
    torch.cuda.empty_cache()
    return out


def contrast_choice(choice, M, N, K, dt):
    """``(peers key, choice)``: what a record of a kernel for the last row of tiles is timed beside:
    notebook 02's kernel on the same tile and split (rows past M filled by TMA), or for the swapped
    kernel the rule's pick without the swap (what the op ran there before it)."""
    from . import rule

    if choice.last_rows == "swapped":
        return "unswapped", rule.measured_choice(M, N, K, dt, swap=False)
    return "filled_rows", dataclasses.replace(choice, last_rows="filled", a_rows=0)


#: a record's peers key and name for each contrast
CONTRASTS = {
    "filled_rows": "notebook 02's kernel(s), the same tile and split, rows past M filled by TMA (called directly)",
    "unswapped": "the rule's pick without the swap, its tile and split (called directly)",
}


def direct_call(choice, N, K, dt, a, b, out):
    """A no-argument call of ``choice``'s compiled kernel(s) on ``a``, ``b`` into ``out``, without
    the op around them (the split-K pair with its own workspace)."""
    import torch

    kernels = [runtime.launcher(k) for k in op.build_for(N, K, choice.config, choice.split, dt,
                                                         choice.last_rows, choice.a_rows)]
    if choice.split == 1:
        return functools.partial(kernels[0], a, b, out)
    workspace = torch.empty((choice.split, a.shape[0], N), dtype=torch.float32, device=a.device)
    partial, reduce = kernels

    def call():
        partial(a, b, workspace)
        reduce(workspace, out)
    return call


def _contrast_peer(a, b, choice, dt, M, N, K):
    """``(key, peer)``: :func:`contrast_choice`'s kernel(s) called directly on the same inputs,
    checked, then timed as the op is; peer None when its timing methods disagree."""
    key, peer_choice = contrast_choice(choice, M, N, K, dt)
    c = checks.poisoned((M, N), a.dtype, "cuda")
    call = direct_call(peer_choice, N, K, dt, a, b, c)
    call()
    cmp = checks.compare(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dt])
    try:
        t = timing.measure(call)
    except timing.TimingDisagreement:
        return key, None
    return key, {"name": CONTRASTS[key], "config": dict(peer_choice.as_dict(), label=peer_choice.label),
                 "value": tflops(M, N, K, t.ms), "unit": "TFLOP/s", "latency_ms": t.ms, "timing": t.as_dict(),
                 "correctness": {"ok": cmp.ok, "rel_error": cmp.rel_error, "unwritten": cmp.unwritten}}


def summarize_rule(records) -> str:
    """Geomean and minimum ratio to torch per set, the line the goals are read from."""
    import math

    lines = []
    for set_name in ("random", "small M"):
        ratios = [r["ratio_to_reference"] for r in records if r["shape"]["set"] == set_name]
        if ratios:
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            worst = min((r for r in records if r["shape"]["set"] == set_name), key=lambda r: r["ratio_to_reference"])
            s = worst["shape"]
            lines.append(f"{set_name}: {len(ratios)} shapes, geomean {geo:.2f}x torch, min {min(ratios):.2f}x "
                         f"({s['M']}x{s['N']}x{s['K']} {worst['dtype']})")
    return "\n".join(lines)


def run_rule(quick: bool = False) -> results.Run:
    """Suite ``gemm_rule``: the op through the rule on the random set (drawn afresh) and the small-M
    set, each shape against torch relu(a @ b) measured in the same run."""
    runtime.require_gpu("the gemm_rule benchmark")
    op.clear_plans()
    prov = results.provenance(RULE_COMMAND + (" --quick" if quick else ""))
    sets, seed = rule_sets(quick)
    print(f"gemm_rule: {len(sets)} shapes drawn with seed {seed}", flush=True)
    skipped = []
    out = rule_records(sets, skipped)
    print(summarize_rule(out), flush=True)
    if skipped:
        print(f"{len(skipped)} shape(s) not recorded: their timing methods disagreed", flush=True)
    return results.Run(out, prov, goals=list(GOALS),
                       notes={"seed": seed, "shapes": [list(s) + [n] for n, s in sets], "not_recorded": skipped})
