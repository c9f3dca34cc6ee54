"""What TileLang's layout inference decided, as data you can print, test and plot.

A TileLang kernel names *tiles* (``T.alloc_fragment``, ``T.alloc_shared``); it rarely says who
owns which element or where an element lives. The ``LayoutInference`` pass decides that:

* a **fragment** (registers) gets a :class:`tilelang.layout.Fragment`: element ``(i, j)`` ->
  (thread, register slot inside that thread), possibly replicated over several threads;
* a **shared** buffer may get a :class:`tilelang.layout.Layout`: element ``(i, j)`` -> physical
  position, which is how swizzles against bank conflicts are expressed.

:func:`infer_layouts` runs TileLang's *real* CUDA lowering pipeline (the one ``tilelang.compile``
runs, with the same target and pass configs) up to and including layout inference, and stops
there: no CUDA code is generated and nvcc never runs, so it is cheap and works without a GPU. The
layouts are evaluated for every element with numpy, giving plain tables (:class:`LayoutInfo`)
that tests can assert on and plots can draw.
"""
from __future__ import annotations

import contextlib
import functools
import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .. import runtime

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
                f"{self.registers_per_thread} elements/thread "
                f"({-(-self.registers_per_thread * self.elem_bytes // BANK_BYTES)} 32-bit registers), replicate {self.replicate}"
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


def decode(formula: str, **values: int) -> str:
    """A printed layout formula worked at one element, term by term:
    ``decode("_i % 16 * 8 + _j // 8", _i=17, _j=42)`` is ``"_i % 16 * 8 + _j // 8 = 8 + 5 = 13"``.
    TileLang prints Python arithmetic on non-negative indices (``//`` and ``%`` are its floor
    division and modulo), so each term of the top-level sum evaluates as written."""
    import ast

    def value(node) -> int:
        return int(eval(compile(ast.Expression(node), "<layout formula>", "eval"), {"__builtins__": {}}, dict(values)))

    node, terms = ast.parse(formula, mode="eval").body, []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        terms.insert(0, node.right)
        node = node.left
    terms.insert(0, node)
    total = sum(value(term) for term in terms)
    if len(terms) == 1:
        return f"{formula} = {total}"
    return f"{formula} = {' + '.join(str(value(term)) for term in terms)} = {total}"


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
