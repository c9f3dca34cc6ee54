"""The MLA decode op: build (once per configuration) one of the three schedules, validate
inputs, choose the split, run.

:func:`plan` validates a batch and returns an :class:`MLADecodePlan`, whose ``run`` is the fast
path (no host sync, no allocation, capturable in a CUDA graph); :func:`mla_decode` is the simple
call (validates every time, runs a cached plan).
"""
# NOTE: no `from __future__ import annotations` here (kept alike with the kernel modules).

import functools
import math
import threading

from ... import checks, runtime
from . import auto, seesaw, ws
from .common import DEFAULT_SM_COUNT, DIM_NOPE, DIM_PE, MAX_SPLIT, PAGE_SIZE, \
    SUPPORTED_HEADS, choose_num_split, default_softmax_scale


#: Where the auto schedule is built, and how many KV stages fit. One CTA holds Q (64 x 576), one
#: KV page per stage (64 x 576) and P (64 x 64), all 16-bit: 152 KiB with one stage, 224 KiB with
#: two. Hopper and B200-class Blackwell give a block 227 KiB (two stages; sm_90a lowers the GEMMs
#: to wgmma, sm_100a to mma.sync); the A100 164 KiB (one stage); the sm_86 / sm_89 / sm_120 parts
#: 99 KiB, less than one stage: refused with the numbers.
ARCH_STAGES = {"sm_90a": None, "sm_100a": None, "sm_80": 1}
#: "auto": :mod:`.auto` (TileLang derives the warpgroup split and the producer);
#: "ws": hand-written warp specialization, a score and a value warpgroup (:mod:`.ws`);
#: "seesaw": hand-written, both warpgroups score alternate blocks (:mod:`.seesaw`).
SCHEDULES = ("auto", "ws", "seesaw")
#: the hand-written schedules: sm_90a only, one tile configuration each
HAND_WRITTEN = ("ws", "seesaw")
#: what ``schedule=None`` means on sm_90a: the fastest of the three in the recorded results
#: (results/mla.json keeps all three)
DEFAULT_SM90A_SCHEDULE = "seesaw"


class UnsupportedArchError(ValueError):
    """The MLA decode kernel cannot be built for this architecture."""


def stages_for(arch: str, num_stages: int) -> int:
    if arch not in ARCH_STAGES:
        limit = runtime.ARCHS[arch].smem_per_block // 1024 if arch in runtime.ARCHS else None
        raise UnsupportedArchError(
            f"MLA decode needs at least 152 KiB of shared memory per block (Q 64 x 576, one 64 x 576 "
            f"KV page and P 64 x 64, 16-bit); {arch} offers {limit} KiB. It is built for "
            f"{', '.join(ARCH_STAGES)}.")
    cap = ARCH_STAGES[arch]
    return num_stages if cap is None else min(num_stages, cap)


#: TileLang's eager builder is not safe to run from several threads on one Python function
#: (``prebuild`` builds many configurations at once, and every schedule's program goes through
#: :func:`decode_prim_func`): the programs are built one at a time, the slow part -- lowering
#: and nvcc -- still runs in parallel.
_PROGRAM_LOCK = threading.Lock()


def program_for(h_q, dtype, *, split, softmax_scale, schedule, arch, num_stages=2):
    """The ``T.prim_func`` :func:`build_mla_decode` compiles for this configuration (schedule
    already resolved, see :func:`resolve_schedule`)."""
    with _PROGRAM_LOCK:
        if schedule in HAND_WRITTEN:
            program = {"ws": ws.mla_decode_ws_program, "seesaw": seesaw.mla_decode_seesaw_program}[schedule]
            return program(h_q, dtype, split=split, softmax_scale=softmax_scale)
        return auto.mla_decode_program(h_q, dtype, split=split, softmax_scale=softmax_scale,
                                       num_stages=stages_for(arch, num_stages))


