"""What TileLang's layout inference decided, as data you can print, test and plot.

A TileLang kernel names *tiles* (``T.alloc_fragment``, ``T.alloc_shared``); it rarely says who
owns which element or where an element lives.  The ``LayoutInference`` pass decides that:

* a **fragment** (registers) gets a :class:`tilelang.layout.Fragment`: element ``(i, j)`` ->
  (thread, register slot inside that thread), possibly replicated over several threads;
* a **shared** buffer may get a :class:`tilelang.layout.Layout`: element ``(i, j)`` -> physical
  position, which is how swizzles against bank conflicts are expressed.

This module runs TileLang's *real* CUDA lowering pipeline (the one ``tilelang.compile`` runs, with
the same target and pass configs) up to and including layout inference, and stops there: no CUDA
code is generated and nvcc never runs, so it is cheap and works without a GPU.  The layouts are
then evaluated for every element with numpy, giving plain tables (:class:`LayoutInfo`) that tests
can assert on and plots can draw.

It also computes shared-memory bank conflicts from a layout (:func:`bank_conflicts`) for the two
access patterns that matter most in GEMM-like kernels (:func:`row_reads`, :func:`ldmatrix_reads`).

Entry points: :func:`infer_layouts`, :func:`layouts_text`, :func:`fragment_info`,
:func:`shared_info`, :func:`plot_fragment`, :func:`plot_shared_layout`, :func:`bank_conflicts`,
:func:`plot_bank_conflicts`, :func:`layout_picker`.
"""
from __future__ import annotations

import contextlib
import functools
import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import runtime

#: Shared memory on every architecture the tutorial targets: 32 banks of 4-byte words.
NUM_BANKS = 32
BANK_BYTES = 4
WARP_SIZE = 32
WARPGROUP_SIZE = 128

_LOWER_LOCK = threading.Lock()


# ---------------------------------------------------------------------------------------------
# Evaluating layout expressions for every element at once
# ---------------------------------------------------------------------------------------------


def _eval_expr(expr: Any, env: dict[str, np.ndarray]) -> np.ndarray:
    """Evaluate an integer TIR expression with numpy arrays bound to its variables.

    Layout expressions are small trees of ``+ - * // %`` (and occasionally bit operations); a
    vectorised evaluation over the whole tile is thousands of times faster than mapping each
    element through TVM one by one.  Unknown node types raise ``NotImplementedError`` and the
    caller falls back to TVM's own per-element mapping.
    """
    from tvm import tirx

    def ev(e):
        if isinstance(e, (int, np.integer)):
            return np.int64(e)
        if isinstance(e, tirx.IntImm):
            return np.int64(e.value)
        if isinstance(e, tirx.Var):
            if e.name not in env:
                raise NotImplementedError(f"unbound variable {e.name}")
            return env[e.name]
        if isinstance(e, tirx.Cast):
            return ev(e.value)
        binary = {
            tirx.Add: operator.add,
            tirx.Sub: operator.sub,
            tirx.Mul: operator.mul,
            tirx.FloorDiv: np.floor_divide,
            tirx.FloorMod: np.mod,
            tirx.Min: np.minimum,
            tirx.Max: np.maximum,
            tirx.EQ: np.equal,
            tirx.NE: np.not_equal,
            tirx.LT: np.less,
            tirx.LE: np.less_equal,
            tirx.GT: np.greater,
            tirx.GE: np.greater_equal,
            tirx.And: np.logical_and,
            tirx.Or: np.logical_or,
        }
        for cls, fn in binary.items():
            if type(e) is cls:
                return fn(ev(e.a), ev(e.b))
        if type(e) in (tirx.Div, tirx.Mod):
            # Truncating division; layout indices are non-negative so it equals floor division.
            a, b = ev(e.a), ev(e.b)
            return np.floor_divide(a, b) if type(e) is tirx.Div else np.mod(a, b)
        if isinstance(e, tirx.Not):
            return np.logical_not(ev(e.a))
        if isinstance(e, tirx.Select):
            return np.where(ev(e.condition), ev(e.true_value), ev(e.false_value))
        if isinstance(e, tirx.Call):
            name = getattr(e.op, "name", "")
            calls = {
                "tir.bitwise_xor": np.bitwise_xor,
                "tir.bitwise_and": np.bitwise_and,
                "tir.bitwise_or": np.bitwise_or,
                "tir.shift_right": np.right_shift,
                "tir.shift_left": np.left_shift,
            }
            if name in calls and len(e.args) == 2:
                return calls[name](ev(e.args[0]), ev(e.args[1]))
            if name == "tir.if_then_else":
                return np.where(ev(e.args[0]), ev(e.args[1]), ev(e.args[2]))
        raise NotImplementedError(f"cannot evaluate {type(e).__name__}: {e}")

    return np.asarray(ev(expr), dtype=np.int64)


def _grid(shape: Sequence[int]) -> list[np.ndarray]:
    return list(np.meshgrid(*[np.arange(int(s), dtype=np.int64) for s in shape], indexing="ij"))


def _eval_on_grid(exprs: Sequence[Any], var_names: Sequence[str], shape: Sequence[int], slow: Callable):
    """Evaluate ``exprs`` for every index of ``shape``; fall back to ``slow(index) -> ints``."""
    grids = _grid(shape)
    env = dict(zip(var_names, grids))
    try:
        return [np.broadcast_to(_eval_expr(e, env), tuple(shape)).copy() for e in exprs]
    except NotImplementedError:
        out = [np.zeros(tuple(shape), dtype=np.int64) for _ in exprs]
        for idx in np.ndindex(*shape):
            vals = slow(list(idx))
            for k, v in enumerate(vals):
                out[k][idx] = int(v)
        return out


# ---------------------------------------------------------------------------------------------
# The data
# ---------------------------------------------------------------------------------------------


