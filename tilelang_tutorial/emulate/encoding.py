"""How TileLang 0.1.15 encodes a program in its pre-lowering TIR -- in one place.

Everything the emulator assumes about the IR that ``@T.prim_func`` produces lives here: the op
names of the tile operators and intrinsics, the positional layout of their arguments, the form of
a tile region, and the block annotations that carry the thread count, the mbarrier arrival counts
and the safe values. The code generator only talks to the IR through these decoders, and
``tests/test_emulate.py::test_ir_encoding_guard`` builds small programs and checks every
assumption, so a TileLang upgrade that changes the encoding fails loudly there, naming what changed.

Observed encodings (TileLang 0.1.15, TVM ``tvm.tirx``):

* tile region: ``tl.region(BufferLoad(buf, mins), access_mask, *extents)`` -- one extent per
  buffer dimension; access mask 1 = read, 2 = write, 3 = read-write;
* ``tl.tileop.copy(src_region, dst_region)``, same for ``tma_copy`` (``barrier`` in the call's
  annotations) and ``async_copy``;
* ``tl.tileop.fill(region, value)``;
* ``tl.tileop.reduce(src_region, dst_region, kind: str, dim: int, clear: bool)`` (+ annotations
  ``batch``, ``nan_propagate``); ``clear=False`` combines with the destination's values;
* ``tl.tileop.cumsum`` / ``cummax(src_region, dst_region, dim, reverse)``;
* ``tl.tileop.gemm`` / ``wgmma_gemm`` / ``tcgen05_gemm``: 13 slots ``A, B, C, transpose_A,
  transpose_B, M, N, K, policy, clear_accum, mbar, C_row0, C_col0``; ``mbar`` is the mbarrier
  ``BufferLoad`` (``bar[0]``) of ``mbar=`` or the constant 0 without one; ``T.tcgen05_gemm`` (the
  explicit asynchronous Blackwell form) also carries the annotation ``is_tcgen05 = 1``, a 2-CTA
  MMA ``use_2cta = 1``;
* tensor memory (``T.alloc_tmem``): buffers of scope ``shared.tmem``;
  ``T.tcgen05_mma_arrive(bar)`` = ``tl.tcgen05_mma_arrive(tirx.tvm_access_ptr(type_annotation,
  bar.data, offset, extent, rw_mask))`` (a pointer to the barrier, not a ``BufferLoad``);
* ``tl.tileop.atomicadd|atomicmax|atomicmin(value_region, dst_region)`` (value first);
* element atomics ``tl.atomic_<op>_elem_op(tl.access_ptr(BufferLoad, extent, rw_mask), value
  [, memory_order])``, ``..._ret_elem_op`` returns the previous value;
* mbarriers: buffers of scope ``shared.barrier``; their arrival counts in the enclosing block's
  annotation ``barrier_init = {data_var: [count, ...]}``; ``tirx.ptx_arrive_barrier(bar[i])``,
  ``tl.mbarrier_wait_parity(bar[i], parity)``, ``tl.mbarrier_expect_tx(bar[i], bytes)``;
* ``T.sync_threads()`` = ``tirx.tvm_storage_sync("shared"[, barrier_id, thread_count])``;
* threads: ``tx = tl.launch_thread_idx(axis)`` bindings before the ``tilelang_root`` block, whose
  annotation ``tl.launch_threads`` is ``[x, y, z]``; blocks are ``For`` loops of kind
  ``THREAD_BINDING`` on ``blockIdx.x|y|z``;
* ``T.print`` expands (as a macro) to ``tirx.call_extern("handle", "debug_print_var" |
  "debug_print_buffer_value" | "debug_print_msg", ...)`` inside the program's own loops / ifs;
* ``T.annotate_safe_value`` -> block annotation ``safe_value_map = {data_var: value}``;
  ``T.annotate_layout`` -> ``layout_map``; ``T.use_swizzle`` -> ``AttrStmt``
  ``threadblock_swizzle_pattern``; ``T.Pipelined`` -> serial ``For`` with ``num_stages``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import tilelang  # noqa: F401  (puts TileLang's bundled TVM on the path)
from tvm import tirx as tir
from tvm.ir import Op

from .errors import UnsupportedConstruct

# ----------------------------------------------------------------------------------------------
# op names
# ----------------------------------------------------------------------------------------------
REGION = "tl.region"
ACCESS_PTR = "tl.access_ptr"
LAUNCH_THREAD_IDX = "tl.launch_thread_idx"

COPY_OPS = ("tl.tileop.copy", "tl.tileop.tma_copy", "tl.tileop.async_copy")
FILL = "tl.tileop.fill"
REDUCE = "tl.tileop.reduce"
SCAN_OPS = {"tl.tileop.cumsum": "sum", "tl.tileop.cummax": "max"}
GEMM = "tl.tileop.gemm"
TCGEN05_GEMM = "tl.tileop.tcgen05_gemm"
GEMM_OPS = (GEMM, "tl.tileop.wgmma_gemm", TCGEN05_GEMM)
TRANSPOSE = "tl.tileop.transpose"
TILE_ATOMICS = {"tl.tileop.atomicadd": "add", "tl.tileop.atomicmax": "max", "tl.tileop.atomicmin": "min"}
TILE_OPS = frozenset(COPY_OPS + (FILL, REDUCE, TRANSPOSE) + tuple(SCAN_OPS) + GEMM_OPS + tuple(TILE_ATOMICS))

#: element atomics: op name -> (operation, returns the previous value)
ELEM_ATOMICS = {
    "tl.atomic_add_elem_op": ("add", False), "tl.atomic_add_ret_elem_op": ("add", True),
    "tl.atomic_max_elem_op": ("max", False), "tl.atomic_max_ret_elem_op": ("max", True),
    "tl.atomic_min_elem_op": ("min", False), "tl.atomic_min_ret_elem_op": ("min", True),
    "tl.atomic_or_elem_op": ("or", False),
    "tl.atomic_load_elem_op": ("load", True), "tl.atomic_store_elem_op": ("store", False),
}

MBAR_ARRIVE = "tirx.ptx_arrive_barrier"
MBAR_WAIT = "tl.mbarrier_wait_parity"
MBAR_EXPECT_TX = "tl.mbarrier_expect_tx"
MBAR_ARRIVE_EXPECT_TX = "tirx.ptx_arrive_barrier_expect_tx"
STORAGE_SYNC = "tirx.tvm_storage_sync"
NAMED_BARRIER_ARRIVE = "tl.named_barrier_arrive"
#: T.tcgen05_mma_arrive(bar): tcgen05.commit -- one arrival per warp executing it (elect_one_sync)
#: once the tcgen05 MMAs issued before it have completed
TCGEN05_MMA_ARRIVE = "tl.tcgen05_mma_arrive"
BARRIER_OPS = frozenset({MBAR_ARRIVE, MBAR_WAIT, MBAR_ARRIVE_EXPECT_TX, STORAGE_SYNC, NAMED_BARRIER_ARRIVE,
                         TCGEN05_MMA_ARRIVE})
TVM_ACCESS_PTR = "tirx.tvm_access_ptr"
ADDRESS_OF = "tirx.address_of"

CALL_EXTERN = ("tirx.call_extern", "tirx.call_pure_extern")
PRINT_FUNCS = ("debug_print_var", "debug_print_buffer_value", "debug_print_msg")

#: Constructs that only affect performance (or hardware resource allocation / asynchrony that the
#: sequential emulation makes moot). They are accepted and do nothing. Keep this list in sync with
#: docs/emulator.md ("Performance-only constructs").
NOOP_OPS = frozenset({
    "tl.fence_proxy_async",          # async-proxy fence: stores are visible at once on the CPU
    "tl.set_max_nreg",               # setmaxnreg: register reallocation between warpgroups
    "tl.no_set_max_nreg",
    "tl.annotate_producer_reg_dealloc",
    "tl.annotate_consumer_reg_alloc",
    "tl.wait_wgmma",                 # wgmma results are complete when T.wgmma_gemm returns
    "tl.warpgroup_arrive", "tl.warpgroup_commit_batch", "tl.warpgroup_wait",
    "tl.warpgroup_fence_operand",
    "tl.tma_store_arrive", "tl.tma_store_wait",   # TMA stores complete at once
    MBAR_EXPECT_TX,                  # transaction bytes: copies complete at once
    "tl.ptx_fence_barrier_init",
    "tl.sync_warp",                  # the threads of a warp run in lockstep here
    "tl.prefetch_tma_descriptor",
    "tl.pdl_trigger", "tl.pdl_sync",  # programmatic dependent launch: kernels run in order
    "tirx.tvm_tuple",
    # tcgen05 fences order tensor-core (MMA, tcgen05.ld/st) work against thread barriers; tcgen05
    # operations complete at once here
    "tl.tcgen05_before_thread_sync", "tl.tcgen05_after_thread_sync",
})
# Annotations and attributes that only affect performance. The emulator ignores every AttrStmt
# key (it runs the body), every For-loop annotation and every block annotation it does not read
# (LAUNCH_THREADS, BARRIER_INIT, SAFE_VALUE_MAP below); these lists name the ones TileLang 0.1.15
# emits, for the documentation (docs/emulator.md) and for readers of this file.
#: the AttrStmt key of T.use_swizzle; its value is ``tvm_tuple(device function, panel size)``
SWIZZLE_ATTR = "threadblock_swizzle_pattern"
#: AttrStmt keys: T.use_swizzle, T.annotate_min_blocks_per_sm, ...
HINT_ATTRS = frozenset({SWIZZLE_ATTR, "tl.min_blocks_per_sm", "pragma_unroll_explicit",
                        "pragma_import_c", "async_scope", "compute_scope"})
#: block annotations: T.annotate_layout (layout_map), ...
HINT_BLOCK_ANNOTATIONS = frozenset({"layout_map", "tl.pipeline", "pragma_auto_unroll_max_step"})
#: For-loop annotations: T.Pipelined's num_stages / order / stage / sync / group, T.unroll's factor,
#: T.Parallel's loop layout, T.copy's coalesced width
HINT_LOOP_ANNOTATIONS = frozenset({"num_stages", "tl_pipeline_order", "tl_pipeline_stage", "tl_pipeline_sync",
                                   "tl_pipeline_group", "pragma_unroll_factor", "parallel_loop_layout",
                                   "coalesced_width", "software_pipeline_stage", "software_pipeline_order"})
#: call annotations / slots: T.gemm's policy, k_pack, wg_wait; T.reduce's batch and nan_propagate;
#: T.copy's disable_tma, eviction_policy, coalesced_width; T.tma_copy's barrier (copies complete at once)
HINT_CALL_ANNOTATIONS = frozenset({"policy", "k_pack", "wg_wait", "batch", "nan_propagate", "disable_tma",
                                   "eviction_policy", "coalesced_width", "barrier", "use_tma",
                                   "leader_scope_threads", "memory_order"})

# block annotation keys the emulator reads
LAUNCH_THREADS = "tl.launch_threads"
BARRIER_INIT = "barrier_init"
SAFE_VALUE_MAP = "safe_value_map"

#: Shared memory scopes ("shared.barrier" holds mbarriers, handled separately)
SHARED_SCOPES = frozenset({"shared", "shared.dyn"})
FRAGMENT_SCOPE = "local.fragment"
LOCAL_SCOPES = frozenset({"local", "local.var"})
BARRIER_SCOPE = "shared.barrier"
#: Tensor memory (T.alloc_tmem, Blackwell): per-block like shared memory; the accumulator of
#: TCGEN5MMA (T.gemm with an mbarrier, T.tcgen05_gemm), read back with T.copy (tcgen05.ld)
TMEM_SCOPE = "shared.tmem"


def op_name(call: tir.Call) -> str:
    op = call.op
    return op.name if isinstance(op, Op) else str(op)


def int_value(e, what: str) -> int:
    if isinstance(e, tir.IntImm):
        return int(e.value)
    if isinstance(e, (int, bool)):
        return int(e)
    raise UnsupportedConstruct(what, f"expected a constant integer, got `{e}`")


# ----------------------------------------------------------------------------------------------
# regions
# ----------------------------------------------------------------------------------------------
@dataclass
class Region:
    """A rectangular tile of a buffer: ``buffer[mins[d] : mins[d] + extents[d]]`` per dimension."""
    buffer: tir.Buffer
    mins: list
    extents: list
    access: int = 3

    def describe(self) -> str:
        parts = []
        for m, e in zip(self.mins, self.extents):
            parts.append(f"{m}" if _is_one(e) else f"{m}:{m} + {e}" if not _is_zero(m) else f"0:{e}")
        return f"{self.buffer.name}[{', '.join(parts)}]"


def _is_one(e) -> bool:
    return isinstance(e, tir.IntImm) and int(e.value) == 1


def _is_zero(e) -> bool:
    return isinstance(e, tir.IntImm) and int(e.value) == 0


def decode_region(arg, what: str) -> Region:
    """``tl.region(...)``, a ``BufferRegion``, a ``BufferLoad`` (one element) or a ``Buffer`` (all)."""
    if isinstance(arg, tir.Call) and op_name(arg) == REGION:
        load = arg.args[0]
        if not isinstance(load, tir.BufferLoad):
            raise UnsupportedConstruct(f"{what} region", f"tl.region's first argument is {type(load).__name__}, "
                                       "expected a BufferLoad (did TileLang's region encoding change?)")
        access = int_value(arg.args[1], f"{what} region access mask")
        extents = list(arg.args[2:])
        mins = list(load.indices)
        if len(extents) < len(mins):        # extents of the trailing dims only
            extents = [tir.IntImm("int32", 1)] * (len(mins) - len(extents)) + extents
        if len(extents) != len(mins):
            raise UnsupportedConstruct(f"{what} region", f"{len(extents)} extents for a {len(mins)}-d "
                                       f"buffer {load.buffer.name}")
        return Region(load.buffer, mins, extents, access)
    if isinstance(arg, tir.BufferRegion):
        return Region(arg.buffer, [r.min for r in arg.region], [r.extent for r in arg.region])
    if isinstance(arg, tir.BufferLoad):
        return Region(arg.buffer, list(arg.indices), [tir.IntImm("int32", 1)] * len(arg.indices))
    if isinstance(arg, tir.Buffer):
        return Region(arg, [tir.IntImm("int32", 0)] * len(arg.shape), list(arg.shape))
    raise UnsupportedConstruct(f"{what} operand", f"expected a tile region, got {type(arg).__name__} `{arg}`")


# ----------------------------------------------------------------------------------------------
# tile operators
# ----------------------------------------------------------------------------------------------
def _ann(call: tir.Call) -> dict:
    ann = getattr(call, "annotations", None)
    return dict(ann) if ann is not None else {}


def call_flag(call: tir.Call, key: str) -> bool:
    """An integer flag in a call's annotations (``is_tcgen05``, ``use_2cta``); absent = False."""
    return bool(int(_ann(call).get(key, 0) or 0))