@functools.lru_cache(maxsize=None)
def _build(h_q, dtype, split, softmax_scale, num_stages, arch, schedule):
    prog = program_for(h_q, dtype, split=split, softmax_scale=softmax_scale, schedule=schedule, arch=arch,
                       num_stages=num_stages)
    return runtime.compile_kernel(prog, arch=arch)


def resolve_schedule(schedule: str | None, arch: str | None = None) -> str:
    """The schedule :func:`build_mla_decode` uses: ``schedule`` itself, or for ``None``
    :data:`DEFAULT_SM90A_SCHEDULE` on sm_90a and ``"auto"`` elsewhere."""
    if schedule is not None:
        return schedule
    return DEFAULT_SM90A_SCHEDULE if (arch or runtime.current_arch()) == "sm_90a" else "auto"


def build_mla_decode(h_q: int, dtype: str = "float16", *, split: bool = False,
                     softmax_scale: float | None = None, num_stages: int = 2,
                     schedule: str | None = None, arch: str | None = None):
    """Compile (once per configuration and architecture) the MLA decode kernel.

    Batch size, cache size, block-table width and ``num_split`` are dynamic, so the cache key is
    only the configuration: heads, dtype, split or not, scale, schedule, stages and architecture.

    ``schedule``: ``"auto"`` (:func:`.auto.mla_decode_program`: TileLang derives the warpgroup
    split and the producer), ``"ws"`` or ``"seesaw"`` (:mod:`.ws`, :mod:`.seesaw`: hand-written
    warp specialization, sm_90a only). ``None`` picks :data:`DEFAULT_SM90A_SCHEDULE` on sm_90a
    and ``"auto"`` elsewhere. ``num_stages`` (the auto schedule's KV buffers) is capped where
    shared memory is smaller.
    """
    arch = arch or runtime.current_arch()
    stages_for(arch, num_stages)  # a clear error before any compiling
    schedule = resolve_schedule(schedule, arch)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule in HAND_WRITTEN and arch != "sm_90a":
        raise UnsupportedArchError(f"schedule={schedule!r} is written for sm_90a (TMA, wgmma, setmaxnreg), not {arch}")
    scale = float(softmax_scale) if softmax_scale is not None else default_softmax_scale()
    return _build(int(h_q), str(dtype), bool(split), scale, int(num_stages), arch, schedule)


def _precompile_job(job):
    build_mla_decode(**dict(job))


