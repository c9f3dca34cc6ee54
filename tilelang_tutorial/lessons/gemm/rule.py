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
seed configuration and says so; on an architecture whose blocks have less shared memory than the
seed's 96 KiB (a T4: 64 KiB) it takes the seed with fewer stages (:func:`seed_config`). Shapes that TMA cannot describe
(N or K not a multiple of 8 for 16-bit data) take the seed configuration too: its loads fall
back to predicated copies, which compile and run for any N and K.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from ... import runtime
from . import last_rows
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
    gemv: tuple = ()            # the GEMV kernel's knobs ((name, value), ...) when it runs that instead
    last_rows: str = "filled"   # the last row of tiles (last_rows.PROGRAMS): "filled" (notebook 02's
                                # kernel, TMA zero-fills rows past M), "clamped", "two boxes" or "short"
    a_rows: int = 0             # "short": the height of A's boxes (M rounded up to 8)

    def as_dict(self) -> dict:
        out = {"candidate": self.name, "split": self.split, **self.config.as_dict()}
        if self.gemv:
            out["gemv"] = dict(self.gemv)
        if self.last_rows != "filled":
            out["last_rows"] = self.last_rows
        if self.a_rows:
            out["a_rows"] = self.a_rows
        return out

    @property
    def label(self) -> str:
        """What runs, in one word: the tile's name (with ``/kS`` for a split of K) or the GEMV's knobs."""
        if self.gemv:
            return "gemv " + " ".join(f"{k}={v}" for k, v in self.gemv)
        return (self.config.name + (f"/k{self.split}" if self.split > 1 else "")
                + ("" if self.last_rows == "filled" else f" ({self.last_rows}"
                   + (f" {self.a_rows}" if self.a_rows else "") + ")"))


def smem_bytes(config: GemmConfig, elem: int = 2) -> int:
    """Dynamic shared memory of one block: the pipeline's A and B tiles (TileLang reuses them for
    the staged C tile, so C adds nothing unless it is larger)."""
    pipeline = config.num_stages * (config.block_M * config.block_K + config.block_K * config.block_N) * elem
    staged_c = config.block_M * config.block_N * elem if config.store_via_shared else 0
    return max(pipeline, staged_c)


def fits(config: GemmConfig, arch: str) -> bool:
    return smem_bytes(config) <= runtime.ARCHS[arch].smem_per_block


#: the fewest pipeline stages a fitted configuration keeps (one stage: no load overlaps a multiply)
MIN_STAGES = 2