@dataclass
class CopyOp:
    name: str
    src: Region
    dst: Region
    barrier: object = None          # tma_copy: the mbarrier BufferLoad (its phase orders the write: role-race check)


@dataclass
class FillOp:
    dst: Region
    value: object


@dataclass
class ReduceOp:
    src: Region
    dst: Region
    kind: str
    dim: int
    clear: bool
    annotations: dict = field(default_factory=dict)


REDUCE_KINDS = ("sum", "abssum", "max", "min", "absmax", "bitand", "bitor", "bitxor")


@dataclass
class ScanOp:
    name: str
    kind: str
    src: Region
    dst: Region
    dim: int
    reverse: bool


@dataclass
class GemmOp:
    name: str
    A: Region
    B: Region
    C: Region
    transpose_A: bool
    transpose_B: bool
    M: int
    N: int
    K: int
    clear_accum: object             # a PrimExpr (usually a constant bool)
    mbar: object = None             # mbar=: the mbarrier BufferLoad the MMA's completion arrives on
    is_tcgen05: bool = False        # T.tcgen05_gemm: asynchronous, never waits (the caller does)


@dataclass
class TransposeOp:
    src: Region
    dst: Region


@dataclass
class TileAtomicOp:
    kind: str
    src: Region
    dst: Region


