"""Which configuration ``gemm_relu`` uses for a shape: a rule, fed by measured rates.

One tuned tile for every shape loses where the tile count quantises badly against the SM count
(a 2048 x 2648 C holds 16 x 11 = 176 tiles of 128 x 256: two waves on 132 SMs, the second 1/3
full) and where M x N is small (M = 16: a single row of tiles, most SMs idle). The rule prices
each candidate tile -- and, for the narrow tile, each split of K -- with a two-term model and
picks the cheapest:

    time = max(compute, memory) + reduce
    compute = waves x steps per block x step time        waves = ceil(blocks / SMs)
    memory  = (A + B + C [+ the split partials]) bytes / copy bandwidth
    reduce  = the split-K reduction kernel (0 without a split)

The step time of each candidate and the reduction's fixed cost are *measured*: the suite
``gemm_rates`` (``python -m tilelang_tutorial bench gemm_rates``) times every candidate at
8192^3 on the GPU and records them in ``results/gemm_rates.json``; the rule reads those records.
Where nothing was measured for the architecture (or a record is stale), the rule takes the
configuration that compiles everywhere (the seed) and says so. Shapes that TMA cannot describe
(N or K not a multiple of 8 for 16-bit data) take the seed configuration too: its loads fall
back to predicated copies, which compile and run for any N and K.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ... import runtime
from .configs import SEED_CONFIG, TUNED_CONFIGS, GemmConfig

#: Whether ``choose`` uses the model. Off: its first pick measured on the H200 (2026-11-30,
#: ``docs/performance-log.md``; the run's log is ``docs/measurements/2026-11-30/bench_d.log``) ran
#: at 0.30x torch -- M = 3, N = 4624, K = 4704, the narrow tile with K split 3: about 81 us where
#: the model predicted 18 us -- so until a sweep validates it shape by shape, ``gemm_relu`` keeps
#: the configurations measured on the squares (the tuned tile, at or above torch there; the seed
#: where rows are unaligned or shared memory is small). The model, its measured rates and the
#: split-K path stay here, tested, for that sweep (notebook 02b, section 9).
MODEL_ENABLED = False

RATES_SUITE = "gemm_rates"
RATES_SIZE = 8192

#: The tiles the rule chooses among (name -> config). "tuned" and "seed" are notebook 02's; the
#: narrow tile (one 64-row warpgroup) is for small M, alone or with K split.
CANDIDATES = {
    "tuned": TUNED_CONFIGS["float16"],
    "seed": SEED_CONFIG,
    "narrow": GemmConfig(block_M=64, block_N=128, block_K=64, num_stages=4, threads=128, policy="Square",
                         swizzle_panel=4, swizzle_order="column"),
    "narrow_wide": GemmConfig(block_M=64, block_N=256, block_K=64, num_stages=3, threads=128, policy="Square",
                              swizzle_panel=4, swizzle_order="column"),
}
#: the candidates that may split K (their partials are fp32 (split, M, N) tensors)
SPLITTABLE = ("narrow",)
SPLITS = (2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True)
class GemmChoice:
    """What ``gemm_relu`` runs for one shape, and why."""

    name: str                   # a key of CANDIDATES
    config: GemmConfig
    split: int                  # 1: the plain kernel; >= 2: split-K + reduction
    predicted_us: float | None  # the model's time (None when no rates were measured)
    why: str

    def as_dict(self) -> dict:
        return {"candidate": self.name, "split": self.split, **self.config.as_dict()}


def smem_bytes(config: GemmConfig, elem: int = 2) -> int:
    """Dynamic shared memory of one block: the pipeline's A and B tiles (TileLang reuses them for
    the staged C tile, so C adds nothing unless it is larger)."""
    pipeline = config.num_stages * (config.block_M * config.block_K + config.block_K * config.block_N) * elem
    staged_c = config.block_M * config.block_N * elem if config.store_via_shared else 0
    return max(pipeline, staged_c)


def fits(config: GemmConfig, arch: str) -> bool:
    return smem_bytes(config) <= runtime.ARCHS[arch].smem_per_block


@functools.lru_cache(maxsize=None)
def measured_rates(arch: str):
    """``({candidate: step time in us}, reduce fixed cost in us, copy GB/s, sm_count, provenance)``
    from the current ``gemm_rates`` records of ``arch``, or None when there are none."""
    from ... import results
    from .. import load

    load("gemm")                                      # registers the suite (what makes staleness checkable)
    recs = results.find(RATES_SUITE, config=lambda c: isinstance(c, dict) and c.get("arch") == arch)
    steps = {r["config"]["candidate"]: r["step_us"] for r in recs if r["kernel"] == "gemm_relu"}
    reduce = [r["latency_ms"] * 1e3 for r in recs if r["kernel"] == "splitk_reduce_relu"]
    if not steps or not reduce:
        return None
    r0 = recs[0]
    return steps, min(reduce), r0["copy_gbps"], r0["sm_count"], r0.label()


def step_us(rate_tflops: float, config: GemmConfig, sm_count: int) -> float:
    """One block's time for one K step when every SM runs one block, from a measured throughput."""
    flops_per_step = 2.0 * config.block_M * config.block_N * config.block_K
    return flops_per_step * sm_count / (rate_tflops * 1e12) * 1e6