@dataclass
class LayoutInfo:
    """One buffer's inferred layout, plus the plain tables derived from it.

    Fragments (``kind == "fragment"``):
      ``owner[r, i, j]`` is the thread (``threadIdx.x``, i.e. already offset by ``thread_offset``)
      holding element ``(i, j)`` in replica ``r``; ``register[r, i, j]`` its slot in that thread's
      local array.  ``replicate`` > 1 means every element is held by that many threads.
    Shared buffers (``kind == "shared"``):
      ``offset[i, j]`` is the element's physical position (in elements) inside the buffer, so
      ``offset * elem_bytes`` is its byte address relative to the buffer start.
    """

    name: str
    kind: str  # "fragment" | "shared" | "layout"
    scope: str
    shape: tuple[int, ...]
    dtype: str
    layout: Any
    thread_expr: str = ""
    index_expr: str = ""
    # fragments
    threads: int | None = None  # extent of the fragment's thread dimension
    thread_offset: int = 0  # threadIdx.x of the fragment's thread 0 (producer warps come first)
    replicate: int = 1
    owner: np.ndarray | None = None
    register: np.ndarray | None = None
    registers_per_thread: int | None = None
    # shared
    offset: np.ndarray | None = None
    output_shape: tuple[int, ...] = ()
    # the kernel it came from
    launch_threads: int | None = None
    arch: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def elem_bytes(self) -> int:
        from tvm import DataType

        return max(1, DataType(self.dtype).bits // 8)

    # -- fragment helpers -------------------------------------------------------------------
    def _require_fragment(self):
        if self.kind != "fragment":
            raise ValueError(f"{self.name} is a {self.kind} layout, not a fragment")

    @property
    def thread_ids(self) -> np.ndarray:
        """The sorted distinct threads that own at least one element."""
        self._require_fragment()
        return np.unique(self.owner)

    def owners(self, *index: int) -> list[int]:
        """All threads holding element ``index`` (one per replica)."""
        self._require_fragment()
        return sorted(int(t) for t in self.owner[(slice(None), *index)].ravel())

    def elements_per_thread(self) -> dict[int, int]:
        self._require_fragment()
        t, c = np.unique(self.owner, return_counts=True)
        return {int(a): int(b) for a, b in zip(t, c)}

    def warp_of(self) -> np.ndarray:
        """Warp index (relative to the fragment's first thread) of replica 0's owner."""
        self._require_fragment()
        return (self.owner[0] - self.thread_offset) // WARP_SIZE

    def warpgroup_of(self) -> np.ndarray:
        """Warpgroup index (relative to the fragment's first thread) of replica 0's owner."""
        self._require_fragment()
        return (self.owner[0] - self.thread_offset) // WARPGROUP_SIZE

    def region_of(self, group: np.ndarray, value: int) -> tuple[tuple[int, int], ...]:
        """Bounding box ``((row_lo, row_hi), (col_lo, col_hi))`` of the elements with ``group == value``."""
        idx = np.nonzero(group == value)
        return tuple((int(a.min()), int(a.max()) + 1) for a in idx)

    def split_axis(self, unit: int = WARPGROUP_SIZE) -> str:
        """How groups of ``unit`` threads divide a 2-D fragment: ``"columns"``, ``"rows"``,
        ``"both"`` or ``"none"`` (a single group owns everything)."""
        self._require_fragment()
        group = (self.owner[0] - self.thread_offset) // unit
        if len(self.shape) != 2 or len(np.unique(group)) == 1:
            return "none"
        rows_const = all(len(np.unique(group[i, :])) == 1 for i in range(self.shape[0]))
        cols_const = all(len(np.unique(group[:, j])) == 1 for j in range(self.shape[1]))
        if cols_const and not rows_const:
            return "columns"
        if rows_const and not cols_const:
            return "rows"
        return "both"

    # -- shared helpers ---------------------------------------------------------------------
    def offset_2d(self) -> np.ndarray:
        """The offsets of the last two dimensions (first pipeline stage / leading index 0),
        relative to that 2-D slice's first element."""
        if self.offset is None:
            raise ValueError(f"{self.name} has no offset table")
        off = self.offset
        while off.ndim > 2:
            off = off[0]
        if off.ndim == 1:
            off = off[None, :]
        return off - off.min()

    def summary(self) -> str:
        lines = [f"{self.name}: {self.kind} ({self.scope}) {self.dtype} shape {list(self.shape)}"]
        if self.kind == "fragment":
            lo = self.thread_offset
            lines.append(
                f"  threads {self.threads} (threadIdx.x {lo}..{lo + self.threads - 1}), "
                f"{self.registers_per_thread} registers/thread, replicate {self.replicate}"
            )
            lines.append(f"  thread = {self.thread_expr}" + (f"  (+{lo})" if lo else ""))
            lines.append(f"  local  = {self.index_expr}")
        else:
            lines.append(f"  physical shape {list(self.output_shape)}")
            lines.append(f"  index  = {self.index_expr}")
        if self.launch_threads is not None:
            lines.append(f"  kernel launches {self.launch_threads} threads per block")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def __repr__(self) -> str:  # keep notebook output short
        return f"<LayoutInfo {self.name}: {self.kind} {list(self.shape)} {self.dtype}>"


def _fmt(expr) -> str:
    if isinstance(expr, (list, tuple)) or type(expr).__name__ == "Array":
        items = [str(e) for e in expr]
        return items[0] if len(items) == 1 else "(" + ", ".join(items) + ")"
    return str(expr)


def _var_names(layout) -> list[str]:
    return [getattr(v, "var", v).name for v in layout.get_forward_vars()]


def fragment_info(fragment, name: str = "fragment", dtype: str = "float32", **extra) -> LayoutInfo:
    """Tabulate a :class:`tilelang.layout.Fragment` (inferred or hand-made)."""
    from tilelang.layout import Fragment

    if not isinstance(fragment, Fragment):
        raise TypeError(f"expected a tilelang Fragment, got {type(fragment).__name__}")
    shape = tuple(int(s) for s in fragment.get_input_shape())
    rep = int(fragment.replicate_size)
    names = _var_names(fragment)
    full_shape = (rep, *shape) if rep > 1 else shape
    if rep > 1 and len(names) == len(shape) + 1:
        var_names = names  # replicate variable first, as TileLang orders it
    else:
        var_names = names[-len(shape):]
    thread_e = fragment.forward_thread
    index_e = list(fragment.forward_index)

    def slow(idx):
        t = fragment.map_forward_thread(idx)
        return [int(t[0]), *[int(v) for v in fragment.map_forward_index(idx)]]

    tables = _eval_on_grid([thread_e, *index_e], var_names, full_shape, slow)
    owner, regs = tables[0], tables[1:]
    if rep == 1:
        owner, regs = owner[None], [r[None] for r in regs]
    # Flatten a multi-dimensional local index into one register number.
    out_shape = [int(s) for s in fragment.get_output_shape()]
    reg = np.zeros_like(owner)
    for r, size in zip(regs, out_shape[-len(regs):] if regs else []):
        reg = reg * size + r
    tr = getattr(fragment, "thread_range", None)
    offset = int(tr.min) if tr is not None else 0
    nthreads = int(fragment.get_thread_size())
    info = LayoutInfo(
        name=name,
        kind="fragment",
        scope="local.fragment",
        shape=shape,
        dtype=str(dtype),
        layout=fragment,
        thread_expr=str(thread_e),
        index_expr=_fmt(index_e),
        threads=nthreads,
        thread_offset=offset,
        replicate=rep,
        owner=owner + offset,
        register=reg,
        registers_per_thread=int(np.prod(out_shape)) if out_shape else 1,
        output_shape=tuple(out_shape),
        **extra,
    )
    return info


def shared_info(layout, name: str = "shared", dtype: str = "float16", scope: str = "shared.dyn", **extra) -> LayoutInfo:
    """Tabulate a :class:`tilelang.layout.Layout` of a shared buffer: element -> physical offset."""
    shape = tuple(int(s) for s in layout.get_input_shape())
    names = _var_names(layout)
    lin = layout.get_linearized_forward_index()
    out_shape = tuple(int(s) for s in layout.get_output_shape())

    def slow(idx):
        vals = [int(v) for v in layout.map_forward_index(idx)]
        flat = 0
        for v, s in zip(vals, out_shape):
            flat = flat * s + v
        return [flat]

    (offset,) = _eval_on_grid([lin], names, shape, slow)
    return LayoutInfo(
        name=name,
        kind="shared",
        scope=scope,
        shape=shape,
        dtype=str(dtype),
        layout=layout,
        index_expr=_fmt(layout.index),
        offset=offset,
        output_shape=out_shape,
        **extra,
    )


def row_major_info(shape: Sequence[int], name: str = "row-major", dtype: str = "float16", pad: int = 0) -> LayoutInfo:
    """A plain (optionally padded) row-major shared tile, for comparisons."""
    import tilelang.layout as L

    rows, cols = int(shape[-2]), int(shape[-1])
    layout = L.Layout([rows, cols], lambda i, j: i * (cols + pad) + j)
    info = shared_info(layout, name=name, dtype=dtype)
    if pad:
        info.notes.append(f"padded by {pad} elements per row")
    return info


def swizzled_info(shape: Sequence[int], dtype: str = "float16", name: str = "swizzled") -> LayoutInfo:
    """The swizzle TileLang picks for a shared tile (``tilelang.layout.make_swizzled_layout``)."""
    import tilelang.layout as L
    from tvm import tirx

    buf = tirx.decl_buffer(tuple(int(s) for s in shape), dtype, name=name, scope="shared.dyn")
    return shared_info(L.make_swizzled_layout(buf), name=name, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Running the real pipeline up to layout inference
# ---------------------------------------------------------------------------------------------


class _StopAfterLayoutInference(Exception):
    pass


@dataclass
class _Lowered:
    mod: Any
    target: Any
    arch: str


def _program_pass_configs(program, pass_configs):
    """The pass configs ``tilelang.compile`` would use: function-level ones, then explicit ones."""
    from tilelang.transform.pass_config import normalize_pass_configs

    merged: dict[str, Any] = {}
    attrs = program.attrs
    if attrs and "tilelang_pass_configs" in attrs:
        merged.update(dict(attrs["tilelang_pass_configs"]))
    if pass_configs:
        merged.update(pass_configs)
    return normalize_pass_configs(merged)


def _lower_to_layouts(program, arch: str | None = None, pass_configs: dict | None = None) -> _Lowered:
    """Run TileLang's CUDA pipeline on ``program`` and return the module right after layout
    inference (and reducer planning, which only reads the layouts).

    The same steps ``tilelang.compile(program, target=runtime.target(arch), pass_configs=...)``
    runs: the backend context for that target, a ``PassContext(opt_level=3)`` with the
    normalised pass configs, the semantic pre-check, and the backend's pipeline.  The pipeline is
    stopped where TileLang itself would visualise layouts (its ``LayoutVisual`` hook); a pass
    instrument also records the module after ``LayoutInference`` in case a future TileLang moves
    that hook, in which case the (still nvcc-free) pipeline simply runs to its end.
    """
    import tilelang  # noqa: F401  (registers the backends)
    import tilelang.cuda.pipeline as cuda_pipeline
    from tilelang import tvm
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.semantic_check import PreLowerSemanticCheck
    from tvm import tirx

    if not isinstance(program, tirx.PrimFunc):
        raise TypeError(f"infer_layouts expects a T.prim_func (tvm PrimFunc), got {type(program).__name__}")
    tgt = runtime.target(arch)
    context = create_backend_context(tgt, None, "auto")
    configs = _program_pass_configs(program, pass_configs)
    captured: dict[str, Any] = {}

    @tvm.instrument.pass_instrument
    class _Capture:
        def run_after_pass(self, mod, info):
            if info.name in ("tl.LayoutInference", "LayoutInference"):
                captured["after_inference"] = mod

    def _stop(mod):
        captured["at_visual"] = mod
        raise _StopAfterLayoutInference

    name = str(program.attrs["global_symbol"]) if program.attrs and "global_symbol" in program.attrs else "main"
    mod = tvm.IRModule({name: program})
    with _LOWER_LOCK:
        original = getattr(cuda_pipeline, "LayoutVisual", None)
        patched = original is not None
        if patched:
            cuda_pipeline.LayoutVisual = _stop
        try:
            with tvm.transform.PassContext(opt_level=3, config=configs, instruments=[_Capture()]), context.target:
                PreLowerSemanticCheck(mod)
                try:
                    context.lower(mod)
                except _StopAfterLayoutInference:
                    pass
        finally:
            if patched:
                cuda_pipeline.LayoutVisual = original
    result = captured.get("at_visual") or captured.get("after_inference")
    if result is None:
        raise RuntimeError("TileLang's pipeline finished without running LayoutInference")
    return _Lowered(mod=result, target=context.target, arch=tgt["arch"])


def _collect(mod) -> tuple[dict[str, tuple[Any, Any]], int | None, dict[str, Any]]:
    """``{buffer name: (buffer, layout)}`` from every block's ``layout_map``, the launch's
    threadIdx.x extent, and every allocated buffer by name."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    layouts: dict[str, tuple[Any, Any]] = {}
    allocated: dict[str, Any] = {}
    extents: list[int] = []

    def visit(node):
        if isinstance(node, tirx.SBlock):
            for buf in node.alloc_buffers:
                allocated.setdefault(buf.name, buf)
            if "layout_map" in node.annotations:
                for buf, layout in node.annotations["layout_map"].items():
                    layouts.setdefault(buf.name, (buf, layout))
        elif isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
            iv = node.node
            if getattr(iv, "thread_tag", "") == "threadIdx.x" and isinstance(node.value, tirx.IntImm):
                extents.append(int(node.value.value))

    for _, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            post_order_visit(func.body, visit)
    return layouts, (max(extents) if extents else None), allocated


def infer_layouts(program, arch: str | None = None, pass_configs: dict | None = None) -> dict[str, LayoutInfo]:
    """Run layout inference on ``program`` for ``arch`` and return ``{buffer name: LayoutInfo}``.

    ``arch`` defaults to :func:`runtime.current_arch`; ``pass_configs`` should be what you pass to
    :func:`runtime.compile_kernel` (function-level configs set on the ``T.prim_func`` are applied
    too, as ``tilelang.compile`` does).  No CUDA source is generated and nvcc does not run.

    Shared buffers that inference left alone (plain row-major) are not in the result.
    """
    return _infer(program, arch, pass_configs)[0]


def _infer(program, arch, pass_configs):
    from tilelang.layout import Fragment

    lowered = _lower_to_layouts(program, arch, pass_configs)
    found, launch, allocated = _collect(lowered.mod)
    out: dict[str, LayoutInfo] = {}
    for name, (buf, layout) in sorted(found.items()):
        extra = dict(launch_threads=launch, arch=lowered.arch)
        if isinstance(layout, Fragment):
            info = fragment_info(layout, name=name, dtype=str(buf.dtype), **extra)
            info.scope = buf.scope()
        else:
            info = shared_info(layout, name=name, dtype=str(buf.dtype), scope=buf.scope(), **extra)
            if len(info.shape) > 2:
                info.notes.append(
                    f"leading dimension(s) {list(info.shape[:-2])} added by the compiler "
                    "(e.g. one copy per pipeline stage)"
                )
        if info.kind == "fragment" and launch is not None and info.threads + info.thread_offset < launch:
            info.notes.append(f"threads {info.threads + info.thread_offset}..{launch - 1} hold no part of it")
        if info.kind == "fragment" and info.thread_offset:
            info.notes.append(
                f"threads 0..{info.thread_offset - 1} are the producer warps added by warp specialization"
            )
        out[name] = info
    return out, lowered, launch, allocated


def layouts_text(program, arch: str | None = None, pass_configs: dict | None = None) -> str:
    """A readable summary of every layout inference decided for ``program``."""
    infos, lowered, launch, allocated = _infer(program, arch, pass_configs)
    lines = [f"Layouts inferred for {lowered.arch} (block of {launch} threads):"]
    for info in infos.values():
        lines.append(info.summary())
    untouched = sorted(
        n for n, b in allocated.items() if n not in infos and str(b.scope()).startswith("shared") and "barrier" not in str(b.scope())
    )
    if untouched:
        lines.append("Shared buffers left row-major (no layout chosen): " + ", ".join(untouched))
    return "\n".join(lines)


def ownership_table(info: LayoutInfo, max_rows: int = 8, max_cols: int = 8) -> str:
    """A text grid ``T<thread>:<register>`` of the top-left corner of a fragment."""
    info._require_fragment()
    own, reg = info.owner, info.register
    if own.ndim == 2:  # 1-D fragment (+ replica axis)
        own, reg = own[:, None, :], reg[:, None, :]
    rows = min(max_rows, own.shape[1])
    cols = min(max_cols, own.shape[2])
    cells = [[f"T{'/'.join(str(int(t)) for t in own[:, i, j])}:r{int(reg[0, i, j])}" for j in range(cols)] for i in range(rows)]
    width = max(len(c) for row in cells for c in row)
    header = " " * 6 + " ".join(f"{f'j={j}':>{width}}" for j in range(cols))
    body = [f"i={i:<3} " + " ".join(f"{c:>{width}}" for c in row) for i, row in enumerate(cells)]
    return "\n".join([header, *body])


# ---------------------------------------------------------------------------------------------
# Bank conflicts
# ---------------------------------------------------------------------------------------------


@dataclass
class AccessPattern:
    """Simultaneous shared-memory reads, grouped as the hardware serves them.

    ``phases[k]`` is an ``(n, 2)`` array of the element coordinates ``(i, j)`` read by one
    memory transaction phase (at most 128 bytes: 8 threads x 16 bytes for vector loads, one
    8x8 matrix for ``ldmatrix``); ``grid`` arranges the phases for a heatmap.
    """

    name: str
    phases: list[np.ndarray]
    grid: tuple[int, int]
    description: str = ""
    row_label: str = ""
    col_label: str = ""


def row_reads(shape: Sequence[int], elem_bytes: int = 2, bytes_per_thread: int = 16) -> AccessPattern:
    """Each thread reads ``bytes_per_thread`` contiguous bytes along a row; threads cover the
    tile row by row; 8 consecutive threads (128 bytes) form one phase."""
    rows, cols = int(shape[-2]), int(shape[-1])
    vec = max(1, bytes_per_thread // elem_bytes)
    if cols % vec:
        raise ValueError(f"row width {cols} is not a multiple of the {vec}-element vector")
    per_phase = max(1, 128 // bytes_per_thread)
    chunks = [(i, c * vec) for i in range(rows) for c in range(cols // vec)]
    phases = []
    for k in range(0, len(chunks), per_phase):
        coords = [(i, j0 + v) for (i, j0) in chunks[k:k + per_phase] for v in range(vec)]
        phases.append(np.array(coords, dtype=np.int64))
    per_row = len(phases) // rows if len(phases) % rows == 0 else 0
    if per_row == 1 and rows % 8 == 0:
        grid, row_label, col_label = (rows // 8, 8), "8-row block", "row within the block (one phase each)"
    elif per_row:
        grid, row_label, col_label = (rows, per_row), "row", "128-byte segment of the row"
    else:
        grid, row_label, col_label = (len(phases), 1), "phase", ""
    return AccessPattern(
        name="row reads",
        phases=phases,
        grid=grid,
        description=f"8 threads x {bytes_per_thread} B along a row per phase",
        row_label=row_label,
        col_label=col_label,
    )


def ldmatrix_reads(shape: Sequence[int], elem_bytes: int = 2) -> AccessPattern:
    """``ldmatrix``-style reads: one phase = one 8x8 matrix = 8 rows x 16 bytes, each of 8
    threads supplying one row address."""
    rows, cols = int(shape[-2]), int(shape[-1])
    vec = max(1, 16 // elem_bytes)
    if rows % 8 or cols % vec:
        raise ValueError(f"tile {rows}x{cols} is not a whole number of 8 x {vec} matrices")
    phases = []
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, vec):
            coords = [(r0 + r, c0 + v) for r in range(8) for v in range(vec)]
            phases.append(np.array(coords, dtype=np.int64))
    return AccessPattern(
        name="ldmatrix 8x8",
        phases=phases,
        grid=(rows // 8, cols // vec),
        description="8 rows x 16 B per phase (one 8x8 matrix of ldmatrix)",
        row_label="8-row block",
        col_label="16-byte column chunk",
    )


def column_reads(shape: Sequence[int], elem_bytes: int = 4) -> AccessPattern:
    """32 threads each read one element down a column (a transpose-style read)."""
    rows, cols = int(shape[-2]), int(shape[-1])
    phases = []
    for j in range(cols):
        for r0 in range(0, rows, WARP_SIZE):
            phases.append(np.array([(r0 + r, j) for r in range(min(WARP_SIZE, rows - r0))], dtype=np.int64))
    return AccessPattern(
        name="column reads",
        phases=phases,
        grid=(max(1, rows // WARP_SIZE), cols),
        description="32 threads x 1 element down a column",
        row_label="32-row block",
        col_label="column",
    )


def _offset_fn(layout) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Normalise what :func:`bank_conflicts` accepts into ``f(i, j) -> element offset``."""
    from tilelang.layout import Layout

    if isinstance(layout, LayoutInfo):
        table = layout.offset_2d()
        return lambda i, j: table[i, j]
    if isinstance(layout, np.ndarray):
        return lambda i, j: layout[i, j]
    if isinstance(layout, Layout):
        return _offset_fn(shared_info(layout))
    if callable(layout):
        return lambda i, j: np.asarray(layout(i, j), dtype=np.int64)
    raise TypeError(f"cannot use {type(layout).__name__} as a layout (give a LayoutInfo, Layout, array or f(i, j))")


def phase_conflict(byte_addresses: Iterable[int]) -> int:
    """The conflict degree of one phase: how many wavefronts the 32 banks need to serve it.

    Each 4-byte word lives in bank ``(address // 4) % 32``.  Threads reading the *same* word are
    served together (broadcast); *different* words in one bank are served one after another, so
    the degree is the largest number of distinct words any bank must deliver (1 = conflict-free).
    """
    words = np.unique(np.asarray(list(byte_addresses), dtype=np.int64) // BANK_BYTES)
    if words.size == 0:
        return 0
    return int(np.bincount(words % NUM_BANKS, minlength=NUM_BANKS).max())


def bank_conflicts(layout, access_pattern: AccessPattern, elem_bytes: int | None = None) -> np.ndarray:
    """Conflict degree of every phase of ``access_pattern`` on a shared tile stored as ``layout``.

    ``layout`` is a :class:`LayoutInfo`, a TileLang ``Layout``, an offset table or a function
    ``f(i, j) -> element offset``; ``elem_bytes`` defaults to the layout's dtype (2 for fp16).
    Returns an integer array shaped ``access_pattern.grid`` (1 = conflict-free, 8 = 8-way).
    The buffer is assumed to start on a 128-byte boundary, as TileLang aligns shared buffers.
    """
    if elem_bytes is None:
        elem_bytes = layout.elem_bytes if isinstance(layout, LayoutInfo) else 2
    f = _offset_fn(layout)
    degrees = [phase_conflict(f(p[:, 0], p[:, 1]) * elem_bytes) for p in access_pattern.phases]
    return np.array(degrees, dtype=np.int64).reshape(access_pattern.grid)


def bank_map(layout, elem_bytes: int | None = None) -> np.ndarray:
    """The bank (0..31) of the first byte of every element of a 2-D shared tile."""
    if elem_bytes is None:
        elem_bytes = layout.elem_bytes if isinstance(layout, LayoutInfo) else 2
    if isinstance(layout, LayoutInfo):
        off = layout.offset_2d()
    elif isinstance(layout, np.ndarray):
        off = layout
    else:
        raise TypeError("bank_map needs a LayoutInfo or an offset table")
    return (off * elem_bytes // BANK_BYTES) % NUM_BANKS


# ---------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _as_fragment_info(obj, name: str | None = None) -> LayoutInfo:
    if isinstance(obj, LayoutInfo):
        return obj
    return fragment_info(obj, name=name or "fragment")


def plot_fragment(
    info,
    ax=None,
    color_by: str = "thread",
    annotate: bool | None = None,
    title: str | None = None,
    max_cells: int = 4096,
):
    """Who owns each element of a fragment.

    Colour = the owning thread (``color_by="thread"``), its warp (``"warp"``) or its warpgroup
    (``"warpgroup"``); text = ``T<thread>`` over ``r<register>`` when the tile is small enough
    to read (``annotate=None`` decides).  Replicated fragments show replica 0's owner and list
    every owner in the text.  Returns the matplotlib figure.
    """
    plt = _plt()
    info = _as_fragment_info(info)
    info._require_fragment()
    own = info.owner
    reg = info.register
    if own.ndim == 2:
        own, reg = own[:, None, :], reg[:, None, :]
    rows, cols = own.shape[1], own.shape[2]
    rel = own[0] - info.thread_offset
    if color_by == "thread":
        values, cmap, label = rel, "nipy_spectral", "thread (relative to the fragment's first)"
    elif color_by == "warp":
        values, cmap, label = rel // WARP_SIZE, "tab20", "warp"
    elif color_by == "warpgroup":
        values, cmap, label = rel // WARPGROUP_SIZE, "Set2", "warpgroup"
    else:
        raise ValueError("color_by must be 'thread', 'warp' or 'warpgroup'")
    norm = None
    if color_by != "thread":
        from matplotlib.colors import BoundaryNorm, ListedColormap

        n = int(values.max()) + 1
        base = plt.get_cmap(cmap)
        cmap = ListedColormap([base(k % base.N) for k in range(n)])
        norm = BoundaryNorm(np.arange(-0.5, n + 0.5), n)
    if annotate is None:
        annotate = rows * cols <= 256
    created = ax is None
    if created:
        w = min(16.0, max(4.0, cols * (0.55 if annotate else 0.08) + 1.5))
        h = min(12.0, max(2.5, rows * (0.45 if annotate else 0.08) + 1.2))
        fig, ax = plt.subplots(figsize=(w, h))
    else:
        fig = ax.figure
    if rows * cols > max_cells * 64:
        raise ValueError(f"{info.name} has {rows * cols} elements; too many to draw")
    im = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto" if cols > 4 * rows else "equal")
    if annotate:
        fs = 7 if cols <= 16 else 5
        for i in range(rows):
            for j in range(cols):
                t = "/".join(str(int(x)) for x in own[:, i, j])
                ax.text(j, i, f"T{t}\nr{int(reg[0, i, j])}", ha="center", va="center", fontsize=fs, color="black",
                        bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.55))
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    ax.set_title(title or f"{info.name}: {info.threads} threads, {info.registers_per_thread} regs/thread"
                 + (f", replicate {info.replicate}" if info.replicate > 1 else ""), fontsize=10)
    cb = fig.colorbar(im, ax=ax, label=label, fraction=0.046, pad=0.02)
    if norm is not None:
        n = int(values.max()) + 1
        cb.set_ticks(list(range(0, n, max(1, n // 16))))
    if created:
        fig.tight_layout()
    return fig


def plot_with_tilelang(fragment, name: str = "fragment", directory: str = "figures/layouts") -> str:
    """Draw a (small) fragment with TileLang's own ``tilelang.tools.plot_layout``; returns the PNG path.

    TileLang's plot draws one inch per element, so it suits mma-sized fragments (16x16), not
    whole accumulators; use :func:`plot_fragment` for those.
    """
    import os

    from tilelang.tools import plot_layout

    if isinstance(fragment, LayoutInfo):
        fragment = fragment.layout
    shape = [int(s) for s in fragment.get_input_shape()]
    if len(shape) != 2 or shape[0] * shape[1] > 32 * 32:
        raise ValueError(f"plot_with_tilelang is for small 2-D fragments; {name} is {shape}")
    os.makedirs(directory, exist_ok=True)
    with contextlib.redirect_stdout(None):
        plot_layout(fragment, save_directory=directory, name=name, formats="png")
    return os.path.join(directory, f"{name}.png")


def _shared_pair(layouts) -> list[LayoutInfo]:
    if isinstance(layouts, (LayoutInfo,)):
        return [layouts]
    out = []
    for item in layouts:
        out.append(item if isinstance(item, LayoutInfo) else shared_info(item))
    return out


def plot_shared_layout(layouts, granularity: str = "chunk", annotate: bool | None = None, max_rows: int | None = 16):
    """Shared tiles side by side, showing where each piece of the logical tile physically lives.

    ``granularity="chunk"`` (default): one cell per logical 16-byte chunk (8 fp16 elements, the
    unit of a vector load and of an ``ldmatrix`` row); colour and number = the chunk's physical
    slot (0..7) inside its 128-byte line, i.e. which group of 4 banks serves it.  A plain tile
    shows 0..7 in every row; a swizzled one permutes the slots from row to row.
    ``granularity="element"``: one cell per element, colour = bank, number = physical offset.
    ``layouts``: one or several :class:`LayoutInfo` / ``Layout`` objects (e.g. plain and
    swizzled).  Only the first ``max_rows`` rows are drawn (the pattern repeats).
    """
    plt = _plt()
    infos = _shared_pair(layouts)
    fig, axes = plt.subplots(1, len(infos), figsize=(min(18, 6.5 * len(infos)), 4.8), squeeze=False)
    for ax, info in zip(axes[0], infos):
        off = info.offset_2d()
        if max_rows:
            off = off[:max_rows]
        eb = info.elem_bytes
        if granularity == "chunk":
            vec = max(1, 16 // eb)
            chunk_off = off[:, ::vec]
            values = (chunk_off * eb // 16) % 8
            text = values
            cmap, label, xlabel = "tab10", "physical 16-byte slot in its 128-byte line (banks 4s..4s+3)", "logical 16-byte chunk"
            norm = None
            from matplotlib.colors import BoundaryNorm, ListedColormap

            base = plt.get_cmap("tab10")
            cmap = ListedColormap([base(k) for k in range(8)])
            norm = BoundaryNorm(np.arange(-0.5, 8.5), 8)
        elif granularity == "element":
            values = (off * eb // BANK_BYTES) % NUM_BANKS
            text = off
            cmap, label, xlabel, norm = "hsv", "bank", "column j", None
        else:
            raise ValueError("granularity must be 'chunk' or 'element'")
        im = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
        rows, cols = values.shape
        annotate_here = (rows * cols <= 1100) if annotate is None else annotate
        if annotate_here:
            fs = 5 if cols > 32 else 8
            for i in range(rows):
                for j in range(cols):
                    ax.text(j, i, str(int(text[i, j])), ha="center", va="center", fontsize=fs,
                            rotation=90 if cols > 32 else 0)
        ax.set_title(f"{info.name}: {list(info.shape[-2:])} {info.dtype} (first {rows} rows)", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("row i")
        fig.colorbar(im, ax=ax, label=label, fraction=0.046, pad=0.02)
    fig.tight_layout()
    return fig


def plot_bank_conflicts(layouts, patterns: Sequence[AccessPattern], elem_bytes: int | None = None):
    """Heatmaps of the conflict degree of every phase, one row of panels per access pattern and
    one column per layout, with the degree printed in each cell.  Returns the figure."""
    plt = _plt()
    infos = _shared_pair(layouts)
    fig, axes = plt.subplots(len(patterns), len(infos), figsize=(min(18, 6 * len(infos)), 3.2 * len(patterns)), squeeze=False)
    vmax = 1
    results = [[bank_conflicts(info, p, elem_bytes) for info in infos] for p in patterns]
    for row in results:
        for d in row:
            vmax = max(vmax, int(d.max()))
    for r, (pattern, row) in enumerate(zip(patterns, results)):
        for c, (info, deg) in enumerate(zip(infos, row)):
            ax = axes[r][c]
            im = ax.imshow(deg, cmap="Reds", vmin=0, vmax=vmax, interpolation="nearest", aspect="auto")
            if deg.size <= 512:
                for (i, j), v in np.ndenumerate(deg):
                    ax.text(j, i, str(int(v)), ha="center", va="center", fontsize=8,
                            color="white" if v > vmax / 2 else "black")
            ax.set_title(f"{info.name} / {pattern.name}: worst {int(deg.max())}-way", fontsize=10)
            ax.set_xlabel(pattern.col_label)
            ax.set_ylabel(pattern.row_label)
            fig.colorbar(im, ax=ax, label="wavefronts per phase", fraction=0.046, pad=0.02)
    fig.tight_layout()
    return fig


def show(fig, path: str | None = None):
    """Display a figure (inline backends) and optionally save it as a static image."""
    plt = _plt()
    if path:
        import os

        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.show()
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------
# Kernels to look at, and an interactive picker
# ---------------------------------------------------------------------------------------------


def _policy(name):
    import tilelang.language as T

    if not isinstance(name, str):
        return name
    try:
        return getattr(T.GemmWarpPolicy, name)
    except AttributeError as exc:
        raise ValueError(f"unknown warp policy {name!r}; use 'Square', 'FullRow' or 'FullCol'") from exc


def _kernel_catalog() -> dict[str, Callable[..., Any]]:
    """name -> builder(threads, policy, dtype, arch) returning a T.prim_func; the package's own
    kernels are included when their modules exist."""
    from . import layout_demos as D
    from .kernels.scale_copy import scale_copy_program

    cat: dict[str, Callable[..., Any]] = {
        "parallel (notebook 01's scale_copy)": lambda threads, policy, dtype, arch: scale_copy_program(64, block_M=64, block_N=64, threads=threads, dtype=dtype),
        "gemm accumulator": lambda threads, policy, dtype, arch: D.gemm_program(128, 128, 64, threads=threads, policy=_policy(policy), dtype=dtype),
        "gemm, A in registers": lambda threads, policy, dtype, arch: D.gemm_rs_program(64, 64, 32, threads=threads, policy=_policy(policy), dtype=dtype),
        "two warpgroups (MLA-like)": lambda threads, policy, dtype, arch: D.two_warpgroup_program(threads=threads, policy=_policy(policy), dtype=dtype),
    }
    cat.update(real_kernel_programs())
    return cat


def real_kernel_programs() -> dict[str, Callable[..., Any]]:
    """Builders ``(threads, policy, dtype, arch) -> T.prim_func`` for the tutorial's own kernels
    (``kernels/gemm_relu.py``, ``kernels/mla_decode.py``), for those whose modules import.

    gemm_relu: a 1024^3 problem with the seed's 128x128x64 tiles and 3 stages, at the chosen
    threads / policy / dtype.  mla_decode: h_q = 64 heads, one split, the module's default
    tile configuration with its per-architecture stage count; its policy is fixed (FullCol) and
    its thread count must be 256, so those two choices are ignored.
    """
    import importlib

    out: dict[str, Callable[..., Any]] = {}
    try:
        gr = importlib.import_module("tilelang_tutorial.kernels.gemm_relu")
        gemm_fn = gr.gemm_relu_program
    except (ImportError, AttributeError):
        gemm_fn = None
    if gemm_fn is not None:

        def gemm_relu(threads, policy, dtype, arch, _fn=gemm_fn):
            policy = policy if isinstance(policy, str) else ["Square", "FullRow", "FullCol"][int(policy.policy_type)]
            return _fn(1024, 1024, 1024, block_M=128, block_N=128, block_K=64, num_stages=3, threads=threads,
                       policy=policy, in_dtype=dtype)

        out["gemm_relu (package)"] = gemm_relu
    try:
        md = importlib.import_module("tilelang_tutorial.kernels.mla_decode")
        mla_fn = md.mla_decode_program
    except (ImportError, AttributeError):
        md = mla_fn = None
    if mla_fn is not None:

        def mla(threads, policy, dtype, arch, _md=md):
            import inspect

            params = inspect.signature(_md.mla_decode_program).parameters
            stages = getattr(_md, "DEFAULT_CONFIG", {}).get("num_stages", 2)
            if hasattr(_md, "_stages_for"):
                stages = _md._stages_for(arch or runtime.current_arch(), stages)
            kw = {"num_stages": stages, "split": False, "num_split": 1}
            # one kernel (no split-KV combine), whatever the module calls that switch
            kw = {k: v for k, v in kw.items() if k in params}
            return _md.mla_decode_program(64, dtype, **kw)

        out["mla_decode (package)"] = mla
    return out


@functools.lru_cache(maxsize=64)
def catalog_layouts(kernel: str, threads: int, policy: str, dtype: str, arch: str) -> dict[str, LayoutInfo]:
    """Layouts of a catalogue kernel (cached; inference only, no nvcc)."""
    cat = _kernel_catalog()
    if kernel not in cat:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(cat)}")
    return infer_layouts(cat[kernel](threads, policy, dtype, arch), arch=arch)


def layout_picker(static_path: str | None = None):
    """An ipywidgets panel: kernel / buffer / warp policy / threads / dtype / arch -> redraw.

    Without ipywidgets (or in a static render) it prints the default selection's summary and
    shows its plot, optionally saved to ``static_path``.
    """
    plt = _plt()
    kernels = list(_kernel_catalog())
    archs = list(runtime.ACCEPTED_ARCHS)
    default = dict(kernel="two warpgroups (MLA-like)", threads=256, policy="FullCol", dtype="float16", arch=runtime.current_arch())

    def draw(kernel, threads, policy, dtype, arch, buffer=None, color_by="warpgroup"):
        infos = catalog_layouts(kernel, int(threads), policy, dtype, arch)
        if not infos:
            print("inference chose no layouts for this kernel")
            return None, infos
        name = buffer if buffer in infos else next((n for n, i in infos.items() if i.kind == "fragment"), next(iter(infos)))
        info = infos[name]
        print(info.summary())
        if info.kind == "fragment":
            if len(info.shape) > 2 or (len(info.shape) == 2 and info.shape[0] * info.shape[1] > 256 * 1024):
                print("(not drawn: not a 2-D tile)")
                return None, infos
            if info.split_axis() != "none":
                print(f"warpgroups split the {info.split_axis()}")
            fig = plot_fragment(info, color_by=color_by)
        else:
            fig = plot_shared_layout([info])
        return fig, infos

    try:
        import ipywidgets as W
        from IPython.display import display
    except ImportError:
        W = None
    fig, infos = draw(**default)
    if fig is not None:
        show(fig, static_path)
    if W is None:
        return None

    w_kernel = W.Dropdown(options=kernels, value=default["kernel"], description="kernel")
    w_threads = W.Dropdown(options=[128, 256], value=default["threads"], description="threads")
    w_policy = W.Dropdown(options=["Square", "FullRow", "FullCol"], value=default["policy"], description="policy")
    w_dtype = W.Dropdown(options=["float16", "bfloat16"], value=default["dtype"], description="dtype")
    w_arch = W.Dropdown(options=archs, value=default["arch"], description="arch")
    w_buffer = W.Dropdown(options=sorted(infos), description="buffer")
    w_color = W.Dropdown(options=["thread", "warp", "warpgroup"], value="warpgroup", description="colour")
    out = W.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                infos_now = catalog_layouts(w_kernel.value, int(w_threads.value), w_policy.value, w_dtype.value, w_arch.value)
                names = sorted(infos_now)
                if w_buffer.options != tuple(names):
                    keep = w_buffer.value if w_buffer.value in names else (names[0] if names else None)
                    w_buffer.unobserve(redraw, "value")
                    w_buffer.options = names
                    w_buffer.value = keep
                    w_buffer.observe(redraw, "value")
                f, _ = draw(w_kernel.value, w_threads.value, w_policy.value, w_dtype.value, w_arch.value,
                            w_buffer.value, w_color.value)
                if f is not None:
                    plt.show()
                    plt.close(f)
            except Exception as exc:  # show the reason instead of a dead widget
                print(f"{type(exc).__name__}: {exc}")

    for w in (w_kernel, w_threads, w_policy, w_dtype, w_arch, w_buffer, w_color):
        w.observe(redraw, "value")
    panel = W.VBox([W.HBox([w_kernel, w_buffer, w_color]), W.HBox([w_policy, w_threads, w_dtype, w_arch]), out])
    display(panel)
    return panel