def decode_tile_op(call: tir.Call):
    """Decode a ``tl.tileop.*`` call into one of the dataclasses above."""
    name = op_name(call)
    a = list(call.args)
    short = name.rsplit(".", 1)[-1]
    try:
        if name in COPY_OPS:
            _expect(name, a, 2)
            ann = _ann(call)
            for key in ("dst_block", "cluster_mask"):
                if key in ann:
                    raise UnsupportedConstruct(f"T.{short}(..., {key}=...)", "thread-block-cluster copies (multicast, "
                                               "SM-to-SM) reach other blocks, which run one after another here")
            return CopyOp(name, decode_region(a[0], f"T.{short} source"), decode_region(a[1], f"T.{short} destination"),
                          _ann(call).get("barrier"))
        if name == FILL:
            _expect(name, a, 2)
            return FillOp(decode_region(a[0], "T.fill destination"), a[1])
        if name == REDUCE:
            _expect(name, a, 5)
            if not isinstance(a[2], tir.StringImm):
                raise UnsupportedConstruct(name, f"argument 3 (the reduction kind) is {type(a[2]).__name__}, "
                                           "expected a string")
            kind = a[2].value
            if kind not in REDUCE_KINDS:
                raise UnsupportedConstruct(f"T.reduce_{kind}", f"known kinds: {', '.join(REDUCE_KINDS)}")
            return ReduceOp(decode_region(a[0], "T.reduce source"), decode_region(a[1], "T.reduce destination"),
                            kind, int_value(a[3], "T.reduce dim"), bool(int_value(a[4], "T.reduce clear")), _ann(call))
        if name in SCAN_OPS:
            _expect(name, a, 4)
            return ScanOp(name, SCAN_OPS[name], decode_region(a[0], f"T.{short} source"),
                          decode_region(a[1], f"T.{short} destination"), int_value(a[2], f"T.{short} dim"),
                          bool(int_value(a[3], f"T.{short} reverse")))
        if name in GEMM_OPS:
            if len(a) < 13:
                raise UnsupportedConstruct(name, f"{len(a)} arguments, expected the 13 GEMM slots (A, B, C, "
                                           "transpose_A, transpose_B, M, N, K, policy, clear_accum, mbar, C_row0, "
                                           "C_col0)")
            if call_flag(call, "use_2cta"):
                raise UnsupportedConstruct(f"T.{short}(..., use_2cta=True)", "two-CTA GEMMs: the MMA of a CTA "
                                           "pair of a thread-block cluster reads the peer CTA's shared memory, and "
                                           "blocks run one after another here")
            return GemmOp(name, decode_region(a[0], f"T.{short} A"), decode_region(a[1], f"T.{short} B"),
                          decode_region(a[2], f"T.{short} C"), bool(int_value(a[3], "transpose_A")),
                          bool(int_value(a[4], "transpose_B")), int_value(a[5], "M"), int_value(a[6], "N"),
                          int_value(a[7], "K"), a[9], _gemm_mbar(a[10], f"T.{short}"),
                          name == TCGEN05_GEMM or call_flag(call, "is_tcgen05"))
        if name == TRANSPOSE:
            _expect(name, a, 2)
            return TransposeOp(decode_region(a[0], "T.transpose source"),
                               decode_region(a[1], "T.transpose destination"))
        if name in TILE_ATOMICS:
            _expect(name, a, 2)
            return TileAtomicOp(TILE_ATOMICS[name], decode_region(a[0], f"T.{short} value"),
                                decode_region(a[1], f"T.{short} destination"))
    except UnsupportedConstruct:
        raise
    except Exception as e:  # an argument of an unexpected type: the encoding changed
        raise UnsupportedConstruct(name, f"could not decode its arguments ({type(e).__name__}: {e}); "
                                   "did TileLang's encoding of this op change?") from e
    raise UnsupportedConstruct(name, "this tile operator has no CPU emulation")


