"""The MLA decode op: build (once per configuration) one of the three schedules, validate
inputs, choose the split, and launch.

:func:`mla_decode` is the simple call; :class:`MLADecodeLaunch` is a prepared launch (compiled
kernel + workspaces, no checks, no host sync) that benchmarks time directly.
"""
# NOTE: no `from __future__ import annotations` here (kept alike with the kernel modules).

import functools
import math
import threading

from ... import runtime
from . import auto, seesaw, ws
from .common import DEFAULT_CONFIG, DEFAULT_SM_COUNT, DIM_NOPE, DIM_PE, MAX_SPLIT, PAGE_SIZE, \
    SUPPORTED_HEADS, choose_num_split, default_softmax_scale


#: Architectures this kernel is built for. sm_90a gets the warp-specialized TMA + wgmma design;
#: sm_80 / sm_90 (no 'a': no wgmma/setmaxnreg) get the same program lowered to mma.sync and
#: cp.async with one KV buffer (A100's 164 KiB of shared memory holds Q + one 64-row block).
#: sm_86 / sm_89 have at most 99 KiB of shared memory per block, less than Q + one KV block
#: (152 KiB), so they are refused with a clear error.
ARCH_STAGES = {"sm_90a": None, "sm_90": 1, "sm_80": 1}
#: "auto": :mod:`.auto` (TileLang derives the warpgroup split and the producer);
#: "ws": hand-written warp specialization, a score and a value warpgroup (:mod:`.ws`);
#: "seesaw": hand-written, both warpgroups score alternate blocks (:mod:`.seesaw`).
SCHEDULES = ("auto", "ws", "seesaw")
#: the hand-written schedules: sm_90a only, one tile configuration each
HAND_WRITTEN = ("ws", "seesaw")
#: what ``schedule=None`` means on sm_90a with the default tile knobs (fastest on the H200 at
#: the b = 128 points, level elsewhere: see results/mla.json, which keeps all three)
DEFAULT_SM90A_SCHEDULE = "seesaw"


class UnsupportedArchError(ValueError):
    """The MLA decode kernel cannot be built for this architecture."""


def stages_for(arch: str, num_stages: int) -> int:
    if arch not in ARCH_STAGES:
        raise UnsupportedArchError(
            f"MLA decode needs >= 152 KiB of shared memory per block (Q 64x576 + one 64x576 KV "
            f"block); {arch} offers at most 99 KiB. Supported: {', '.join(ARCH_STAGES)} "
            f"(sm_90a is the warp-specialized Hopper design).")
    cap = ARCH_STAGES[arch]
    return num_stages if cap is None else min(num_stages, cap)


#: TileLang's eager builder is not safe to run from several threads on one Python function
#: (``prebuild`` builds many configurations at once, and every schedule's program goes through
#: :func:`decode_prim_func`): the programs are built one at a time, the slow part -- lowering
#: and nvcc -- still runs in parallel.
_PROGRAM_LOCK = threading.Lock()


#: The tile knobs of the ``auto`` schedule (the hand-written ones have one fixed configuration).
TILE_KNOBS = ("block_N", "num_stages", "defer_sum", "reduce_batch", "qk_wait")
DEFAULT_KNOBS = {"block_N": 64, "num_stages": 2, "defer_sum": True, "reduce_batch": 2, "qk_wait": None}


def program_for(h_q, dtype, *, split, softmax_scale, schedule, arch, block_N=64, num_stages=2,
                defer_sum=True, reduce_batch=2, qk_wait=None):
    """The ``T.prim_func`` :func:`build_mla_decode` compiles for this configuration (schedule
    already resolved, see :func:`resolve_schedule`)."""
    if schedule in HAND_WRITTEN:
        program = {"ws": ws.mla_decode_ws_program, "seesaw": seesaw.mla_decode_seesaw_program}[schedule]
        with _PROGRAM_LOCK:
            return program(h_q, dtype, split=split, softmax_scale=softmax_scale)
    if qk_wait is None:  # the faster form where the hardware has asynchronous wgmma
        qk_wait = "single" if arch == "sm_90a" else "each"
    with _PROGRAM_LOCK:
        return auto.mla_decode_program(h_q, dtype, split=split, softmax_scale=softmax_scale,
                                       block_N=block_N, num_stages=stages_for(arch, num_stages),
                                       defer_sum=defer_sum, reduce_batch=reduce_batch, qk_wait=qk_wait)


@functools.lru_cache(maxsize=None)
def _build(h_q, dtype, split, softmax_scale, block_N, num_stages, defer_sum, reduce_batch, arch,
           qk_wait, schedule):
    prog = program_for(h_q, dtype, split=split, softmax_scale=softmax_scale, schedule=schedule, arch=arch,
                       block_N=block_N, num_stages=num_stages, defer_sum=defer_sum,
                       reduce_batch=reduce_batch, qk_wait=qk_wait)
    return runtime.compile_kernel(prog, arch=arch)