def prebuild(configs, *, arch: str | None = None, workers: int | None = None) -> list:
    """Compile several configurations at once (``configs``: dicts of ``build_mla_decode``
    keyword arguments) with :func:`runtime.compile_parallel`; the kernels land in the same
    lru_cache. Raises the first configuration's error if any failed to build."""
    jobs = [tuple(sorted({"arch": arch, **c}.items())) for c in configs]
    if len(jobs) > 1:      # lowering holds the GIL: compile in processes into the disk cache first
        runtime.precompile(jobs, f"{__name__}:_precompile_job", workers=workers)
    built = runtime.compile_parallel(jobs, lambda job: build_mla_decode(**dict(job)), workers=workers,
                                     verbose=False)
    for job in jobs:
        if isinstance(built[job], Exception):
            raise built[job]
    return [built[job] for job in jobs]


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens,
                    num_split=None, *, device_type: str | None = "mode"):
    """Check every input; raise a ValueError/TypeError that names the problem.

    Shapes, dtypes and the block table are checked first (on any device, so these errors are the
    same everywhere), then the device: ``"mode"`` means where this machine runs kernels (cuda on a
    GPU, cpu in the emulator). Reads ``cache_seqlens`` and ``block_table`` on the host (a sync on
    a GPU). Returns ``(batch, h_q, max_seqlen)``.
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
    # The lengths and page ids, checked where they are (on the GPU, by torch ops queued behind the
    # work that wrote them), read back in one small copy: one host sync per validation.
    lens = cache_seqlens.to(torch.int64)
    pages = (lens + PAGE_SIZE - 1) // PAGE_SIZE
    used = torch.arange(block_table.shape[1], device=block_table.device) < pages[:, None]
    outside = ((block_table < 0) | (block_table >= num_pages)) & used
    stats = torch.stack([lens.min(), lens.max(), outside.sum(),
                         torch.where(outside, block_table, num_pages).min().to(torch.int64),
                         torch.where(outside, block_table, -1).max().to(torch.int64)])
    min_len, max_len, n_outside, lo, hi = stats.tolist()
    if min_len < 1:
        raise ValueError(f"cache_seqlens must be >= 1 (got min {min_len})")
    need = math.ceil(max_len / PAGE_SIZE)
    if block_table.shape[1] < need:
        raise ValueError(
            f"block_table is too short for cache_seqlens: the longest sequence ({max_len} tokens) "
            f"needs {need} pages of {PAGE_SIZE}, but block_table has {block_table.shape[1]} columns")
    # every page a sequence uses must exist in the cache
    if n_outside:
        bad = lo if lo < 0 else hi
        raise ValueError(f"block_table holds page ids outside [0, {num_pages}) for used pages "
                         f"({n_outside} of them, e.g. {bad})")
    if device_type == "mode":
        device_type = runtime.mode().device
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


class MLADecodePlan:
    """Everything one batch shape needs, made once: the compiled kernel, the split, the workspaces.

    ``plan.run(...)`` then does no host sync, allocates nothing (it writes the plan's output
    buffer, or ``out``) and can be captured in a CUDA graph: the way serving systems call decode
    attention every step (FlashInfer's ``plan``/``run``, FlashMLA's ``get_mla_metadata``). Make
    plans with :func:`plan`, which validates the inputs fully; ``run`` checks only what costs no
    sync (shapes, dtypes, devices) and trusts the plan for the rest.
    """

    def __init__(self, *, batch: int, h_q: int, max_seqlen: int, num_pages: int, max_pages: int,
                 dtype, device, num_split: int | None = None, softmax_scale: float | None = None,
                 schedule: str | None = None, arch: str | None = None, program=None):
        import torch

        self.shape = {"batch": batch, "h_q": h_q, "num_pages": num_pages, "max_pages": max_pages}
        self.dtype, self.device = dtype, torch.device(device)
        self.max_seqlen = max_seqlen
        self.num_split = num_split or choose_num_split(batch, h_q, max_seqlen, sm_count=sm_count())
        dtype_name = _dtype_name(torch.empty(0, dtype=dtype))
        if program is not None:   # the caller's factory (a notebook's kernel cell), built for this plan
            arch = arch or runtime.current_arch()
            self.schedule = getattr(program, "__name__", "program")
            self.kernel = runtime.compile_kernel(
                program(h_q, dtype_name, split=self.num_split > 1, softmax_scale=softmax_scale,
                        num_stages=stages_for(arch, 2)), arch=arch)
        else:
            self.schedule = resolve_schedule(schedule, arch)
            self.kernel = build_mla_decode(h_q, dtype_name, split=self.num_split > 1,
                                           softmax_scale=softmax_scale, schedule=self.schedule, arch=arch)
        # The split kernel writes per-split partials; with num_split == 1 the kernel writes the
        # output directly and never touches them, but its signature still has them.
        ns = self.num_split
        self.lse = torch.empty(batch, h_q, ns, dtype=torch.float32, device=self.device)
        self.o_partial = torch.empty(batch, h_q, ns, DIM_NOPE, dtype=torch.float32, device=self.device)
        self.out = torch.empty(batch, h_q, DIM_NOPE, dtype=dtype, device=self.device)
        self._launch = runtime.launcher(self.kernel)   # GPU launch, or the emulator: decided once
        self.device = self.out.device                  # with its index ("cuda" alone has none)
        # What run() compares in one step, in its arguments' order. Where the launcher is a
        # compiled kernel that checks its own arguments (GPU mode: TileLang's generated host code
        # asserts each tensor's dtype, dimensions, strides, device type and id), the inputs'
        # shapes, which also carry what the kernel cannot know (the plan's pages and table width);
        # an argument the kernel refuses is then named by _check. In the emulator, which checks
        # nothing, every input's shape, dtype, device and contiguity.
        self._kernel_checks = self._launch is self.kernel and runtime.checks_its_arguments(self.kernel)
        shapes = tuple(torch.Size(w) for w in self._shapes().values())
        out_shape = torch.Size(self._shapes()["q_nope"])
        if self._kernel_checks:
            self._expected, self._expected_out = shapes, out_shape
        else:
            self._expected = shapes + (dtype,) * 4 + (torch.int32,) * 2 + (self.device,) * 6 + (True,) * 6
            self._expected_out = (out_shape, dtype, self.device, True)
        # The 2-D views of the caches the kernel takes, kept for the cache tensors last run on:
        # [(weak reference to the tensor, its data pointer, its view)] for kv_cache and pe_cache.
        self._flat = [None, None]

    def _shapes(self) -> dict:
        s = self.shape
        return {"q_nope": (s["batch"], s["h_q"], DIM_NOPE), "q_pe": (s["batch"], s["h_q"], DIM_PE),
                "kv_cache": (s["num_pages"], PAGE_SIZE, 1, DIM_NOPE), "pe_cache": (s["num_pages"], PAGE_SIZE, 1, DIM_PE),
                "block_table": (s["batch"], s["max_pages"]), "cache_seqlens": (s["batch"],)}

    def _check(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, out):
        """Every check of ``run``'s inputs against the plan, one by one: raises one line naming
        the first problem (``run`` calls it only where its one-step comparison differs)."""
        import torch

        want = self._shapes()
        given = {"q_nope": q_nope, "q_pe": q_pe, "kv_cache": kv_cache, "pe_cache": pe_cache,
                 "block_table": block_table, "cache_seqlens": cache_seqlens}
        if out is not None:
            want["out"], given["out"] = want["q_nope"], out
        for name, t in given.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if tuple(t.shape) != want[name]:
                raise ValueError(f"this plan was made for {name} of shape {want[name]}, got {tuple(t.shape)}: "
                                 f"make a new plan for this batch")
            if t.device != self.device:
                raise ValueError(f"this plan was made for tensors on {self.device}, got {name} on {t.device}")
            dtype = torch.int32 if name in ("block_table", "cache_seqlens") else self.dtype
            if t.dtype != dtype:
                raise TypeError(f"this plan was made for {name} in {dtype}, got {t.dtype}")
            if not t.is_contiguous():
                raise ValueError(f"{name} must be contiguous (got strides {t.stride()}); call .contiguous() first")

    def _flat_view(self, slot: int, cache, width: int):
        """``cache.view(-1, width)``, remembered for this tensor (and forgotten when it is freed,
        so the plan never keeps a cache's memory alive: the view is taken of a detached alias, as a
        view of the tensor itself would keep the tensor alive through its ``_base``)."""
        import weakref

        view = cache.detach().view(-1, width)
        plan_ref = weakref.ref(self)

        def forget(ref):
            the_plan = plan_ref()
            if the_plan is not None and the_plan._flat[slot] is not None and the_plan._flat[slot][0] is ref:
                the_plan._flat[slot] = None

        self._flat[slot] = (weakref.ref(cache, forget), cache.data_ptr(), view)
        return view

    def run(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *, out=None):
        """Decode attention for inputs of the planned shape; returns the output (the plan's own
        buffer unless ``out`` is given, so a later run overwrites it).

        The inputs are checked in one comparison against the plan's (on the GPU their shapes, the
        compiled kernel checking the rest itself; in the emulator their shapes, dtypes, devices and
        contiguity); where it differs, or the kernel refuses an argument, :meth:`_check` names the
        problem in one line. The caches' 2-D views are made once per cache tensor: reused only
        for the same tensor object at the same data pointer, which with the shape, dtype, device
        and contiguity checked is the same view (an object whose storage was replaced gets a new
        one)."""
        own = out is None
        if own:
            out = self.out
        try:
            if self._kernel_checks:
                ok = (q_nope.shape, q_pe.shape, kv_cache.shape, pe_cache.shape, block_table.shape, cache_seqlens.shape
                      ) == self._expected and (own or out.shape == self._expected_out)
            else:
                ok = (q_nope.shape, q_pe.shape, kv_cache.shape, pe_cache.shape, block_table.shape,
                      cache_seqlens.shape, q_nope.dtype, q_pe.dtype, kv_cache.dtype, pe_cache.dtype,
                      block_table.dtype, cache_seqlens.dtype, q_nope.device, q_pe.device, kv_cache.device,
                      pe_cache.device, block_table.device, cache_seqlens.device, q_nope.is_contiguous(),
                      q_pe.is_contiguous(), kv_cache.is_contiguous(), pe_cache.is_contiguous(),
                      block_table.is_contiguous(), cache_seqlens.is_contiguous()) == self._expected and (
                    own or (out.shape, out.dtype, out.device, out.is_contiguous()) == self._expected_out)
        except AttributeError:      # not a tensor: _check names it
            ok = False
        if not ok:
            self._check(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, None if own else out)
        try:
            flat = self._flat
            kv = flat[0]
            if kv is None or kv[0]() is not kv_cache or kv[1] != kv_cache.data_ptr():
                kv = (None, None, self._flat_view(0, kv_cache, DIM_NOPE))
            pe = flat[1]
            if pe is None or pe[0]() is not pe_cache or pe[1] != pe_cache.data_ptr():
                pe = (None, None, self._flat_view(1, pe_cache, DIM_PE))
            self._launch(q_nope, q_pe, kv[2], pe[2], block_table, cache_seqlens, self.lse, self.o_partial, out)
        except Exception:           # the kernel (or a view) refused an argument: name it in one line
            problem = checks.first_problem(self._check, q_nope, q_pe, kv_cache, pe_cache, block_table,
                                           cache_seqlens, None if own else out)
            if problem is None:
                raise
            raise problem from None
        return out


def plan(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, num_split=None,
         softmax_scale: float | None = None, *, schedule: str | None = None, program=None) -> MLADecodePlan:
    """Validate the inputs (every check, on the host) and make the plan that runs them.

    ``program``: a factory with the signature of :func:`.auto.mla_decode_program` (``(h_q, dtype,
    *, split, softmax_scale, num_stages) -> T.prim_func``), e.g. the one a notebook's kernel cell
    defines; the plan compiles it instead of a package schedule (``schedule`` is then ignored).
    """
    b, h_q, max_len = validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, num_split)
    return MLADecodePlan(batch=b, h_q=h_q, max_seqlen=max_len, num_pages=kv_cache.shape[0],
                         max_pages=block_table.shape[1], dtype=q_nope.dtype, device=q_nope.device,
                         num_split=num_split, softmax_scale=softmax_scale, schedule=schedule, program=program)


_PLANS: dict = {}
#: What :func:`mla_decode` validated last, per (block_table, cache_seqlens) pair: see
#: :func:`_validated_before`. A few entries: a model's layers share one table and one length vector.
_VALIDATED: dict = {}
MAX_VALIDATED = 8


def _state(t):
    """What says a tensor's contents are unchanged: its data pointer and torch's version counter,
    which every in-place torch op (``copy_``, indexing assignment, ``out=``) increments. Inference
    tensors have no version counter: None (never reused)."""
    try:
        return t.data_ptr(), t._version
    except (RuntimeError, AttributeError):
        return None


def _validated_before(block_table, cache_seqlens, num_pages):
    """``(batch, h_q, max_seqlen)`` remembered from a full validation of these very tensors, unchanged
    since (same objects, same storage, same version) and the same number of cache pages; else None."""
    entry = _VALIDATED.get((id(block_table), id(cache_seqlens)))
    if entry is None:
        return None
    bt_ref, sl_ref, states, pages, found = entry
    if bt_ref() is not block_table or sl_ref() is not cache_seqlens or pages != num_pages:
        return None
    now = (_state(block_table), _state(cache_seqlens))
    return found if None not in now and now == states else None


def _remember(block_table, cache_seqlens, num_pages, found) -> None:
    import weakref

    states = (_state(block_table), _state(cache_seqlens))
    if None in states:
        return
    if len(_VALIDATED) >= MAX_VALIDATED:
        _VALIDATED.pop(next(iter(_VALIDATED)))
    _VALIDATED[(id(block_table), id(cache_seqlens))] = (
        weakref.ref(block_table), weakref.ref(cache_seqlens), states, num_pages, found)


@functools.lru_cache(maxsize=1024)
def _chosen_split(batch: int, h_q: int, max_seqlen: int) -> int:
    """:func:`.common.choose_num_split` for this GPU, remembered (it weighs up to 64 candidates:
    tens of microseconds of Python, longer than a short decode kernel)."""
    return choose_num_split(batch, h_q, max_seqlen, sm_count=sm_count())


def mla_decode(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, num_split=None,
               softmax_scale: float | None = None, *, out=None, schedule: str | None = None):
    """MLA decode attention over a paged latent cache, in one call: validates the inputs, then
    runs a cached plan for this shape (see :class:`MLADecodePlan` for the fast path).

    ``q_nope (b, h_q, 512)``, ``q_pe (b, h_q, 64)``, ``kv_cache (num_pages, 64, 1, 512)``,
    ``pe_cache (num_pages, 64, 1, 64)``, ``block_table (b, max_pages) int32``, ``cache_seqlens
    (b,) int32``. ``num_split=None`` chooses the split-KV factor with :func:`.common.choose_num_split`;
    ``softmax_scale=None`` means ``1/sqrt(576)``. Returns ``(b, h_q, 512)`` in q's dtype (a new
    tensor unless ``out`` is given).

    The lengths and page ids are read back from the device to be checked (a host sync), once per
    state of ``block_table`` and ``cache_seqlens``: called again with the same tensors, unchanged
    in torch's eyes (same storage, same version counter), the call checks only what costs no sync
    (shapes, dtypes, devices, as :meth:`MLADecodePlan.run` does) and launches at once. A table
    changed in place by torch is validated again; one written behind torch's back (a custom kernel
    writing through its pointer) is not seen: call :func:`validate_inputs` after such a write.
    """
    import torch

    if num_split is not None and not (isinstance(num_split, int) and 1 <= num_split <= MAX_SPLIT):
        raise ValueError(f"num_split must be None (automatic) or an int in 1..{MAX_SPLIT}, got {num_split!r}")
    try:
        found = _validated_before(block_table, cache_seqlens, kv_cache.shape[0])
        if found is not None and tuple(q_nope.shape[:2]) != found[:2]:
            found = None
    except (AttributeError, TypeError):       # not tensors: validate_inputs names the problem
        found = None
    if found is None:
        found = validate_inputs(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, num_split)
        _remember(block_table, cache_seqlens, kv_cache.shape[0], found)
    b, h_q, max_len = found
    ns = num_split or _chosen_split(b, h_q, max_len)
    key = (b, h_q, kv_cache.shape[0], block_table.shape[1], q_nope.dtype, q_nope.device, ns,
           softmax_scale, schedule, runtime.current_arch())
    the_plan = _PLANS.get(key)
    if the_plan is None:
        the_plan = _PLANS[key] = MLADecodePlan(
            batch=b, h_q=h_q, max_seqlen=max_len, num_pages=kv_cache.shape[0], max_pages=block_table.shape[1],
            dtype=q_nope.dtype, device=q_nope.device, num_split=ns, softmax_scale=softmax_scale, schedule=schedule)
    if out is None:
        out = torch.empty_like(q_nope)
    return the_plan.run(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, out=out)