def _gemm_mbar(arg, what: str):
    """The ``mbar`` slot: the barrier's ``BufferLoad``, or None for the placeholder constant 0."""
    if isinstance(arg, tir.BufferLoad):
        return arg
    if isinstance(arg, tir.BufferRegion):     # one element, if TileLang ever passes the region itself
        if all(_is_one(r.extent) for r in arg.region):
            return tir.BufferLoad(arg.buffer, [r.min for r in arg.region])
    if isinstance(arg, tir.IntImm) and int(arg.value) == 0:
        return None
    raise UnsupportedConstruct(f"{what}(..., mbar=...)", f"slot 10 (mbar) is `{arg}`, expected an mbarrier element "
                               "such as bar[0] or the placeholder 0 (did TileLang's GEMM encoding change?)")


def _expect(name, args, n):
    if len(args) != n:
        raise UnsupportedConstruct(name, f"{len(args)} arguments, expected {n} (did TileLang's encoding change?)")


def decode_access_ptr(arg, what: str) -> tir.BufferLoad:
    """``tl.access_ptr(BufferLoad, extent, rw_mask)`` (or a bare BufferLoad) -> the BufferLoad."""
    if isinstance(arg, tir.Call) and op_name(arg) == ACCESS_PTR:
        load = arg.args[0]
        if isinstance(load, tir.BufferLoad):
            return load
    if isinstance(arg, tir.BufferLoad):
        return arg
    raise UnsupportedConstruct(what, f"expected tl.access_ptr(buffer[index], ...) as the destination, got `{arg}`")