def resolve_schedule(schedule: str | None, arch: str | None = None, **knobs) -> str:
    """The schedule :func:`build_mla_decode` uses: ``schedule`` itself, or for ``None``
    :data:`DEFAULT_SM90A_SCHEDULE` on sm_90a with default tile knobs and ``"auto"`` otherwise."""
    if schedule is not None:
        return schedule
    arch = arch or runtime.current_arch()
    default_knobs = all(knobs.get(k, v) == v for k, v in DEFAULT_KNOBS.items())
    return DEFAULT_SM90A_SCHEDULE if arch == "sm_90a" and default_knobs else "auto"


def build_mla_decode(h_q: int, dtype: str = "float16", *, split: bool = False,
                     softmax_scale: float | None = None, block_N: int = DEFAULT_CONFIG["block_N"],
                     num_stages: int = DEFAULT_CONFIG["num_stages"], defer_sum: bool = True,
                     reduce_batch: int = 2, qk_wait: str | None = None,
                     schedule: str | None = None, arch: str | None = None):
    """Compile (once per configuration and architecture) the MLA decode kernel.

    Batch size, cache size, block-table width and ``num_split`` are dynamic, so the cache key is
    only the configuration: heads, dtype, split or not, scale, schedule and the tile knobs.

    ``schedule``: ``"auto"`` (:func:`.auto.mla_decode_program`: TileLang derives the warpgroup
    split and the producer), ``"ws"`` or ``"seesaw"`` (:mod:`.ws`, :mod:`.seesaw`: hand-written warp specialization, sm_90a only, one tile
    configuration). ``None`` picks :data:`DEFAULT_SM90A_SCHEDULE` on sm_90a when the tile knobs
    are at their defaults and ``"auto"`` otherwise (``results/mla.json`` records all three).
    """
    arch = arch or runtime.current_arch()
    stages_for(arch, num_stages)  # a clear error before any compiling
    default_knobs = (block_N, num_stages, defer_sum, reduce_batch, qk_wait) == (64, 2, True, 2, None)
    schedule = resolve_schedule(schedule, arch, block_N=block_N, num_stages=num_stages,
                                defer_sum=defer_sum, reduce_batch=reduce_batch, qk_wait=qk_wait)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule in HAND_WRITTEN:
        if arch != "sm_90a":
            raise UnsupportedArchError(f"schedule={schedule!r} is written for sm_90a (TMA, wgmma, setmaxnreg), not {arch}")
        if not default_knobs:
            raise ValueError(f"schedule={schedule!r} has one fixed tile configuration; the tile knobs "
                             "(block_N, num_stages, defer_sum, reduce_batch, qk_wait) belong to schedule='auto'")
    if qk_wait is None:  # the faster schedule where the hardware has asynchronous wgmma
        qk_wait = "single" if arch == "sm_90a" else "each"
    if qk_wait != "each" and arch != "sm_90a":
        raise UnsupportedArchError(f"qk_wait='single' uses asynchronous wgmma: sm_90a only, not {arch}")
    scale = float(softmax_scale) if softmax_scale is not None else default_softmax_scale()
    return _build(int(h_q), str(dtype), bool(split), scale, int(block_N), int(num_stages),
                  bool(defer_sum), int(reduce_batch), arch, str(qk_wait), schedule)


