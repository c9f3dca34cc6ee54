"""Fused RMSNorm + SiLU over the channel (last) dimension, written in TileLang.

    y[r, c] = silu( x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * gamma[c] ),   silu(v) = v * sigmoid(v)

for an (M, C) view of a channels-last tensor (any leading shape: BTHWC, BHWC, ...), fp16 or bf16
in and out, fp32 arithmetic inside, for any C that is a multiple of 8 (whole 16-byte vectors).

The op is memory-bound: each element is read once and written once with a handful of FLOPs in
between, so the goal is 16-byte vector accesses with every thread busy, at every width.

* :func:`naive_rmsnorm_silu_program` is the kernel one writes first: a ``(block_m, C)`` fragment
  whose layout TileLang's inference chooses. Inference finds a per-row group of lanes only when a
  row is a power-of-two number of 16-byte vectors (C = 128, 256, 512, 1024); at other widths it
  gives each thread a whole row, replicated over the block (notebook 05 shows it in the CUDA).
* :func:`rmsnorm_silu_program` chooses the layout instead (:func:`row_group_layout`): a group of
  ``group`` consecutive threads (a power of two) owns each row, thread ``t`` of the group holding
  the 16-byte vectors ``t, t + group, ...``; the row stays in registers between the sum of
  squares and the output, and the fp32 sum of squares is reduced across the group's lanes only.
  Where the group does not divide the row's vectors, the tile is padded and TileLang's bounds
  checks drop the padding, so every multiple of 8 gets a group that suits it
  (:func:`default_config`: a rule and a table of exceptions). The SiLU's reciprocal is an approximate one and the
  registers are capped so that 4 or 5 blocks share an SM: the IEEE division the plain ``/``
  compiles to made the kernel issue-bound (notebook 05b counts the instructions).

``M`` is dynamic (``T.dynamic``): one compiled kernel per (C, dtype, config) serves every number of
rows. ``eps`` is a runtime argument.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import functools
from dataclasses import asdict, dataclass

import tilelang.language as T
from tilelang.layout import Fragment

from ... import runtime

#: Channel widths must be a multiple of this: a row is whole 16-byte vectors (8 elements of fp16 or
#: bf16), the width of every load and store, so no access splits a vector at the end of a row.
CHANNEL_MULTIPLE = 8
#: Elements per 16-byte vector load/store (fp16/bf16).
VEC = 8
DEFAULT_EPS = 1e-5
LOG2_E = 1.4426950408889634
SUPPORTED_DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class RMSNormSiLUConfig:
    """How one (C, dtype) kernel is laid out on the GPU.

    group:            threads that share one row (a power of two)
    threads:          threads per block (multiple of ``group``)
    rows_per_thread:  rows each thread group handles (block rows = threads // group * this)
    fast_sigmoid:     1 / (1 + e^-v) with one approximate reciprocal (rcp.approx) instead of an
                      IEEE division (about ten instructions and a slow path per element)
    min_blocks:       blocks each SM must hold at once (``__launch_bounds__``'s second number):
                      caps the registers per thread; 0 leaves it to the compiler
    """

    group: int
    threads: int
    rows_per_thread: int = 1
    fast_sigmoid: bool = False
    min_blocks: int = 0

    def block_m(self) -> int:
        return self.threads // self.group * self.rows_per_thread

    def as_dict(self) -> dict:
        d = asdict(self)
        d["block_m"] = self.block_m()
        return d


#: the fields of a configuration (what a record's config stores and its builder reads back)
CONFIG_FIELDS = ("group", "threads", "rows_per_thread", "fast_sigmoid", "min_blocks")


def valid_groups(C: int) -> list[int]:
    """Thread-group sizes for a row of C channels: powers of two (the sum of squares is a butterfly
    that pairs lanes by halves), up to the first that covers every 16-byte vector of the row."""
    n_vec = C // VEC
    return [1 << k for k in range(11) if (1 << k) < 2 * n_vec]


def vectors_per_thread(C: int, group: int) -> int:
    """16-byte vectors of a row each lane holds; when ``group`` does not divide C // 8 the row is
    padded to ``group * vectors_per_thread`` vectors and the padding is predicated off."""
    return -(-(C // VEC) // group)


#: the most 16-byte vectors of its row a lane holds under the rule (more and the capped registers spill)
MAX_VECTORS_PER_LANE = 5
#: the fewest lanes per row under the rule: 4 lanes move 64 contiguous bytes of a row per load
MIN_GROUP = 4
#: the most vectors a lane holds where an exception halves the group of a badly padded row
MAX_VECTORS_PADDED_ROW = 7


def rule_config(C: int) -> RMSNormSiLUConfig:
    """The rule: the smallest power-of-two group of at least ``MIN_GROUP`` lanes (half the row's
    vectors on a row of fewer than 8) that leaves each lane at most ``MAX_VECTORS_PER_LANE``
    16-byte vectors, blocks of 256 threads, the fast sigmoid, registers capped for 4 blocks an SM."""
    check_channel_width(C)
    n_vec = C // VEC
    group = next(g for g in valid_groups(C) + [1 << 10]
                 if g >= min(MIN_GROUP, n_vec // 2) and vectors_per_thread(C, g) <= MAX_VECTORS_PER_LANE)
    return RMSNormSiLUConfig(group=group, threads=max(256, group), rows_per_thread=1, fast_sigmoid=True,
                             min_blocks=4)


@dataclass(frozen=True)
class RuleException:
    """A change to the rule where its layout measured slower. ``applies(dtype, group, per_lane,
    filled)`` reads the rule's layout: its group, the vectors a lane holds, and the share of the
    padded row's vector slots that hold one. Where it applies: half the group if ``halve_group``,
    and the registers capped for ``min_blocks`` blocks an SM. ``why``: what the widths showed."""

    name: str
    applies: object
    halve_group: bool
    min_blocks: int
    why: str


#: The exceptions to the rule; the first that applies changes it.
RULE_EXCEPTIONS = (
    RuleException("256 lanes of 4, an eighth or more empty",
                  lambda dtype, group, per_lane, filled: group == 256 and per_lane == 4 and filled <= 7 / 8,
                  True, 3, "128 lanes of 7 pad less and fit the 3-block cap unspilled: 0.89 -> 0.92 of copy at 6176"),
    RuleException("bf16 lanes of 3, over a tenth empty",
                  lambda dtype, group, per_lane, filled: (dtype == "bfloat16" and per_lane == 3 and group >= 2 * MIN_GROUP
                                                          and filled < 0.9),
                  True, 4, "half as many lanes of 6, twice the bytes in flight a lane: 0.89 -> 0.94 of copy at 5152"),
    RuleException("lanes of 3", lambda dtype, group, per_lane, filled: per_lane == 3,
                  False, 5, "3 vectors a lane fit the 5-block cap's 48 registers: more blocks, more loads in flight"),
    RuleException("lanes of 4, over a tenth empty",
                  lambda dtype, group, per_lane, filled: per_lane == 4 and filled < 0.9 and group != 256,
                  False, 5, "a fifth block makes up for the idle lanes of the padded last round"),
    RuleException("bf16 256 lanes of 4, under 0.92 filled",
                  lambda dtype, group, per_lane, filled: (dtype == "bfloat16" and group == 256 and per_lane == 4
                                                          and filled < 0.92),
                  False, 5, "0.94-0.95 of copy at 7392-7520 against 0.90-0.92 under 4 (fp16's build spills under 5)"),
)


def rule_exception(C: int, dtype: str = "float16") -> RuleException | None:
    """The first of :data:`RULE_EXCEPTIONS` that applies to the rule's layout at width C, or None."""
    group = rule_config(C).group
    per_lane = vectors_per_thread(C, group)
    filled = (C // VEC) / (per_lane * group)
    return next((e for e in RULE_EXCEPTIONS if e.applies(dtype, group, per_lane, filled)), None)


def default_config(C: int, dtype: str = "float16") -> RMSNormSiLUConfig:
    """The layout at width C: the rule (:func:`rule_config`), changed by :func:`rule_exception`."""
    rule, exception = rule_config(C), rule_exception(C, dtype)
    if exception is None:
        return rule
    group = rule.group // 2 if exception.halve_group else rule.group
    return RMSNormSiLUConfig(group=group, threads=max(256, group), rows_per_thread=1, fast_sigmoid=True,
                             min_blocks=exception.min_blocks)


def check_channel_width(C: int) -> None:
    """Raise ValueError unless C is a positive multiple of CHANNEL_MULTIPLE."""
    if not isinstance(C, int) or C <= 0 or C % CHANNEL_MULTIPLE != 0:
        raise ValueError(
            f"rmsnorm_silu supports channel widths that are a positive multiple of {CHANNEL_MULTIPLE}; "
            f"got C = {C!r}. (Pad the channels, or use torch: F.silu(F.rms_norm(x, (C,), gamma, eps)).)"
        )


def row_group_layout(block_m: int, C: int, group: int, threads: int) -> Fragment:
    """Fragment layout of a (block_m, C) tile: row i -> thread group, 16-byte vectors round-robin.

    thread(i, j) = (i mod rows_per_pass) * group + (j // 8) mod group
    local(i, j)  = (i // rows_per_pass) * (C // group) + (j // (8 * group)) * 8 + j mod 8
    """
    rows_per_pass = threads // group
    per_thread = C // group

    def thread_fn(i, j):
        return (i % rows_per_pass) * group + (j // VEC) % group

    def index_fn(i, j):
        return (i // rows_per_pass) * per_thread + (j // (VEC * group)) * VEC + j % VEC

    return Fragment([block_m, C], forward_thread_fn=thread_fn, forward_index_fn=index_fn)


def rmsnorm_silu_program(C: int, dtype: str = "float16", config: RMSNormSiLUConfig | None = None):
    """The TileLang kernel factory: ``main(X[m, C], gamma[C], Y[m, C], eps)`` with dynamic m."""
    check_channel_width(C)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"rmsnorm_silu supports {' and '.join(SUPPORTED_DTYPES)}, got {dtype}")
    cfg = config or default_config(C, dtype)
    if cfg.group not in valid_groups(C):
        raise ValueError(f"group {cfg.group} must be a power of two of at most {valid_groups(C)[-1]} for C = {C} "
                         f"({C // VEC} vectors of 16 bytes)")
    if cfg.threads % cfg.group or cfg.threads % 32 or cfg.threads > 1024:
        raise ValueError(f"threads ({cfg.threads}) must be a multiple of 32 and of group ({cfg.group}), at most 1024")
    group, threads, block_m = cfg.group, cfg.threads, cfg.block_m()
    # The tile is the row padded to whole rounds of the group; the padding is never loaded or
    # stored (TileLang bounds-checks each 16-byte vector against C) and adds zeros to the sum.
    width = vectors_per_thread(C, group) * group * VEC
    accum = "float32"
    inv_c = 1.0 / C
    m = T.dynamic("m")

    @T.prim_func
    def main(
        X: T.Tensor((m, C), dtype),
        Gamma: T.Tensor((C,), dtype),
        Y: T.Tensor((m, C), dtype),
        eps: T.float32,
    ):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            if cfg.min_blocks:
                T.annotate_min_blocks_per_sm(cfg.min_blocks)
            x = T.alloc_fragment((block_m, width), dtype)       # the rows, kept in registers
            sq = T.alloc_fragment((block_m, width), accum)      # x^2 in fp32 (folded away by nvcc)
            rstd = T.alloc_fragment((block_m,), accum)          # one 1/rms per row
            y = T.alloc_fragment((block_m, width), dtype)
            # The fix for the non-power-of-two widths: we choose the layout, inference doesn't.
            T.annotate_layout({
                x: row_group_layout(block_m, width, group, threads),
                sq: row_group_layout(block_m, width, group, threads),
                y: row_group_layout(block_m, width, group, threads),
            })
            # Global -> registers, 16-byte vectors; rows >= m and vectors >= C are predicated off.
            T.copy(X[bx * block_m, 0], x)
            for i, j in T.Parallel(block_m, width):
                sq[i, j] = T.Cast(accum, x[i, j]) * T.Cast(accum, x[i, j])
            # fp32 sum of squares; the reduction crosses only the `group` threads of a row.
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)
            for i, j in T.Parallel(block_m, width):
                v = T.Cast(accum, x[i, j]) * rstd[i] * T.Cast(accum, Gamma[j])
                # silu(v) = v / (1 + e^-v), with e^-v = 2^(-v log2 e): exp2f is one ex2.approx.
                if cfg.fast_sigmoid:
                    y[i, j] = T.Cast(dtype, v * T.fast_rcp(1.0 + T.exp2(v * -LOG2_E)))
                else:
                    y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -LOG2_E)))
            T.copy(y, Y[bx * block_m, 0])

    return main