def fitted(config: GemmConfig, arch: str) -> GemmConfig:
    """``config`` itself where its shared memory fits ``arch``'s blocks; otherwise the same tile
    with fewer pipeline stages (down to :data:`MIN_STAGES`), then with ``block_K`` halved (down to
    16), then with ``block_N`` and ``block_M`` halved: the first that fits. The tile shape (what
    each block computes) is kept as long as possible, because A is re-read ``N / block_N`` times
    and B ``M / block_M`` times; fewer stages cost only overlap. On a T4 (sm_75, 64 KiB) the seed's
    three stages of 32 KiB become two (64 KiB, TileLang's launch asks for exactly 65536 bytes)."""
    limit = runtime.ARCHS[arch].smem_per_block
    candidate = config
    while smem_bytes(candidate) > limit:
        if candidate.num_stages > MIN_STAGES:
            candidate = candidate.replace(num_stages=candidate.num_stages - 1)
        elif candidate.block_K > 16:
            candidate = candidate.replace(block_K=candidate.block_K // 2)
        elif candidate.block_N > 16:
            candidate = candidate.replace(block_N=candidate.block_N // 2)
        elif candidate.block_M > 16:
            candidate = candidate.replace(block_M=candidate.block_M // 2)
        else:
            raise ValueError(f"no GEMM tile fits {arch}'s {limit} bytes of shared memory per block")
    return candidate


def seed_config(arch: str) -> GemmConfig:
    """The seed configuration for ``arch``: :data:`SEED_CONFIG` wherever it fits (every target the
    tutorial knows but Turing), :func:`fitted` to the architecture's shared memory elsewhere."""
    return fitted(SEED_CONFIG, arch)


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
    seed = seed_config(arch)
    seed_note = ("" if seed == SEED_CONFIG else
                 f" (with {seed.num_stages} stages of {seed.block_M} x {seed.block_N} x {seed.block_K}: "
                 f"{smem_bytes(seed) // 1024} KiB, what fits {arch}'s "
                 f"{runtime.ARCHS[arch].smem_per_block // 1024} KiB per block)")
    if N % 8 or K % 8:
        return GemmChoice("seed", seed, 1, None,
                          f"N={N} or K={K} is not a multiple of 8: rows are not 16-byte aligned, so TMA cannot "
                          "load them; the seed configuration's predicated loads work for any N and K" + seed_note)
    rates = measured_rates(arch) if MODEL_ENABLED else None
    if rates is None:
        if arch == "sm_90a" and fits(TUNED_CONFIGS[dtype], arch):
            return measured_choice(M, N, K, dtype)
        cfg = seed
        why = ("the model is off (MODEL_ENABLED)" if not MODEL_ENABLED else f"no gemm_rates measured for {arch}")
        return GemmChoice("seed", cfg, 1, None,
                          f"{why}, and the small-M path was measured on the H200 only: the seed configuration "
                          + (f"(it fits {arch}'s shared memory)" if seed == SEED_CONFIG else seed_note[1:]))
    return model_choice(M, N, K, arch, rates)


# ------------------------------------------------------------------------------------------------
# The path the op takes on Hopper (sm_90a): fitted to the sweep gemm_small_m on the H200
# (2026-12-01; `python -m tilelang_tutorial sweep gemm_small_m`, its figures in docs/performance-log.md)
# ------------------------------------------------------------------------------------------------

def _tile(block_M, block_N, block_K, num_stages):
    return GemmConfig(block_M=block_M, block_N=block_N, block_K=block_K, num_stages=num_stages, threads=128,
                      policy="Square", swizzle_panel=0, swizzle_order="column")


#: The small-M tiles: one 64-row warpgroup (wgmma's smallest M), narrow N so that a few rows still
#: give enough blocks to stream B with, deep TMA pipelines (4-8 stages) to keep bytes in flight.
SMALL_M_TILES = {
    "m64n64k64s8": _tile(64, 64, 64, 8),
    "m64n64k128s4": _tile(64, 64, 128, 4),
    "m64n32k256s4": _tile(64, 32, 256, 4),
    "m64n128k64s4": _tile(64, 128, 64, 4),
    "m128n64k64s6": _tile(128, 64, 64, 6),
}
#: the GEMV kernel (gemv.py) for one row: 32 columns per block, 64 lanes of K, 8 rows in flight
GEMV_ONE_ROW = (("max_m", 1), ("block_N", 32), ("k_lanes", 64), ("unroll", 8))
def _tall_tile(block_N, num_stages, block_M=256):
    """A 256-row tile: two consumer warpgroups of 128 rows each (FullRow), C stored by TMA; or a
    192-row one: three consumer warpgroups of 64 rows (384 threads)."""
    return GemmConfig(block_M=block_M, block_N=block_N, block_K=64, num_stages=num_stages,
                      threads=256 if block_M == 256 else 384, policy="FullRow",
                      swizzle_panel=8, swizzle_order="row", store_via_shared=True)


#: tiles for M > 128 and their measured throughput on the H200, fp16. The first three at 4096^3
#: (results/gemm_sweep.json for the tuned and the 128 x 128 x 128 tiles, results/gemm_rates.json for
#: the narrow 64 x 128 tile). The 256-row tiles, 128 to 192 wide, are the widths cuBLAS's kernels
#: use to fill one wave where 128-row tiles make two or three (256 x 144, 192 x 112, 288 x 128 at the
#: shapes where the op trailed torch): their rates are at four full waves (24 x 22 tiles, K = 4096),
#: where the tuned tile read 667 rather than 730, so they win only with a margin
#: (docs/measurements/2026-12-02b/gemm_waves.log). The 192 x 192 tile (three consumer warpgroups)
#: covers C closer where the others leave much of a last wave empty: its rate, 684, is from a later
#: run (docs/measurements/2026-12-06/two_waves_rates.log), where the tuned tile read 694 and the
#: 256 x 192 683, so against the older rates above it wins only by its fill. Timed against the pick
#: it displaced at the shapes where it is taken (two_waves_fresh_6.log, H200; 2026-12-05d's two H100
#: logs): 1.14-1.30x faster at all 5; it is not taken at the 21 others, where it was the slower at 12.
LARGE_M_TILES = (
    ("tuned", None, 730.0),
    ("m128n128k128t256", GemmConfig(block_M=128, block_N=128, block_K=128, num_stages=3, threads=256, policy="Square",
                                    swizzle_panel=8, swizzle_order="row"), 581.0),
    ("narrow", CANDIDATES["narrow"], 440.0),
    ("m256n128", _tall_tile(128, 4), 647.0),
    ("m256n144", _tall_tile(144, 4), 627.0),
    ("m256n160", _tall_tile(160, 4), 672.0),
    ("m256n176", _tall_tile(176, 4), 642.0),
    ("m256n192", _tall_tile(192, 3), 750.0),
    ("m192n192", _tall_tile(192, 4, block_M=192), 684.0),
)
SM_COUNT = 132
#: a K this long is worth splitting when N gives too few blocks (below it the reduction's fixed cost wins)
SPLIT_MIN_K = 4096


def _blocks(M, N, config, split=1):
    return math.ceil(M / config.block_M) * math.ceil(N / config.block_N) * split


def measured_choice(M: int, N: int, K: int, dtype: str = "float16", swap: bool = True) -> GemmChoice:
    """The Hopper path. B (N x K) is what a small-M call must read, so the question is how many
    blocks stream it: about one per SM (132 on the H200) without splitting K where N allows.

    * M = 1 and N >= 4096: the GEMV kernel (N / 32 >= 128 blocks; no tensor-core tile of 64 rows).
    * M <= 64: one row of 64-row blocks, A's boxes only M rows tall (rounded up to 8; the tile's
      rows past them are never loaded) where that is fewer than 64. N / 64 >= 100 blocks: 64-wide tiles, or for a large B
      (N x K >= 40 M elements) with M <= 32, 128-wide tiles with K split 2; N / 64 >= 48: 64-wide
      tiles (128 deep in K up to 16 rows; 32-wide, 256 deep, at M > 32 when that still gives at
      most 160 blocks); fewer
      blocks and K >= 4096: 64-wide tiles with K split 2 or 4 (about 128 blocks); otherwise the
      64-wide tile as it is.
    * 64 < M <= 128: two rows of 64 x 64 blocks where that makes 100 to 132 blocks, else a
      128 x 64 tile where N / 64 > 66 (its A loaded as two 64-row boxes that end by row M), else two
      rows of 64 x 32 blocks; every second row clamped to end at row M (:mod:`.last_rows`: no rows
      past M loaded). Where two rows of 64 x 32 blocks would be more than one wave (N > 2112) and
      K >= 4096, 128 x 64 tiles with K split as far as one wave holds (:func:`_most_blocks_in_one_wave`).
    * M > 128: of the tuned, a 128 x 128, the 64 x 128 tile, five 256-row tiles 128 to 192
      wide and a 192 x 192 tile, the fewest waves x tile time at each tile's measured rate; where that makes fewer
      than 100 blocks and K >= 4096, the candidate (tile x split of K 1-4) with the most blocks
      within one wave (:func:`_few_blocks_split`). Then (unless ``swap`` is False: the pick the
      swap is weighed against) the swapped kernel, M on ``wgmma``'s width, where
      :data:`SWAP_MODEL` predicts it faster (:func:`swapped_or`; up to about 2048 rows).

    :data:`NEXT_RULE` (off until an H200 records it) changes three of these; see there.
    """
    tiles = SMALL_M_TILES
    if M == 1 and N >= 4096:
        return GemmChoice("gemv", SEED_CONFIG, 1, None,
                          f"M = 1, N = {N}: the GEMV kernel, {math.ceil(N / 32)} blocks of 32 columns", GEMV_ONE_ROW)
    if M <= 64:
        choice = _one_row_choice(M, N, K, tiles)
        rows = last_rows.short_rows(M)
        if rows == 64:
            return choice
        return dataclasses.replace(choice, last_rows="short", a_rows=rows,
                                   why=f"{choice.why}; A's boxes {rows} rows tall, not 64")
    if M <= 128:
        pending = _next_rule_65_128(M, N, K, tiles, swap) if NEXT_RULE else None
        if pending is not None:
            return pending
        if math.ceil(N / 64) >= 100:
            return _pick("m128n64k64s6", tiles["m128n64k64s6"], 1, M, N,
                         "128 x 64 tiles, A in two 64-row boxes that end by row M", "two boxes")
        if 100 <= 2 * math.ceil(N / 64) <= SM_COUNT:
            return _pick("m64n64k128s4", tiles["m64n64k128s4"], 1, M, N,
                         "two rows of 64 x 64 tiles, the second clamped to end at row M", "clamped")
        if 2 * math.ceil(N / 64) > SM_COUNT:        # two rows would make a second wave
            return _pick("m128n64k64s6", tiles["m128n64k64s6"], 1, M, N,
                         "128 x 64 tiles (two rows of 64 x 64 would be more blocks than SMs), A in two "
                         "64-row boxes that end by row M", "two boxes")
        if 2 * math.ceil(N / 32) > SM_COUNT and K >= SPLIT_MIN_K:
            # two rows of 64 x 32 tiles would be a second wave: 128 x 64 tiles with K split as far as
            # one wave holds. Measured on an H100 (docs/measurements/2026-12-05d/small_m_narrow_n_h100.log,
            # every kernel in the same run): at N = 2560 and 3072 (160 and 192 blocks of 64 x 32)
            # those ran at 0.71-0.82x torch and this at 0.88-1.05x; splits past one wave at 0.73-0.90x.
            _, tile, split = _most_blocks_in_one_wave(M, N, K, {"m128n64k64s6": tiles["m128n64k64s6"]})
            if split > 1:
                return _pick("m128n64k64s6", tile, split, M, N,
                             f"128 x 64 tiles with K split {split} (two rows of 64 x 32 tiles would be more "
                             "blocks than SMs)")
        return _pick("m64n32k256s4", tiles["m64n32k256s4"], 1, M, N,
                     "two rows of 64 x 32 tiles, the second clamped to end at row M", "clamped")
    best = None
    for name, cfg, rate in LARGE_M_TILES:
        cfg = cfg or TUNED_CONFIGS[dtype]
        blocks = _blocks(M, N, cfg)
        t = math.ceil(blocks / SM_COUNT) * (2.0 * cfg.block_M * cfg.block_N * K) / (rate * 1e12 / SM_COUNT) * 1e6
        if best is None or t < best[0] - 1e-9:
            best = (t, name, cfg, blocks)
    t, name, cfg, blocks = best
    if blocks < FEW_BLOCKS and K >= SPLIT_MIN_K:
        choice = _few_blocks_split(M, N, K, name, cfg, blocks, t)
    else:
        choice = GemmChoice(name, cfg, 1, t,
                            f"the fewest waves x tile time: {blocks} blocks of {cfg.block_M} x {cfg.block_N}")
    return swapped_or(choice, M, N, K) if swap else choice


#: past 128 rows, a waves pick with fewer blocks than this leaves SMs idle for the whole of a long K
FEW_BLOCKS = 100

# ------------------------------------------------------------------------------------------------
# The next rule: three changes measured on H100s only, off until an H200 records gemm_rule with them
# ------------------------------------------------------------------------------------------------

#: Off: ``choose`` is the rule that ``results/gemm_rule.json`` recorded on the H200 (a test holds
#: every record to today's rule, and 02b reads those records). On: three changes, each measured on
#: H100s against the pick it replaces, every kernel checked on a poisoned C (``docs/performance-log.md``,
#: 2026-12-06, second and third sessions; the logs in ``docs/measurements/2026-12-06b`` and ``-06c``):
#:
#: * 65-128 rows and 2432 < N <= 8448: the swapped kernel on 64 rows of N per block, M rounded up to
#:   16 on ``wgmma``'s width (39-132 blocks, one wave) -- faster than the pick at all 11 such shapes
#:   of the probe, 1.03-1.36x (73 x 7344 x 3512 bf16: 33.8 against 42.9 us), and in a second run
#:   (6 shapes drawn afresh) at all 12 where it swapped; at N = 2048-2112 (32-33 blocks) it was the
#:   slower at 3 of 4 (:func:`_next_rule_65_128`);
#: * 65-128 rows, N <= 2112 and K >= :data:`LONG_K`: 128 x 64 tiles with K split as far as one wave
#:   holds where that makes at least :data:`FEW_BLOCKS` blocks (80 x 2048 x 8192: 27.5 against 28.5 us
#:   for two rows of 64 x 32; on the H200 faster at 5 of 6 such shapes, ``docs/measurements/2026-12-06/
#:   small_m_narrow_n.log``);
#: * a swapped tile on 64 rows of N with at most half a wave of blocks over K >= :data:`SPLIT_MIN_K`:
#:   K split as far as one wave holds (:func:`split_few_swapped`; the partial kernel
#:   :func:`.last_rows.swapped_partial_program`) -- faster than the unsplit tile at all 5 such shapes
#:   timed beside it, 1.04-1.50x (130 x 696 x 8168 bf16: 20.2 against 30.4 us).
#:
#: Turned on in the same commit as an H200 ``gemm_rule`` record made with it (the runner's step
#: ``next-rule`` turns it on in the device's copy).
NEXT_RULE = False
#: 65-128 rows: the swapped kernel where N lies in this range (N / 64 blocks: 39 to 132)
SWAP_ROWS_65_128_N = (2432, 8448)
#: 65-128 rows: a K this long is split on 128 x 64 tiles even where two rows of 64 x 32 make one wave
LONG_K = 8192


def _next_rule_65_128(M, N, K, tiles, swap=True):
    """The next rule's pick at 64 < M <= 128 (:data:`NEXT_RULE`), or None where it keeps today's
    (``swap`` False: never the swapped kernel, the pick a swapped record is timed beside)."""
    if swap and SWAP_ROWS_65_128_N[0] < N <= SWAP_ROWS_65_128_N[1]:
        width = math.ceil(M / 16) * 16
        config = swapped_config(64, width)
        choice = GemmChoice(f"swap64x{width}", config, 1, SWAP_MODEL.predict_us(M, N, K, width, 64),
                            f"M = {M}: the swapped kernel (C^T = B^T A^T), M rounded up to {width} on wgmma's "
                            f"width, 64 columns of N per block ({_blocks(M, N, config)} blocks)", last_rows="swapped")
        return split_few_swapped(choice, M, N, K)
    if K >= LONG_K and N <= 2112:
        _, tile, split = _most_blocks_in_one_wave(M, N, K, {"m128n64k64s6": tiles["m128n64k64s6"]})
        if split > 1 and _blocks(M, N, tile, split) >= FEW_BLOCKS:
            return _pick("m128n64k64s6", tile, split, M, N,
                         f"128 x 64 tiles with K split {split} (K = {K}: long enough that the split's "
                         "reduction costs less than two rows of 64 x 32 tiles walking all of K)")
    return None


def split_few_swapped(choice: GemmChoice, M, N, K) -> GemmChoice:
    """A swapped tile on 64 rows of N with at most half a wave of blocks over a long K: K split as
    far as one wave holds (slices of at least :data:`SPLIT_MIN_SLICE`); ``choice`` otherwise. Only
    under :data:`NEXT_RULE`."""
    blocks = _blocks(M, N, choice.config)
    if (not NEXT_RULE or choice.last_rows != "swapped" or choice.config.block_N != 64
            or blocks > SM_COUNT // 2 or K < SPLIT_MIN_K):
        return choice
    split = max(s for s in FEW_BLOCK_SPLITS if blocks * s <= SM_COUNT and (s == 1 or K // s >= SPLIT_MIN_SLICE))
    if split == 1:
        return choice
    width = choice.config.block_M
    return dataclasses.replace(
        choice, split=split, predicted_us=SWAP_MODEL.predict_us(M, N, K, width, 64, split),
        why=f"{choice.why}; only {blocks} blocks over K = {K}: K split {split} ({blocks * split} blocks, one wave)")
#: the tiles a few-block shape may split K over (with the waves pick itself), and the splits tried
FEW_BLOCK_TILES = ("m128n128k128t256", "narrow")
FEW_BLOCK_SPLITS = (1, 2, 3, 4)
#: each slice of K keeps at least this many elements (16 steps of 64): shorter slices were not measured
SPLIT_MIN_SLICE = 1024


def _most_blocks_in_one_wave(M, N, K, tiles):
    """``(name, tile, split)``: of ``tiles`` ({name: config}), each with K split as in
    FEW_BLOCK_SPLITS (slices of at least SPLIT_MIN_SLICE), the one with the most blocks that still
    fit one wave of SM_COUNT (fewer splits on a tie); the caller makes sure one unsplit tile fits."""
    options = [(tile_name, tile, split) for tile_name, tile in tiles.items() for split in FEW_BLOCK_SPLITS
               if split == 1 or K // split >= SPLIT_MIN_SLICE]
    in_one_wave = [o for o in options if _blocks(M, N, o[1], o[2]) <= SM_COUNT]
    return max(in_one_wave, key=lambda o: (_blocks(M, N, o[1], o[2]), -o[2]))


def _few_blocks_split(M, N, K, name, cfg, blocks, predicted_us):
    """M > 128 whose waves pick makes fewer than FEW_BLOCKS blocks over a long K: of the pick, a
    128 x 128 tile, the 64 x 128 tile and the 64 x 64 x 128 small-M tile, each with K split 1 to 4,
    the candidate with the most blocks that still fit one wave (fewer splits on a tie). Measured on
    the H200 (``docs/measurements/2026-12-02b/gemm_splits.log``): at 183 x 1248 x 5024 the pick made
    30 blocks (0.63x torch) and 120 blocks of 64 x 64 with K split 2 ran 1.04x; at 228 x 2336 x 5672
    76 blocks (0.72x) and 114 blocks of 128 x 128 split 3 ran 0.91x; in both the fastest candidate
    was the one with the most blocks at or below 132."""
    large = {n: c for n, c, _ in LARGE_M_TILES}
    tiles = {name: cfg, **{n: large[n] for n in FEW_BLOCK_TILES}, "m64n64k128s4": SMALL_M_TILES["m64n64k128s4"]}
    tile_name, tile, split = _most_blocks_in_one_wave(M, N, K, tiles)      # the pick itself fits one wave
    n_blocks = _blocks(M, N, tile, split)
    if tile_name == name and split == 1:
        return GemmChoice(name, cfg, 1, predicted_us, f"{blocks} blocks of {cfg.block_M} x {cfg.block_N}: no candidate "
                          f"split of K gives more blocks within one wave of {SM_COUNT}")
    return GemmChoice(tile_name, tile, split, None,
                      f"the waves pick ({name}) makes only {blocks} blocks: {n_blocks} blocks of "
                      f"{tile.block_M} x {tile.block_N}" + (f" with K split {split}" if split > 1 else "")
                      + f", the most within one wave of {SM_COUNT}")


@dataclass(frozen=True)
class TileTimeModel:
    """One launch's time for a tiling of C, from three fitted constants and the copy bandwidth::

        t = fixed + max(compute, l2, dram)
        compute = waves x 2 x rows x cols x K / rate          one SM's multiply rate
        l2      = blocks x K x (rows + cols) x 2 bytes / l2   every block streams its A and B tiles
        dram    = (M K + K N) x 2 bytes (+ split-K partials) / dram

    with ``rows x cols`` a block's tile of C and ``K`` its share of K. A narrow tile re-reads more
    of A and B per FLOP, which the ``l2`` term prices and the rule's waves x tile time does not."""

    rate_tflops_per_sm: float
    l2_tbps: float
    fixed_us: float
    dram_tbps: float

    def predict_us(self, M, N, K, rows, cols, split=1) -> float:
        blocks = math.ceil(M / rows) * math.ceil(N / cols) * split
        k = math.ceil(K / split)
        compute = math.ceil(blocks / SM_COUNT) * 2 * rows * cols * k / 1e6 / self.rate_tflops_per_sm
        l2 = blocks * k * (rows + cols) * 2 / 1e6 / self.l2_tbps
        dram = ((M * K + K * N) * 2 + (2 * split * M * N * 4 if split > 1 else 0)) / 1e6 / self.dram_tbps
        return self.fixed_us + max(compute, l2, dram)


#: Fitted on the H200 (2026-12-05) to 193 timings of the swapped kernel at 80 random shapes past
#: 128 rows (rms log error 0.12), then checked on 48 shapes drawn afresh: choosing by it lifted
#: the op there from a geomean of 0.854x torch (15 shapes below 0.80) to 0.949x (6); the logs are
#: docs/measurements/2026-12-05c/. The DRAM figure is the H100's copy rate the fit was written
#: with; at none of the 193 points was that term the largest.
SWAP_MODEL = TileTimeModel(rate_tflops_per_sm=6.5, l2_tbps=8.0, fixed_us=8.0, dram_tbps=3.3)
#: the swapped kernel's tiles: N in 128 (two consumer warpgroups) or 64 rows; M in 1-8 equal
#: parts, each a multiple of 16 from 32 to 256 wide; 24 to 132 blocks (one wave)
SWAP_BLOCK_N = (128, 64)
SWAP_WIDTHS = (32, 256)
SWAP_BLOCKS = (24, SM_COUNT)
SWAP_MAX_PARTS = 8
#: its pipeline: as many stages of 64 in K (up to 8) as fit 216 KiB
SWAP_STAGE_BYTES = 216 * 1024


def swapped_tiles(M, N) -> list:
    """``[(block_N, width)]``: the swapped kernel's tiles of one wave for ``M x N``, sorted."""
    out = set()
    for block_N in SWAP_BLOCK_N:
        for parts in range(1, SWAP_MAX_PARTS + 1):
            width = math.ceil(math.ceil(M / parts) / 16) * 16
            blocks = math.ceil(M / width) * math.ceil(N / block_N)
            if SWAP_WIDTHS[0] <= width <= SWAP_WIDTHS[1] and SWAP_BLOCKS[0] <= blocks <= SWAP_BLOCKS[1]:
                out.add((block_N, width))
    return sorted(out)


def swapped_config(block_N, width) -> GemmConfig:
    """The swapped kernel's config: ``block_M`` is the tile's width in rows of M."""
    stages = max(2, min(8, SWAP_STAGE_BYTES // ((block_N + width) * 64 * 2)))
    return GemmConfig(block_M=width, block_N=block_N, block_K=64, num_stages=stages, threads=2 * block_N,
                      policy="FullRow", swizzle_panel=0, swizzle_order="column", store_via_shared=True)


def swapped_or(choice: GemmChoice, M, N, K) -> GemmChoice:
    """``choice`` (the rule's pick past 128 rows), or the swapped kernel's cheapest tile where
    :data:`SWAP_MODEL` predicts that tile faster than the pick."""
    tiles = swapped_tiles(M, N)
    if not tiles:
        return choice
    model = SWAP_MODEL.predict_us
    t_pick = model(M, N, K, choice.config.block_M, choice.config.block_N, choice.split)
    block_N, width = min(tiles, key=lambda t: model(M, N, K, t[1], t[0]))
    t_swap = model(M, N, K, width, block_N)
    if t_swap >= t_pick:
        return choice
    config = swapped_config(block_N, width)
    return split_few_swapped(GemmChoice(f"swap{block_N}x{width}", config, 1, t_swap,
                      f"the swapped kernel (C^T = B^T A^T, M on wgmma's width): {_blocks(M, N, config)} "
                      f"blocks of {width} rows x {block_N} columns, {t_swap:.0f} us by the model against "
                      f"{t_pick:.0f} us for {choice.config.block_M} x {choice.config.block_N}"
                      + (f" with K split {choice.split}" if choice.split > 1 else ""), last_rows="swapped"),
                             M, N, K)


def _one_row_choice(M, N, K, tiles):
    """M <= 64 rows: which 64-row tile (and split of K)."""
    n64 = math.ceil(N / 64)
    if n64 >= 100:
        if M <= 32 and N * K >= 40 * 2 ** 20:
            return _pick("m64n128k64s4", tiles["m64n128k64s4"], 2, M, N,
                         "a large B and at most 32 rows: 128-wide tiles, K split 2")
        return _pick("m64n64k64s8", tiles["m64n64k64s8"], 1, M, N, "64-wide tiles")
    if n64 >= 48:
        if M > 32 and math.ceil(N / 32) <= 160:
            return _pick("m64n32k256s4", tiles["m64n32k256s4"], 1, M, N, "32-wide tiles, 256 deep in K")
        if M <= 16:
            return _pick("m64n64k128s4", tiles["m64n64k128s4"], 1, M, N, "64-wide tiles, 128 deep in K")
        return _pick("m64n64k64s8", tiles["m64n64k64s8"], 1, M, N, "64-wide tiles")
    if K >= SPLIT_MIN_K:
        split = 4 if n64 <= 40 else 2
        return _pick("m64n64k128s4", tiles["m64n64k128s4"], split, M, N,
                     f"few 64-wide tiles and a long K: K split {split}")
    return _pick("m64n64k128s4", tiles["m64n64k128s4"], 1, M, N, "64-wide tiles (K too short to split)")


def _pick(name, cfg, split, M, N, why, last_rows="filled"):
    return GemmChoice(name, cfg, split, None, f"M = {M}: {why} ({_blocks(M, N, cfg, split)} blocks)",
                      last_rows=last_rows)


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
    if best is None:        # no measured candidate fits this architecture's shared memory
        return GemmChoice("seed", seed_config(arch), 1, None,
                          f"none of the measured tiles fits {arch}'s shared memory: the seed configuration")
    t, name, cfg, split = best
    return GemmChoice(name, cfg, split, t, f"the model's cheapest of {len(steps)} measured tiles"
                      + (f" with K split {split} ways" if split > 1 else ""))