def predict_us(M, N, K, config: GemmConfig, split: int, step: float, reduce_us: float, copy_gbps: float,
               sm_count: int, elem: int = 2) -> float:
    """The model's time for one shape, configuration and split (microseconds)."""
    blocks = math.ceil(M / config.block_M) * math.ceil(N / config.block_N) * split
    steps = math.ceil(math.ceil(K / config.block_K) / split)
    compute = math.ceil(blocks / sm_count) * steps * step
    nbytes = (M * K + K * N + M * N) * elem + (2 * split * M * N * 4 if split > 1 else 0)
    memory = nbytes / (copy_gbps * 1e9) * 1e6
    return max(compute, memory) + (reduce_us if split > 1 else 0.0)


def choose(M: int, N: int, K: int, dtype: str = "float16", arch: str | None = None) -> GemmChoice:
    arch = arch or runtime.current_arch()
    if N % 8 or K % 8:
        return GemmChoice("seed", SEED_CONFIG, 1, None,
                          f"N={N} or K={K} is not a multiple of 8: rows are not 16-byte aligned, so TMA cannot "
                          "load them; the seed configuration's predicated loads work for any N and K")
    rates = measured_rates(arch) if MODEL_ENABLED else None
    if rates is None:
        cfg = TUNED_CONFIGS[dtype] if fits(TUNED_CONFIGS[dtype], arch) and arch == "sm_90a" else SEED_CONFIG
        name = "tuned" if cfg is TUNED_CONFIGS[dtype] else "seed"
        why = ("the model is off (MODEL_ENABLED)" if not MODEL_ENABLED else f"no gemm_rates measured for {arch}")
        return GemmChoice(name, cfg, 1, None,
                          f"{why}: the {name} configuration "
                          + ("(tuned on the H200)" if name == "tuned" else "(it fits every architecture's shared memory)"))
    return model_choice(M, N, K, arch, rates)


def model_choice(M: int, N: int, K: int, arch: str, rates) -> GemmChoice:
    """The model's cheapest candidate and split for one shape, given ``measured_rates(arch)``."""
    steps, reduce_us, copy_gbps, sm_count, _ = rates
    best = None
    for name, cfg in CANDIDATES.items():
        if name not in steps or not fits(cfg, arch):
            continue
        splits = (1,) + (SPLITS if name in SPLITTABLE else ())
        k_steps = math.ceil(K / cfg.block_K)
        for split in splits:
            if split > 1 and k_steps < 2 * split:          # each slice keeps >= 2 steps to pipeline
                break
            t = predict_us(M, N, K, cfg, split, steps[name], reduce_us, copy_gbps, sm_count)
            if best is None or t < best[0] - 1e-9:
                best = (t, name, cfg, split)
    t, name, cfg, split = best
    return GemmChoice(name, cfg, split, t, f"the model's cheapest of {len(steps)} measured tiles"
                      + (f" with K split {split} ways" if split > 1 else ""))