def decode_barrier_pointer(arg, what: str):
    """An mbarrier operand given as a pointer: ``(BufferLoad, None, None)`` for ``bar[i]``,
    ``tl.access_ptr(bar[i], ...)`` or ``address_of(bar[i])``; ``(None, data_var, offset)`` for
    ``tvm_access_ptr(type_annotation, bar.data, offset, extent, rw_mask)``."""
    if isinstance(arg, tir.BufferLoad):
        return arg, None, None
    if isinstance(arg, tir.Call):
        name = op_name(arg)
        if name in (ACCESS_PTR, ADDRESS_OF) and arg.args and isinstance(arg.args[0], tir.BufferLoad):
            return arg.args[0], None, None
        if name == TVM_ACCESS_PTR and len(arg.args) == 5 and isinstance(arg.args[1], tir.Var):
            return None, arg.args[1], arg.args[2]
    raise UnsupportedConstruct(what, f"expected an mbarrier (bar[i] or a pointer to it), got `{arg}`")


def block_threads(block: tir.SBlock):
    """``[x, y, z]`` from ``tl.launch_threads``, or None."""
    ann = block.annotations
    if ann is not None and LAUNCH_THREADS in ann:
        vals = [int(v) for v in ann[LAUNCH_THREADS]]
        return (vals + [1, 1, 1])[:3]
    return None
