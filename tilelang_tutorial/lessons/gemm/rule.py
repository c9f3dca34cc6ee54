"""Which kernel ``gemm_relu`` runs for a shape: a short rule, every branch measured on the H200.

* Shared memory first: a configuration that does not fit the architecture's blocks is fitted
  (:func:`fitted`: fewer stages, then smaller tiles); the seed fitted that way is
  :func:`seed_config` (a T4 gets the seed with two stages).
* N or K not a multiple of 8 (rows that are not 16-byte aligned, which TMA cannot load): the seed,
  whose predicated loads compile and run for any N and K.
* Anything but Hopper (sm_90a): the seed.
* On Hopper (:func:`measured_choice`) the question is how many blocks stream B: about one per SM
  (132), without splitting K where N gives enough blocks.

  - M = 1 and N >= 4096: the GEMV kernel (:mod:`.gemv`).
  - M <= 64: one row of 64-row tiles, 32 to 128 wide (K split 2 or 4 where N gives few blocks and
    K >= 4096), A's boxes only M rows tall (rounded up to 8; :mod:`.last_rows`).
  - 64 < M <= 128: two rows of 64-row tiles (the second clamped to end at row M) or one row of
    128-row tiles whose A comes as two 64-row boxes; K split on 128 x 64 tiles where two rows of
    64 x 32 tiles would make a second wave.
  - M > 128: of the tuned tile and the other tiles of :data:`LARGE_M_TILES`, the fewest waves x
    tile time at each tile's measured rate; with fewer than :data:`FEW_BLOCKS` blocks over a long K,
    the tile and split of K with the most blocks in one wave; then the swapped kernel (M on the
    tensor-core instruction's width) where :data:`SWAP_MODEL` predicts it faster.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ... import runtime
from . import last_rows
from .configs import SEED_CONFIG, TUNED_CONFIGS, GemmConfig

#: one 64-row warpgroup on 64 x 128 tiles: the small-M tile of the split-K pair in notebook 02b
NARROW = GemmConfig(block_M=64, block_N=128, block_K=64, num_stages=4, threads=128, policy="Square",
                    swizzle_panel=4, swizzle_order="column")

@dataclass(frozen=True)
class GemmChoice:
    """What ``gemm_relu`` runs for one shape, and why."""

    name: str                   # the tile's name (SMALL_M_TILES, LARGE_M_TILES, ...)
    config: GemmConfig
    split: int                  # 1: the plain kernel; >= 2: split-K + reduction
    predicted_us: float | None  # the time the rule estimated (None: a fixed branch)
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


def choose(M: int, N: int, K: int, dtype: str = "float16", arch: str | None = None) -> GemmChoice:
    """What ``gemm_relu`` runs for ``(M, N, K)`` in ``dtype`` on ``arch`` (the module docstring's rule)."""
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
    if arch == "sm_90a" and fits(TUNED_CONFIGS[dtype], arch):
        return measured_choice(M, N, K, dtype)
    return GemmChoice("seed", seed, 1, None,
                      f"the rule's tiles were measured on Hopper only: the seed configuration on {arch} "
                      + (f"(it fits {arch}'s shared memory)" if seed == SEED_CONFIG else seed_note[1:]))


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


#: tiles for M > 128 and their measured throughput (TFLOP/s, fp16, H200): the tuned tile and the
#: 128 x 128 x 128 one at 4096^3 (results/gemm_sweep.json), the others at full waves. The 256-row
#: tiles, 128 to 192 wide, fill one wave where 128-row tiles make two or three (the widths cuBLAS's
#: kernels use there); the 192 x 192 tile (three consumer warpgroups) covers C closer where the
#: others leave much of a last wave empty.
LARGE_M_TILES = (
    ("tuned", None, 730.0),
    ("m128n128k128t256", GemmConfig(block_M=128, block_N=128, block_K=128, num_stages=3, threads=256, policy="Square",
                                    swizzle_panel=8, swizzle_order="row"), 581.0),
    ("narrow", NARROW, 440.0),
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
    """The Hopper branch of the rule (the module docstring); ``swap=False``: never the swapped kernel."""
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
            # one wave holds
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
    the candidate with the most blocks that still fit one wave (fewer splits on a tie)."""
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


#: fitted on the H200 to timings of the swapped kernel at random shapes past 128 rows (rms log
#: error 0.12); the DRAM term is the H100's copy rate and was never the largest at those points
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
    return GemmChoice(f"swap{block_N}x{width}", config, 1, t_swap,
                      f"the swapped kernel (C^T = B^T A^T, M on wgmma's width): {_blocks(M, N, config)} "
                      f"blocks of {width} rows x {block_N} columns, {t_swap:.0f} us by the model against "
                      f"{t_pick:.0f} us for {choice.config.block_M} x {choice.config.block_N}"
                      + (f" with K split {choice.split}" if choice.split > 1 else ""), last_rows="swapped")


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