def naive_rmsnorm_silu_program(C: int, dtype: str = "float16", block_m: int = 8, threads: int = 128):
    """The first kernel one writes (kept for the comparison in notebook 05; the op never uses it):
    stage the tile in shared memory and let layout inference place the (block_m, C) fragments."""
    check_channel_width(C)
    accum = "float32"
    inv_c = 1.0 / C
    m = T.dynamic("m")

    @T.prim_func
    def main(
        X: T.Tensor((m, C), dtype),
        Gamma: T.Tensor((C,), dtype),
        Y: T.Tensor((m, C), dtype),
        eps: T.float32,
    ):
        with T.Kernel(T.ceildiv(m, block_m), threads=threads) as bx:
            xs = T.alloc_shared((block_m, C), dtype)       # the block's rows, staged in shared memory
            x = T.alloc_fragment((block_m, C), accum)      # the same rows in registers, in fp32;
            sq = T.alloc_fragment((block_m, C), accum)     # which thread holds which element of these
            rstd = T.alloc_fragment((block_m,), accum)     # fragments is left to layout inference
            y = T.alloc_fragment((block_m, C), dtype)
            T.copy(X[bx * block_m, 0], xs)                 # rows >= m read as 0 (ragged M)
            T.copy(xs, x)
            for i, j in T.Parallel(block_m, C):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)                  # the sum of squares of each row
            for i in T.Parallel(block_m):
                rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)
            for i, j in T.Parallel(block_m, C):
                v = x[i, j] * rstd[i] * T.Cast(accum, Gamma[j])
                y[i, j] = T.Cast(dtype, v / (1.0 + T.exp(-v)))   # silu(v) = v / (1 + e^-v)
            T.copy(y, Y[bx * block_m, 0])

    return main



@functools.lru_cache(maxsize=None)
def _build_naive(C: int, dtype: str, arch: str):
    return runtime.compile_kernel(naive_rmsnorm_silu_program(C, dtype), arch=arch)


def build_naive_rmsnorm_silu(C: int, dtype: str = "float16", arch: str | None = None):
    """Compiled NAIVE kernel (comparison only), same calling convention as the real one."""
    return _build_naive(C, dtype, arch or runtime.current_arch())


def rmsnorm_silu_reference(x, gamma, eps: float = DEFAULT_EPS):
    """fp32 torch reference: silu(rms_norm(x) * gamma) over the last dim, returned in fp32."""
    import torch

    x32 = x.to(torch.float32)
    rstd = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    v = x32 * rstd * gamma.to(torch.float32)
    return v * torch.sigmoid(v)