def prebuild(configs, *, arch: str | None = None, workers: int | None = None) -> list:
    """Compile several configurations at once (``configs``: dicts of ``build_mla_decode``
    keyword arguments) with :func:`runtime.compile_parallel`; the kernels land in the same
    lru_cache. Raises the first configuration's error if any failed to build."""
    jobs = [tuple(sorted({"arch": arch, **c}.items())) for c in configs]
    built = runtime.compile_parallel(jobs, lambda job: build_mla_decode(**dict(job)), workers=workers,
                                     verbose=False)
    for job in jobs:
        if isinstance(built[job], Exception):
            raise built[job]
    return [built[job] for job in jobs]


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                    num_split=None, *, device_type: str | None = "cuda"):
    """Check every input; raise a ValueError/TypeError that names the problem.

    Shapes, dtypes and the block table are checked first (on any device, so these errors are
    testable without a GPU), then the device. Returns ``(batch, h_q, max_seqlen)``.
    """
    import torch

    from ... import checks

    act = (torch.float16, torch.bfloat16)
    checks.check_tensor(q_nope, "q_nope", dtype=act, device_type=None, ndim=3)
    b, h_q, dv = q_nope.shape
    if dv != DIM_NOPE:
        raise ValueError(f"q_nope must be (batch, heads, {DIM_NOPE}); got last dimension {dv}")
    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"q_nope has {h_q} heads; supported head counts are {SUPPORTED_HEADS}")
    if b < 1:
        raise ValueError("batch must be >= 1")
    checks.check_tensor(q_pe, "q_pe", dtype=q_nope.dtype, device_type=None, ndim=3,
                        shape=(b, h_q, DIM_PE))
    checks.check_tensor(kv_cache, "kv_cache", dtype=q_nope.dtype, device_type=None, ndim=4,
                        shape=(None, PAGE_SIZE, 1, DIM_NOPE))
    num_pages = kv_cache.shape[0]
    checks.check_tensor(pe_cache, "pe_cache", dtype=q_nope.dtype, device_type=None, ndim=4,
                        shape=(num_pages, PAGE_SIZE, 1, DIM_PE))
    checks.check_tensor(block_table, "block_table", dtype=torch.int32, device_type=None, ndim=2,
                        shape=(b, None))
    checks.check_tensor(cache_seqlens, "cache_seqlens", dtype=torch.int32, device_type=None,
                        ndim=1, shape=(b,))
    if num_pages < 1:
        raise ValueError("kv_cache has no pages")
    if num_split is not None and (not isinstance(num_split, int) or not 1 <= num_split <= MAX_SPLIT):
        raise ValueError(f"num_split must be None (automatic) or an int in 1..{MAX_SPLIT}, got {num_split!r}")
    devices = {t.device for t in (q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens)}
    if len(devices) > 1:
        raise ValueError(f"all inputs must be on one device, got {sorted(map(str, devices))}")
    lens = cache_seqlens.detach().to("cpu")
    if int(lens.min()) < 1:
        raise ValueError(f"cache_seqlens must be >= 1 (got min {int(lens.min())})")
    max_len = int(lens.max())
    need = math.ceil(max_len / PAGE_SIZE)
    if block_table.shape[1] < need:
        raise ValueError(
            f"block_table is too short for cache_seqlens: the longest sequence ({max_len} tokens) "
            f"needs {need} pages of {PAGE_SIZE}, but block_table has {block_table.shape[1]} columns")
    # every page a sequence uses must exist in the cache
    used = torch.arange(block_table.shape[1]) < ((lens + PAGE_SIZE - 1) // PAGE_SIZE)[:, None]
    bt = block_table.detach().to("cpu")[used]
    if bt.numel() and (int(bt.min()) < 0 or int(bt.max()) >= num_pages):
        raise ValueError(f"block_table holds page ids outside [0, {num_pages}) for used pages "
                         f"(min {int(bt.min())}, max {int(bt.max())})")
    if device_type is not None:
        for name, t in (("q_nope", q_nope), ("q_pe", q_pe), ("kv_cache", kv_cache),
                        ("pe_cache", pe_cache), ("block_table", block_table),
                        ("cache_seqlens", cache_seqlens)):
            checks.check_tensor(t, name, device_type=device_type)
    return b, h_q, max_len


def sm_count() -> int:
    """SMs of the visible GPU (132 on an H100/H200 SXM), or that default without a GPU."""
    if runtime.gpu_available():
        import torch

        return torch.cuda.get_device_properties(0).multi_processor_count
    return DEFAULT_SM_COUNT


class MLADecodeLaunch:
    """A prepared launch: compiled kernel + preallocated workspaces, no checks, no host sync.

    ``mla_decode`` validates and then uses one of these; benchmarks time ``launch()`` directly
    (like serving systems, which plan the split once per batch step).
    """

    def __init__(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *,
                 num_split: int, softmax_scale: float | None = None, out=None, **config):
        import torch

        b, h_q, _ = q_nope.shape
        self.num_split = num_split
        config = dict(config)
        knobs = {k: v for k, v in config.items() if k not in ("schedule", "arch")}
        config["schedule"] = resolve_schedule(config.get("schedule"), config.get("arch"), **knobs)
        self.schedule = config["schedule"]
        self.kernel = build_mla_decode(h_q, _dtype_name(q_nope), split=num_split > 1,
                                       softmax_scale=softmax_scale, **config)
        dev = q_nope.device
        self.lse = torch.empty(b, h_q, num_split, dtype=torch.float32, device=dev)
        # With num_split == 1 the kernel writes Output directly and never touches lse or
        # o_partial, but the signature still has them: (b, h_q, 1[, 512]) fp32.
        self.o_partial = torch.empty(b, h_q, num_split if num_split > 1 else 1, DIM_NOPE,
                                     dtype=torch.float32, device=dev)
        self.out = out if out is not None else torch.empty_like(q_nope)
        self.args = (q_nope, q_pe, kv_cache.view(-1, DIM_NOPE), pe_cache.view(-1, DIM_PE),
                     block_table, cache_seqlens, self.lse, self.o_partial, self.out)

    def launch(self):
        self.kernel(*self.args)
        return self.out


def mla_decode(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, num_split=None,
               softmax_scale: float | None = None, *, out=None, **config):
    """MLA decode attention over a paged latent cache (see the module docstring for shapes).

    ``num_split=None`` chooses the split-KV factor with :func:`choose_num_split`;
    ``softmax_scale=None`` means ``1/sqrt(576)``. Returns ``(batch, h_q, 512)`` in q's dtype.
    """
    b, h_q, max_len = validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table,
                                      cache_seqlens, num_split)
    runtime.require_gpu("mla_decode")
    if num_split is None:
        num_split = choose_num_split(b, h_q, max_len, sm_count=sm_count(),
                                     block_N=config.get("block_N", DEFAULT_CONFIG["block_N"]))
    return MLADecodeLaunch(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                           num_split=num_split, softmax_scale=softmax_scale, out=out,
                           **config).launch()
