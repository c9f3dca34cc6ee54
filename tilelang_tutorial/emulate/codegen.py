"""Translate a pre-lowering TileLang PrimFunc into Python source that runs it with numpy.

The generated module has one entry function ``_entry(_x, <params>)``; each kernel (``T.Kernel``
grid) becomes a block function called once per block, in linear block order (``blockIdx.x``
fastest). Inside a block:

* tile operators are calls into :mod:`.runtime` on whole regions;
* a ``T.Parallel`` nest is vectorised: its loop variables are ``arange`` arrays laid out along
  their own axes (axis ``d`` for nest depth ``d``; axis 0 holds the block's threads), so every
  statement of the nest is one numpy expression over the whole iteration space; an ``if`` becomes
  a mask;
* the thread indices are arrays over the block's threads, so statements that read them run for
  every thread at once; a thread-index ``if`` around tile operators or barriers is warp
  specialisation: its branches become generator functions run as concurrent roles by
  :class:`.scheduler.Scheduler` (the block function itself is then a generator);
* serial, unrolled and vectorised loops, pipelines and while loops are Python loops.

Static facts decide the code: which values are vectors (and along which axes), which accesses are
provably in bounds (``tvm.arith.Analyzer`` with the loop ranges and ``if`` conditions in scope --
proven accesses are plain numpy slices, the others go through checked helpers), and which scope
each buffer lives in. Each generated line records the TIR statement it came from (a :class:`Site`),
so a run-time error can say where in the kernel it happened.
"""
from __future__ import annotations

import builtins
import contextlib
import keyword
import re
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import arith
from tvm import tirx as tir

from . import dtypes as D
from . import encoding as E
from .analysis import (ThreadAnalysis, contains, is_collective, is_thread_binding_loop, max_parallel_depth,
                       short, span_of, stmt_text)
from .errors import EmulationError, UnsupportedConstruct
from .runtime import BufRef

FOR_SERIAL = int(tir.ForKind.SERIAL)
FOR_PARALLEL = int(tir.ForKind.PARALLEL)
FOR_VECTORIZED = int(tir.ForKind.VECTORIZED)
FOR_UNROLLED = int(tir.ForKind.UNROLLED)


@dataclass
class Ex:
    """A generated expression: Python code, the vector axes it varies along, its TIR dtype."""
    code: str
    axes: frozenset
    dtype: str

    @property
    def vec(self) -> bool:
        return bool(self.axes)


@dataclass
class VarInfo:
    name: str
    axes: frozenset
    dtype: str


@dataclass
class BufInfo:
    buffer: tir.Buffer
    name: str            # python variable holding the array
    ref: str             # global name of the BufRef
    scope: str
    dtype: str
    per_thread: bool = False
    is_barrier: bool = False


@dataclass
class Site:
    """Where a generated line came from."""
    stmt: str
    span: tuple | None
    op: str | None
    loops: list = field(default_factory=list)      # [(tir name, python name, kind)]
    kernel: int = 0


@dataclass
class Generated:
    source: str
    globals: dict
    sites: list
    line_sites: list
    entry_params: list            # [(kind, tir object, python name)]
    kernels: list                 # per kernel: dict(threads=..., role_mode=..., name=...)
    filename: str


_IDENT = re.compile(r"[^0-9a-zA-Z_]")

UNARY = {
    "tirx.exp": "np.exp", "tirx.exp2": "np.exp2", "tirx.exp10": "_exp10", "tirx.log": "np.log",
    "tirx.log2": "np.log2", "tirx.log10": "np.log10", "tirx.log1p": "np.log1p", "tirx.expm1": "np.expm1",
    "tirx.sqrt": "np.sqrt", "tirx.rsqrt": "_rt.rsqrt", "tirx.fabs": "np.abs", "tirx.tanh": "np.tanh",
    "tirx.sigmoid": "_rt.sigmoid", "tirx.floor": "np.floor", "tirx.ceil": "np.ceil", "tirx.round": "_rt.round_away",
    "tirx.nearbyint": "np.rint", "tirx.trunc": "np.trunc", "tirx.sin": "np.sin", "tirx.cos": "np.cos",
    "tirx.tan": "np.tan", "tirx.asin": "np.arcsin", "tirx.acos": "np.arccos", "tirx.atan": "np.arctan",
    "tirx.sinh": "np.sinh", "tirx.cosh": "np.cosh", "tirx.asinh": "np.arcsinh", "tirx.acosh": "np.arccosh",
    "tirx.atanh": "np.arctanh", "tirx.erf": "_rt.erf", "tirx.isnan": "np.isnan", "tirx.isinf": "np.isinf",
    "tirx.isfinite": "np.isfinite", "tirx.bitwise_not": "np.invert", "tirx.popcount": "_rt.popcount",
    "tl.__exp": "np.exp", "tl.__exp10": "_exp10", "tl.__log": "np.log", "tl.__log2": "np.log2",
    "tl.__log10": "np.log10", "tl.__sin": "np.sin", "tl.__cos": "np.cos", "tl.__tan": "np.tan",
    "tl.fast_rcp": "_rt.rcp", "tl.ieee_frsqrt": "_rt.rsqrt", "tirx.fast_exp": "np.exp",
    "tirx.fast_tanh": "np.tanh", "tirx.fast_erf": "_rt.erf",
}
BINARY = {
    "tirx.pow": "np.power", "tirx.fmod": "np.fmod", "tirx.atan2": "np.arctan2", "tirx.hypot": "np.hypot",
    "tirx.copysign": "np.copysign", "tirx.nextafter": "np.nextafter", "tirx.ldexp": "np.ldexp",
    "tl.max_nan": "np.maximum", "tl.min_nan": "np.minimum",
}
BITWISE = {"tirx.bitwise_and": "&", "tirx.bitwise_or": "|", "tirx.bitwise_xor": "^"}
#: call_extern functions with a CPU implementation: name -> (python callable code, number of args)
EXTERN = {
    "__fdividef": ("_div", 2), "fdividef": ("_div", 2), "__fdiv_rn": ("_div", 2), "__ddiv_rn": ("_div", 2),
    "__expf": ("np.exp", 1), "expf": ("np.exp", 1), "exp": ("np.exp", 1), "exp2f": ("np.exp2", 1),
    "__exp2f": ("np.exp2", 1), "exp2": ("np.exp2", 1), "exp10f": ("_exp10", 1), "__exp10f": ("_exp10", 1),
    "__logf": ("np.log", 1), "logf": ("np.log", 1), "log": ("np.log", 1), "__log2f": ("np.log2", 1),
    "log2f": ("np.log2", 1), "__log10f": ("np.log10", 1), "log10f": ("np.log10", 1), "log1pf": ("np.log1p", 1),
    "__sinf": ("np.sin", 1), "sinf": ("np.sin", 1), "__cosf": ("np.cos", 1), "cosf": ("np.cos", 1),
    "__tanf": ("np.tan", 1), "tanf": ("np.tan", 1), "tanhf": ("np.tanh", 1), "sqrtf": ("np.sqrt", 1),
    "sqrt": ("np.sqrt", 1), "__fsqrt_rn": ("np.sqrt", 1), "rsqrtf": ("_rt.rsqrt", 1),
    "__frsqrt_rn": ("_rt.rsqrt", 1), "__frcp_rn": ("_rt.rcp", 1), "fabsf": ("np.abs", 1), "fabs": ("np.abs", 1),
    "fmaxf": ("np.fmax", 2), "fminf": ("np.fmin", 2), "fmax": ("np.fmax", 2), "fmin": ("np.fmin", 2),
    "__saturatef": ("_saturate", 1), "erff": ("_rt.erf", 1), "powf": ("np.power", 2), "__powf": ("np.power", 2),
    "pow": ("np.power", 2), "floorf": ("np.floor", 1), "ceilf": ("np.ceil", 1), "roundf": ("_rt.round_away", 1),
    "truncf": ("np.trunc", 1), "rintf": ("np.rint", 1), "__fmul_rn": ("_mul", 2), "__fadd_rn": ("_add", 2),
    "__fsub_rn": ("_sub", 2), "fmaf": ("_fma", 3), "__fmaf_rn": ("_fma", 3), "expm1f": ("np.expm1", 1),
    "sinhf": ("np.sinh", 1), "coshf": ("np.cosh", 1), "atanf": ("np.arctan", 1), "atan2f": ("np.arctan2", 2),
    "fmodf": ("np.fmod", 2), "copysignf": ("np.copysign", 2),
}
IEEE = {"tl.ieee_add": ("_add", 2), "tl.ieee_sub": ("_sub", 2), "tl.ieee_mul": ("_mul", 2),
        "tl.ieee_fdiv": ("_div", 2), "tl.ieee_fmaf": ("_fma", 3), "tl.ieee_frcp": ("_rt.rcp", 1),
        "tl.ieee_fsqrt": ("np.sqrt", 1)}

CMP = {tir.EQ: "==", tir.NE: "!=", tir.LT: "<", tir.LE: "<=", tir.GT: ">", tir.GE: ">="}
ARITH = {tir.Add: "+", tir.Sub: "-", tir.Mul: "*"}


class CodeGen:
    def __init__(self, func: tir.PrimFunc, name: str, serial: int = 0, uninit: bool = False):
        self.func = func
        self.check_uninit = uninit      # wrap on-chip loads in the uninitialised-read check
        self.name = name
        self.filename = f"<tilelang-emulate {name} #{serial}>"
        self.ta = ThreadAnalysis(func)
        self.lines: list[str] = []
        self.line_sites: list[int] = []
        self.sites: list[Site] = []
        self.site_stack: list[int] = []
        self.ind = 0
        self.globals: dict = {}
        self._gcount = 0
        self._tmp = 0
        self._consts: dict = {}
        self.thread_var_names: dict = {}
        # generated code uses Python builtins (range, int, min, ...): TIR names never shadow them
        self.used_names: set = set(keyword.kwlist) | set(dir(builtins)) | {"np", "_rt", "_x"}
        self.vmap: dict = {}           # tir.Var -> VarInfo
        self.bmap: dict = {}           # data Var -> {buffer key: BufInfo}
        self.analyzer = arith.Analyzer()
        self.kernels: list = []
        # per-kernel / per-scope state
        self.ndim = 1
        self.depth = 0
        self.par_loops: list = []       # (var, depth, lo code, n code)
        self.loops: list = []           # (tir name, python name, kind) for sites
        self.mask: str | None = None
        self.mask_axes = frozenset()
        self.role_mode = False
        self.tids = "_tids"             # python name of the current role's thread ids
        self.tflat = "_tf"              # thread ids laid out along axis 0
        self.nthreads = 1
        self.thread_dims = (1, 1, 1)
        self.kernel_index = -1
        self.role_names: list = []
        self.entry_params: list = []
        self.serial_par = 0             # > 0 inside a T.Parallel nest TileLang runs serially per thread
        self.deferred: dict = {}        # Var -> value of a Bind that uses a variable bound later

    # ------------------------------------------------------------------ emission utilities
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.ind + line)
        self.line_sites.append(self.site_stack[-1] if self.site_stack else -1)

    @contextlib.contextmanager
    def indent(self):
        self.ind += 1
        try:
            yield
        finally:
            self.ind -= 1

    @contextlib.contextmanager
    def site(self, stmt, op: str | None = None, text: str | None = None):
        span = span_of(stmt)
        if (span is None or _in_library(span[0])) and self.site_stack:
            # a statement TileLang's own macros built (T.reduce_* on shared, T.cumsum, ...): the
            # user's line is the enclosing statement's
            parent = self.sites[self.site_stack[-1]].span
            if parent is not None or span is None:
                span = parent
        s = Site(text or stmt_text(stmt), span, op, list(self.loops), self.kernel_index)
        self.sites.append(s)
        self.site_stack.append(len(self.sites) - 1)
        try:
            yield
        except EmulationError as e:
            # a construct the emulator cannot translate: say where it is (innermost site first)
            if e.location is None:
                e.with_location(self.describe_site(s))
            raise
        finally:
            self.site_stack.pop()

    def describe_site(self, s: Site) -> str:
        from .analysis import fmt_span, func_span, source_line
        where = f"  in kernel {self.name}"
        fs = func_span(self.func)
        if fs is not None:
            where += f" (defined at {fmt_span(fs)})"
        lines = [where]
        if s.span is not None:
            src = source_line(s.span)
            lines.append(f"  at {fmt_span(s.span)}" + (f": {src}" if src else ""))
            lines.append(f"  TIR: {s.stmt}")
        else:
            lines.append(f"  at TIR statement: {s.stmt}")
        return "\n".join(lines)

    def gname(self, value, prefix="_g") -> str:
        """A module-level constant holding ``value``."""
        self._gcount += 1
        n = f"{prefix}{self._gcount}"
        self.globals[n] = value
        return n

    def tmp(self, prefix="_t") -> str:
        self._tmp += 1
        return f"{prefix}{self._tmp}"

    def pyname(self, hint: str) -> str:
        base = _IDENT.sub("_", hint or "v")
        if not base or base[0].isdigit() or base.startswith("_"):
            base = "v_" + base.lstrip("_")
        n, k = base, 1
        while n in self.used_names:
            k += 1
            n = f"{base}_{k}"
        self.used_names.add(n)
        return n

    def const(self, value, dtype: str) -> str:
        """Code for a constant of ``dtype``: an int / bool literal, or a module-level numpy scalar
        (so float arithmetic stays in the constant's dtype)."""
        dt = D.np_dtype(dtype)
        v = dt.type(value)
        if dt == np.bool_:
            return repr(bool(v))
        if D.is_int(dt):
            return repr(int(v))
        key = (dt.str, np.asarray(v).tobytes())
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.gname(v, "_k")
        return name

    def dt(self, dtype: str) -> str:
        """Global name of the numpy dtype for a TIR dtype."""
        dtype = D.canonical(dtype)
        n = "_DT_" + _IDENT.sub("_", dtype)
        if n not in self.globals:
            self.globals[n] = D.np_dtype(dtype)
        return n

    # ------------------------------------------------------------------ entry point
    def generate(self) -> Generated:
        f = self.func
        params = []
        for p in f.params:
            if p in f.buffer_map:
                buf = f.buffer_map[p]
                self._check_param_layout(buf)
                bi = self._register_buffer(buf, "global")
                params.append(("buffer", buf, bi.name))
            else:
                n = self.pyname(p.name)
                self.vmap[p] = VarInfo(n, frozenset(), D.canonical(p.dtype))
                params.append(("scalar", p, n))
        # dynamic dimensions (and strides) of the parameter buffers
        dyn = []
        for _, buf, _ in [x for x in params if x[0] == "buffer"]:
            for e in list(buf.shape) + list(buf.strides or []):
                def collect(n):
                    if isinstance(n, tir.Var) and n not in self.vmap and n not in [d for d in dyn]:
                        dyn.append(n)
                tir.stmt_functor.post_order_visit(tir.Evaluate(e) if isinstance(e, tir.PrimExpr) else e, collect)
        for v in dyn:
            n = self.pyname(v.name)
            self.vmap[v] = VarInfo(n, frozenset(), D.canonical(v.dtype))
            params.append(("dim", v, n))
        self.entry_params = params
        stack = contextlib.ExitStack()
        with stack:
            for v in dyn:
                stack.enter_context(self.analyzer.constraint_scope(v >= 1))
            self.emit("def _entry(_x, " + ", ".join(n for _, _, n in params) + "):")
            with self.indent():
                self.stmt(f.body)
                self.emit("return None")
        src = "\n".join(self.lines) + "\n"
        return Generated(src, self.globals, self.sites, self.line_sites, params, self.kernels, self.filename)

    # ------------------------------------------------------------------ buffers
    def _check_param_layout(self, buf: tir.Buffer) -> None:
        """Tensor parameters must be dense row-major (T.Tensor); strided views are not emulated."""
        off = buf.elem_offset
        if off is not None and not (isinstance(off, tir.IntImm) and int(off.value) == 0):
            raise UnsupportedConstruct(f"tensor parameter {buf.name} with an element offset", str(off))
        if not buf.strides:
            return
        expect = tir.IntImm("int64", 1)
        for d in reversed(range(len(buf.shape))):
            st = buf.strides[d]
            if not self.analyzer.can_prove_equal(st, expect):
                raise UnsupportedConstruct(f"strided tensor parameter {buf.name}",
                                           f"strides {list(buf.strides)} are not the row-major strides of shape "
                                           f"{list(buf.shape)}; pass contiguous tensors (T.Tensor)")
            expect = expect * buf.shape[d]

    def _register_buffer(self, buf: tir.Buffer, scope: str | None = None) -> BufInfo:
        data = buf.data
        scope = scope or buf.scope()
        entry = self.bmap.setdefault(data, {})
        key = (tuple(str(s) for s in buf.shape), str(buf.dtype))
        if key in entry:
            return entry[key]
        is_barrier = scope == E.BARRIER_SCOPE
        per_thread = data in self.ta.pt_bufs and scope in E.LOCAL_SCOPES
        name = self.pyname("b_" + buf.name)
        ref = BufRef(buf.name, scope, "float32" if is_barrier else str(buf.dtype), per_thread) if not is_barrier \
            else _BarrierRef(buf.name)
        bi = BufInfo(buf, name, self.gname(ref, "_B"), scope, D.canonical(buf.dtype), per_thread, is_barrier)
        entry[key] = bi
        return bi

    def buf(self, buf: tir.Buffer) -> BufInfo:
        entry = self.bmap.get(buf.data)
        if not entry:
            raise UnsupportedConstruct(f"buffer {buf.name}", "it is used before it is allocated (or it is not "
                                       "a parameter / T.alloc_* buffer)")
        key = (tuple(str(s) for s in buf.shape), str(buf.dtype))
        if key in entry:
            return entry[key]
        # another Buffer object over the same data: a reshaped view of the first one
        base = next(iter(entry.values()))
        if D.canonical(buf.dtype) != base.dtype:
            raise UnsupportedConstruct(f"buffer {buf.name}", f"it aliases {base.buffer.name} with another dtype "
                                       f"({buf.dtype} vs {base.dtype})")
        # (an expression, not a variable: the alias may first be used in a nested scope)
        shape = ", ".join(self.uniform(self.expr(s), f"shape of {buf.name}") for s in buf.shape)
        lead = "-1, " if base.per_thread else ""
        bi = BufInfo(buf, f"{base.name}.reshape(({lead}{shape},))", base.ref, base.scope, base.dtype,
                     base.per_thread, base.is_barrier)
        entry[key] = bi
        return bi

    @contextlib.contextmanager
    def var_scope(self):
        """Variables bound inside a loop / branch / block body are not visible after it (a TIR Bind
        scopes over the rest of its enclosing body)."""
        saved = dict(self.vmap)
        try:
            yield
        finally:
            self.vmap = saved

    @contextlib.contextmanager
    def _assume(self, cond):
        """Let the bounds prover assume ``cond`` (a uniform or role condition) inside the block."""
        try:
            scope = self.analyzer.constraint_scope(cond)
            scope.__enter__()
        except Exception:  # noqa: BLE001 (a condition the analyzer cannot use: prove less)
            yield
            return
        try:
            yield
        finally:
            scope.__exit__(None, None, None)

    # ------------------------------------------------------------------ expressions
    def uniform(self, ex: Ex, what: str) -> str:
        if ex.vec:
            return f"_rt.uni({ex.code}, {what!r})"
        return ex.code

    def expr(self, e) -> Ex:  # noqa: C901 (one dispatch is the clearest form)
        if isinstance(e, (bool, int, float)):   # plain Python values in annotations
            if isinstance(e, bool):
                return Ex(repr(e), frozenset(), "bool")
            return Ex(repr(e), frozenset(), "int64" if isinstance(e, int) else "float64")
        if isinstance(e, tir.IntImm):
            if str(e.dtype) == "bool":
                return Ex("True" if e.value else "False", frozenset(), "bool")
            return Ex(str(int(e.value)), frozenset(), D.canonical(e.dtype))
        if isinstance(e, tir.FloatImm):
            return Ex(self.const(e.value, str(e.dtype)), frozenset(), D.canonical(e.dtype))
        if isinstance(e, tir.Var):
            vi = self.vmap.get(e)
            if vi is None and e in self.deferred:
                # a Bind placed before the loop that binds one of its variables (T.Persistent's
                # tile indices): TileLang inlines the value at each use, and so does the emulator
                return self.expr(self.deferred[e])
            if vi is None:
                raise EmulationError(f"variable `{e.name}` is used but never bound (internal: no binding seen)")
            return Ex(vi.name, vi.axes, vi.dtype)
        if isinstance(e, tir.Cast):
            return self.cast(self.expr(e.value), D.canonical(e.dtype))
        dt = D.canonical(e.dtype)
        for cls, op in ARITH.items():
            if isinstance(e, cls):
                a, b = self.expr(e.a), self.expr(e.b)
                return Ex(f"({a.code} {op} {b.code})", a.axes | b.axes, dt)
        if isinstance(e, (tir.Div, tir.Mod, tir.FloorDiv, tir.FloorMod)):
            a, b = self.expr(e.a), self.expr(e.b)
            isf = D.is_float(D.np_dtype(dt))
            if isinstance(e, tir.Div):
                code = f"({a.code} / {b.code})" if isf else f"_rt.tdiv({a.code}, {b.code})"
            elif isinstance(e, tir.Mod):
                code = f"np.fmod({a.code}, {b.code})" if isf else f"_rt.tmod({a.code}, {b.code})"
            elif isinstance(e, tir.FloorDiv):
                code = f"_rt.ffloordiv({a.code}, {b.code})" if isf else self._intdiv("//", a, b)
            else:
                code = f"_rt.ffloormod({a.code}, {b.code})" if isf else self._intdiv("%", a, b)
            return Ex(code, a.axes | b.axes, dt)
        if isinstance(e, (tir.Min, tir.Max)):
            a, b = self.expr(e.a), self.expr(e.b)
            fn = "min" if isinstance(e, tir.Min) else "max"
            if not a.vec and not b.vec:   # scalars: Python's min/max (ints), NaN-propagating helpers (floats)
                f = fn if not D.is_float(D.np_dtype(dt)) else f"_rt.s{fn}"
                return Ex(f"{f}({a.code}, {b.code})", frozenset(), dt)
            return Ex(f"np.{fn}imum({a.code}, {b.code})", a.axes | b.axes, dt)
        for cls, op in CMP.items():
            if isinstance(e, cls):
                a, b = self.expr(e.a), self.expr(e.b)
                return Ex(f"({a.code} {op} {b.code})", a.axes | b.axes, "bool")
        if isinstance(e, (tir.And, tir.Or)):
            a, b = self.expr(e.a), self.expr(e.b)
            if not a.vec and not b.vec:
                return Ex(f"({a.code} {'and' if isinstance(e, tir.And) else 'or'} {b.code})", frozenset(), "bool")
            fn = "np.logical_and" if isinstance(e, tir.And) else "np.logical_or"
            return Ex(f"{fn}({a.code}, {b.code})", a.axes | b.axes, "bool")
        if isinstance(e, tir.Not):
            a = self.expr(e.a)
            return Ex(f"(not {a.code})" if not a.vec else f"np.logical_not({a.code})", a.axes, "bool")
        if isinstance(e, tir.Select):
            c, t, f = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            if not c.vec:
                return Ex(f"({t.code} if {c.code} else {f.code})", t.axes | f.axes, dt)
            return Ex(f"_rt.where({c.code}, {t.code}, {f.code}, {self.dt(dt)})", c.axes | t.axes | f.axes, dt)
        if isinstance(e, tir.Let):
            v = self.expr(e.value)
            n = self.pyname(e.var.name)
            self.vmap[e.var] = VarInfo(n, v.axes, D.canonical(e.var.dtype))
            body = self.expr(e.body)
            return Ex(f"(({n} := {v.code}), {body.code})[1]", v.axes | body.axes, dt)
        if isinstance(e, tir.BufferLoad):
            return self.load(e)
        if isinstance(e, tir.Call):
            return self.call(e)
        if isinstance(e, (tir.Ramp, tir.Broadcast, tir.Shuffle)):
            raise UnsupportedConstruct(type(e).__name__, "vector (multi-lane) expressions do not appear in "
                                       "pre-lowering TileLang programs")
        raise UnsupportedConstruct(type(e).__name__, f"expression `{short(str(e), 80)}`")

    def _intdiv(self, op: str, a: Ex, b: Ex) -> str:
        if not b.vec and re.fullmatch(r"-?[1-9][0-9]*", b.code):
            return f"({a.code} {op} {b.code})"
        return f"_rt.ifloor{'div' if op == '//' else 'mod'}({a.code}, {b.code})"

    def cast(self, v: Ex, dt: str) -> Ex:
        if v.dtype == dt:
            return v
        src, dst = D.np_dtype(v.dtype), D.np_dtype(dt)
        if v.vec:
            return Ex(f"_rt.cast({v.code}, {self.dt(dt)})", v.axes, dt)
        if D.is_float(dst) and not (dst == np.bool_):
            return Ex(f"{self.dt(dt)}.type({v.code})", v.axes, dt)
        if dst == np.bool_:
            return Ex(f"bool({v.code})", v.axes, dt)
        if D.is_int(dst) and np.can_cast(src, dst, "safe"):     # the value fits: no wrap needed
            return Ex(f"int({v.code})", v.axes, dt)
        return Ex(f"_rt.cast({v.code}, {self.dt(dt)})", v.axes, dt)

    # ------------------------------------------------------------------ calls
    def call(self, e: tir.Call) -> Ex:  # noqa: C901
        name = E.op_name(e)
        dt = D.canonical(e.dtype) if str(e.dtype) not in ("handle", "void") else "handle"
        args = e.args
        if name in UNARY:
            a = self.expr(args[0])
            return Ex(f"{UNARY[name]}({a.code})", a.axes, dt)
        if name in BINARY:
            a, b = self.expr(args[0]), self.expr(args[1])
            return Ex(f"{BINARY[name]}({a.code}, {b.code})", a.axes | b.axes, dt)
        if name in BITWISE:
            a, b = self.expr(args[0]), self.expr(args[1])
            return Ex(f"({a.code} {BITWISE[name]} {b.code})", a.axes | b.axes, dt)
        if name in ("tirx.shift_left", "tirx.shift_right"):
            a, b = self.expr(args[0]), self.expr(args[1])
            return Ex(f"_rt.{name.split('.')[1]}({a.code}, {b.code})", a.axes | b.axes, dt)
        if name == "tl.clamp":
            a, lo, hi = (self.expr(x) for x in args)
            return Ex(f"_rt.clamp({a.code}, {lo.code}, {hi.code})", a.axes | lo.axes | hi.axes, dt)
        if name in IEEE:
            fn, n = IEEE[name]
            mode = args[n].value if len(args) > n and isinstance(args[n], tir.StringImm) else "rn"
            if mode != "rn":
                raise UnsupportedConstruct(f"{name}(..., '{mode}')", "only round-to-nearest ('rn') is emulated")
            xs = [self.expr(a) for a in args[:n]]
            return Ex(f"_as({fn}({', '.join(x.code for x in xs)}), {self.dt(dt)})",
                      frozenset().union(*[x.axes for x in xs]), dt)
        if name == "tirx.if_then_else":
            return self.if_then_else(args, dt)
        if name in ("tirx.likely", "tl.__ldg"):
            return self.expr(args[0])
        if name == "tl.infinity":
            return Ex(self.const(float("inf"), dt), frozenset(), dt)
        if name == "tirx.reinterpret":
            a = self.expr(args[-1])
            return Ex(f"_rt.reinterpret({a.code}, {self.dt(dt)})", a.axes, dt)
        if name in E.CALL_EXTERN:
            return self.extern(e, dt)
        if name in ("tl.any_sync", "tl.all_sync"):
            p = self.expr(args[-1])
            kind = "any" if name == "tl.any_sync" else "all"
            if not p.axes & {0}:
                if p.vec:
                    raise UnsupportedConstruct(f"T.{kind}_sync inside T.Parallel", "a warp vote over a value that "
                                               "varies between T.Parallel iterations")
                return Ex(f"int(bool({p.code}))", frozenset(), dt)
            m = self.mask or "None"
            return Ex(f"_rt.vote({kind!r}, {p.code}, {self.tids}, {m}, {self.ndim})", frozenset({0}), dt)
        if name in ("tl.syncthreads_or", "tl.syncthreads_and", "tl.syncthreads_count"):
            # __syncthreads_or / _and / _count: a barrier of the whole block that returns one value
            # to every thread, so every thread of the block must reach it
            kind = name.rsplit("_", 1)[1]
            p = self.expr(args[-1])
            if p.axes - {0}:
                raise UnsupportedConstruct(f"T.syncthreads_{kind} inside T.Parallel", "a block vote over a value that "
                                           "varies between T.Parallel iterations")
            if self.mask:
                raise UnsupportedConstruct(f"T.syncthreads_{kind}", "under a condition that differs between threads: "
                                           "on the GPU every thread of the block must reach this barrier")
            return Ex(f"_rt.block_vote({kind!r}, {p.code}, {self.tids}, {self.nthreads})", frozenset(), dt)
        if name in ("tl.shfl_xor_sync", "tl.shfl_down_sync", "tl.shfl_up_sync", "tl.shfl_sync"):
            kind = {"tl.shfl_xor_sync": "xor", "tl.shfl_down_sync": "down", "tl.shfl_up_sync": "up",
                    "tl.shfl_sync": "idx"}[name]
            v, d = self.expr(args[1]), self.expr(args[2])
            w = self.expr(args[3]) if len(args) > 3 else Ex("32", frozenset(), "int32")
            if d.axes & {0} and kind != "idx":
                raise UnsupportedConstruct(name, "a lane offset that differs between threads")
            return Ex(f"_rt.shfl({kind!r}, {v.code}, {d.code}, {w.code}, {self.tids}, {self.ndim})",
                      v.axes | frozenset({0}), dt)
        if name in ("tl.get_lane_idx", "tl.get_warp_idx", "tl.get_warp_idx_sync"):
            ws = self.expr(args[0]).code if args else "32"
            op = "%" if name == "tl.get_lane_idx" else "//"
            return Ex(f"({self.tflat} {op} {ws})", frozenset({0}), dt)
        if name == "tl.get_warp_group_idx":
            ws = self.expr(args[0]).code if len(args) > 0 else "32"
            wpg = self.expr(args[1]).code if len(args) > 1 else "4"
            return Ex(f"({self.tflat} // ({ws} * {wpg}))", frozenset({0}), dt)
        if name == "tl.tl_shuffle_elect":
            n = self.expr(args[0]).code if args else "0"
            return Ex(f"(({self.tflat} % {n}) == 0 if {n} else ({self.tflat} == {self.tids}[0]))",
                      frozenset({0}), "bool")
        if name in E.ELEM_ATOMICS:
            return self.elem_atomic(e, value_needed=True)
        if name == E.LAUNCH_THREAD_IDX:
            raise UnsupportedConstruct(name, "a thread index outside a T.Kernel binding")
        raise UnsupportedConstruct(name, "this intrinsic has no CPU emulation (see docs/emulator.md for the "
                                   "supported ones)")

    def extern(self, e: tir.Call, dt: str) -> Ex:
        fname = e.args[0].value if isinstance(e.args[0], tir.StringImm) else str(e.args[0])
        if fname in E.PRINT_FUNCS:
            raise UnsupportedConstruct(f"call_extern('{fname}')", "T.print used inside an expression")
        if fname not in EXTERN:
            raise UnsupportedConstruct(f"T.call_extern('{fname}')", "no CPU implementation of this extern function "
                                       "(supported: " + ", ".join(sorted(EXTERN)) + ")")
        fn, n = EXTERN[fname]
        xs = [self.expr(a) for a in e.args[1:]]
        if len(xs) != n:
            raise UnsupportedConstruct(f"T.call_extern('{fname}')", f"{len(xs)} arguments, expected {n}")
        return Ex(f"_as({fn}({', '.join(x.code for x in xs)}), {self.dt(dt)})",
                  frozenset().union(*[x.axes for x in xs]), dt)

    def if_then_else(self, args, dt: str) -> Ex:
        c = self.expr(args[0])
        if not c.vec:
            t, f = self.expr(args[1]), self.expr(args[2])
            return Ex(f"({t.code} if {c.code} else {f.code})", t.axes | f.axes, dt)
        # lazy per lane: each branch's loads are checked only on the lanes that select it
        cn = self.tmp("_c")
        old = (self.mask, self.mask_axes)
        base = f"{self.mask} & " if self.mask else ""
        self.mask, self.mask_axes = f"({base}{cn})", old[1] | c.axes
        t = self.expr(args[1])
        self.mask = f"({base}np.logical_not({cn}))"
        f = self.expr(args[2])
        self.mask, self.mask_axes = old
        return Ex(f"_rt.where(({cn} := {c.code}), {t.code}, {f.code}, {self.dt(dt)})", c.axes | t.axes | f.axes, dt)

    # ------------------------------------------------------------------ loads and stores
    def _index_exs(self, bi: BufInfo, indices) -> list:
        exs = [self.expr(i) for i in indices]
        if bi.per_thread:
            exs = [Ex(self.tflat, frozenset({0}), "int32")] + exs
        return exs

    def _proven(self, buf: tir.Buffer, indices) -> bool:
        try:
            for i, n in zip(indices, buf.shape):
                if not (self.analyzer.can_prove(i >= 0) and self.analyzer.can_prove(i < n)):
                    return False
            return True
        except Exception:  # noqa: BLE001
            return False

    def _slice_plan(self, bi: BufInfo, indices, exs):
        """Per dimension ('s', start code, n code, step, axis) or ('i', code); None if not sliceable."""
        if bi.per_thread:
            return None
        plan, used = [], set()
        par = {v: (d, lo, n) for v, d, lo, n in self.par_loops}
        for i, ex in zip(indices, exs):
            if not ex.vec:
                plan.append(("i", ex.code))
                continue
            if 0 in ex.axes or len(ex.axes) != 1:
                return None
            (d,) = tuple(ex.axes)
            var = next((v for v, (dd, _, _) in par.items() if dd == d), None)
            if var is None or d in used:
                return None
            try:
                coeffs = arith.detect_linear_equation(i, [var])
            except Exception:  # noqa: BLE001
                return None
            if len(coeffs) != 2 or not isinstance(coeffs[0], tir.IntImm) or int(coeffs[0].value) < 1:
                return None
            stride = int(coeffs[0].value)
            base = self.expr(coeffs[1])
            if base.vec:
                return None
            _, lo, n = par[var]
            start = f"{base.code} + {stride} * {lo}" if lo != "0" else base.code
            plan.append(("s", start, n, stride, d))
            used.add(d)
        return plan

    def _slice_code(self, plan, subscript: bool = True) -> str:
        """The index items of a slice plan: ``a:b`` syntax inside a subscript (``subscript``), else
        slice objects (a tuple passed to a helper)."""
        items = []
        for p in plan:
            if p[0] == "i":
                items.append(p[1])
                continue
            _, start, n, step, _ = p
            const = re.fullmatch(r"[0-9]+", start) and re.fullmatch(r"[0-9]+", n)
            if const:
                a, b = int(start), int(start) + int(n) * step
                if subscript:
                    items.append(f"{a}:{b}" + (f":{step}" if step != 1 else ""))
                else:
                    items.append(f"slice({a}, {b}, {step})")
            elif subscript and re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", start) and step == 1:
                items.append(f"{start}:{start} + {n}")
            else:
                items.append(f"_rt.sl({start}, {n}, {step})")
        return ", ".join(items) + ("," if len(items) == 1 else "")

    def _post(self, plan) -> str:
        """Code suffix that lays a sliced view out in vector axes: transpose + new axes."""
        axes = [p[4] for p in plan if p[0] == "s"]
        suffix = ""
        order = sorted(range(len(axes)), key=lambda k: axes[k])
        if order != list(range(len(axes))):
            suffix += f".transpose({', '.join(map(str, order))})"
        present = set(axes)
        items = [":" if a in present else "None" for a in range(self.ndim)]
        if items != [":"] * len(axes):
            suffix += f"[{', '.join(items)}]"
        return suffix

    def _post_fn(self, suffix: str) -> str:
        key = "_post:" + suffix
        if key not in self.globals:
            self.globals[key] = None
            n = self.gname(None, "_P")
            self.globals[n] = eval(f"lambda v: v{suffix}", {"np": np})  # noqa: S307 (our own code)
            self.globals[key] = n
        return self.globals[key]

    def load(self, e: tir.BufferLoad) -> Ex:
        bi = self.buf(e.buffer)
        if bi.is_barrier:
            return Ex(self._barrier_ref(e), frozenset(), "handle")
        ex = self._load(e, bi)
        roles = self.role_mode and bi.scope in E.SHARED_SCOPES
        if not (self.check_uninit or roles) or bi.scope == "global":
            return ex
        ixf = self._ixf(bi, e.indices, ex.vec)
        m = self.mask or "None"
        if self.check_uninit:
            ex = Ex(f"_rt.u(_x, {bi.ref}, {bi.name}, {ex.code}, {m}, {ixf})", ex.axes, ex.dtype)
        if roles:
            ex = Ex(f"_rt.rl(_x, {bi.ref}, {ex.code}, {m}, {ixf})", ex.axes, ex.dtype)
        return ex

    def _ixf(self, bi: BufInfo, indices, vec: bool) -> str:
        """Code of a lambda giving the elements an access touches, for the checks' reports:
        ('sl', slices, post) or ('ix', index tuple)."""
        exs = self._index_exs(bi, indices)
        plan = self._slice_plan(bi, indices, exs) if vec else None
        if plan is not None:
            return f"lambda: ('sl', ({self._slice_code(plan, False)}), {self._post_fn(self._post(plan))})"
        ix = ", ".join(x.code for x in exs) + ("," if len(exs) == 1 else "")
        return f"lambda: ('ix', ({ix}))"

    def _fixed(self, bi: BufInfo, indices, mask: str | None = None) -> str:
        """Keyword arguments for a global access helper: its unguarded dimensions (see
        :func:`_unguarded_dims`), and the ``mask`` of the lanes that perform it; "" if none."""
        if bi.scope != "global":
            return ""
        dims = _unguarded_dims(bi.buffer, indices)
        if not dims:
            return ""
        return f", fixed={dims!r}" + (f", mask={mask}" if mask else "")

    def _load(self, e: tir.BufferLoad, bi: BufInfo) -> Ex:
        exs = self._index_exs(bi, e.indices)
        axes = frozenset().union(*[x.axes for x in exs]) if exs else frozenset()
        dt = bi.dtype
        ref, arr = bi.ref, bi.name
        if not axes:
            ix = ", ".join(x.code for x in exs) + ("," if len(exs) == 1 else "")
            if self._proven(e.buffer, e.indices):
                return Ex(f"{arr}[{ix}]", frozenset(), dt)
            if bi.scope == "global":
                return Ex(f"_rt.gld1({ref}, {arr}, ({ix}), _x{self._fixed(bi, e.indices, self.mask)})",
                          frozenset(), dt)
            return Ex(f"{arr}[_rt.ck({ref}, {arr}, ({ix}))]", frozenset(), dt)
        plan = self._slice_plan(bi, e.indices, exs)
        m = self.mask or "None"
        fx = self._fixed(bi, e.indices)
        if plan is not None:
            sl = self._slice_code(plan)
            post = self._post(plan)
            if self._proven(e.buffer, e.indices):
                return Ex(f"{arr}[{sl}]{post}", axes, dt)
            return Ex(f"_rt.view_load({ref}, {arr}, ({self._slice_code(plan, False)}), {m}, _x, "
                      f"{self._post_fn(post)}{fx})", axes, dt)
        ix = ", ".join(x.code for x in exs) + ("," if len(exs) == 1 else "")
        if self._proven(e.buffer, e.indices) and not bi.per_thread:
            return Ex(f"{arr}[{ix}]", axes, dt)
        return Ex(f"_rt.gather({ref}, {arr}, ({ix}), {m}, _x{fx})", axes, dt)

    def store(self, s: tir.BufferStore) -> None:
        bi = self.buf(s.buffer)
        if bi.scope in E.SHARED_SCOPES:
            # a statement that reads other elements of the shared buffer it writes: lanes of other
            # threads may read an element in the same step that one writes (no barrier between)
            others = []

            def fn(n):
                if isinstance(n, tir.BufferLoad) and n.buffer.data.same_as(s.buffer.data) and not (
                        len(n.indices) == len(s.indices)
                        and all(tvm.ir.structural_equal(a, b) for a, b in zip(n.indices, s.indices))):
                    others.append(n)
            tir.stmt_functor.post_order_visit(tir.Evaluate(s.value), fn)
            if others:
                wvec = bool(frozenset().union(*[x.axes for x in self._index_exs(bi, s.indices)]))
                rs_ = ", ".join(self._ixf(bi, n.indices, True) for n in others)
                self.emit(f"_rt.step_rw(_x, {bi.ref}, {bi.name}, {self._ixf(bi, s.indices, wvec)}, [{rs_}], "
                          f"{self.mask or 'None'}, {self.tids})")
        self._store(s)
        if self.role_mode and bi.scope in E.SHARED_SCOPES:
            vec = bool(frozenset().union(*[x.axes for x in self._index_exs(bi, s.indices)])) if s.indices else False
            self.emit(f"_rt.rs(_x, {bi.ref}, {self.mask or 'None'}, {self._ixf(bi, s.indices, vec)})")

    def _store(self, s: tir.BufferStore) -> None:
        bi = self.buf(s.buffer)
        if bi.is_barrier:
            raise UnsupportedConstruct("store to an mbarrier", f"`{stmt_text(s)}`")
        val = self.expr(s.value)
        if val.dtype != bi.dtype:
            val = self.cast(val, bi.dtype)
        exs = self._index_exs(bi, s.indices)
        iaxes = frozenset().union(*[x.axes for x in exs]) if exs else frozenset()
        ref, arr = bi.ref, bi.name
        mask, maxes = self.mask, self.mask_axes
        if mask and (maxes & {0}) and not (iaxes & {0}) and not (val.axes & {0}):
            # a per-thread condition around an element nobody owns by thread index: written if any
            # active thread writes it (the value is the same for all of them)
            mask = f"_rt_mask_any_threads({mask})"
            maxes = maxes - {0}
        ix = ", ".join(x.code for x in exs) + ("," if len(exs) == 1 else "")
        proven = self._proven(s.buffer, s.indices)
        fx = self._fixed(bi, s.indices)
        if not iaxes:
            if not val.vec and not mask:
                if proven:
                    self.emit(f"{arr}[{ix}] = {val.code}")
                elif bi.scope == "global":
                    self.emit(f"_rt.gst1({ref}, {arr}, ({ix}), {val.code}, _x{fx})")
                else:
                    self.emit(f"{arr}[_rt.ck({ref}, {arr}, ({ix}), 'write')] = {val.code}")
                return
            self.emit(f"_rt.store_lanes({ref}, {arr}, ({ix}), {val.code}, {mask or 'None'}, _x{fx})")
            return
        plan = self._slice_plan(bi, s.indices, exs)
        if plan is not None and val.axes <= iaxes and maxes <= iaxes:
            sl = self._slice_code(plan)
            post = self._post(plan)
            if proven:
                if mask:
                    self.emit(f"np.copyto({arr}[{sl}]{post}, {val.code}, where={mask}, casting='unsafe')")
                else:
                    self.emit(f"{arr}[{sl}]{post}[...] = {val.code}")
                return
            self.emit(f"_rt.view_store({ref}, {arr}, ({self._slice_code(plan, False)}), {val.code}, "
                      f"{mask or 'None'}, _x, {self._post_fn(post)}{fx})")
            return
        self.emit(f"_rt.scatter({ref}, {arr}, ({ix}), {val.code}, {mask or 'None'}, _x{fx})")

    # ------------------------------------------------------------------ statements
    def stmt(self, s) -> None:  # noqa: C901
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.stmt(x)
            return
        if isinstance(s, tir.SBlockRealize):
            pred = s.predicate
            if isinstance(pred, tir.IntImm) and int(pred.value) == 1:
                self.block(s.block)
            else:
                with self.site(s):
                    c = self.expr(pred)
                    self.emit(f"if {self.uniform(c, 'block predicate')}:")
                with self.indent():
                    self.block(s.block)
                    self.emit("pass")
            return
        if isinstance(s, tir.SBlock):
            self.block(s)
            return
        if isinstance(s, tir.For):
            self.for_(s)
            return
        if isinstance(s, tir.Bind):
            self.bind(s)
            return
        if isinstance(s, tir.BufferStore):
            with self.site(s):
                self.store(s)
            return
        if isinstance(s, tir.IfThenElse):
            self.if_(s)
            return
        if isinstance(s, tir.Evaluate):
            with self.site(s):
                self.evaluate(s)
            return
        if isinstance(s, tir.AttrStmt):
            if s.attr_key == E.SWIZZLE_ATTR:
                with self.site(s, text="T.use_swizzle"):
                    _check_swizzle(s.value)
            with self.var_scope():
                self.stmt(s.body)
            return
        if isinstance(s, tir.While):
            with self.site(s):
                c = self.expr(s.condition)
                self.emit(f"while {self.uniform(c, 'while condition')}:")
            with self.indent():
                with self.var_scope():
                    self.stmt(s.body)
                self.emit("pass")
            return
        if isinstance(s, tir.AssertStmt):
            with self.site(s):
                c = self.expr(s.condition)
                msg = s.message.value if isinstance(s.message, tir.StringImm) else str(s.message)
                self.emit(f"if not np.all({c.code}): raise _EmulationError('assertion failed: ' + {msg!r})")
            return
        if isinstance(s, tir.AllocBuffer):
            with self.site(s):
                self.alloc_buffers([s.buffer], {})
            return
        if isinstance(s, tir.DeclBuffer):
            with self.site(s):
                self.buf(s.buffer) if s.buffer.data in self.bmap else self.alloc_buffers([s.buffer], {})
            return
        raise UnsupportedConstruct(type(s).__name__, f"statement `{stmt_text(s)}`")

    def bind(self, s: tir.Bind) -> None:
        v = s.value
        if isinstance(v, tir.Call) and E.op_name(v) == E.LAUNCH_THREAD_IDX:
            axis = E.int_value(v.args[0], "tl.launch_thread_idx axis")
            n = self.pyname(s.var.name)
            self.vmap[s.var] = VarInfo(n, frozenset({0}), D.canonical(s.var.dtype))
            self.thread_var_names[axis] = (s.var, n)
            X, Y, Z = self.thread_dims
            code = {0: f"({self.tflat} % {X})" if (Y > 1 or Z > 1) else self.tflat,
                    1: f"(({self.tflat} // {X}) % {Y})", 2: f"({self.tflat} // {X * Y})"}[axis]
            self.emit(f"{n} = {code}")
            if (X, Y, Z)[axis] >= 1:
                with contextlib.suppress(Exception):
                    self.analyzer.bind(s.var, tvm.ir.Range.from_min_extent(0, (X, Y, Z)[axis]))
            return
        if _uses_unbound(v, self.vmap, self.deferred):
            self.deferred[s.var] = v
            return
        with self.site(s):
            ex = self.expr(v)
            n = self.pyname(s.var.name)
            dt = D.canonical(s.var.dtype)
            if ex.dtype != dt and dt != "handle":
                ex = self.cast(ex, dt)
            self.vmap[s.var] = VarInfo(n, ex.axes, dt)
            self.emit(f"{n} = {ex.code}")
            if not ex.vec:
                with contextlib.suppress(Exception):
                    self.analyzer.bind(s.var, v)

    # ------------------------------------------------------------------ loops
    def for_(self, s: tir.For) -> None:
        kind = int(s.kind)
        if kind == int(tir.ForKind.THREAD_BINDING):
            tag = s.thread_binding.thread_tag if s.thread_binding is not None else ""
            if tag.startswith("blockIdx"):
                if self.kernel_index >= 0 and self.in_kernel:
                    raise UnsupportedConstruct(f"T.thread_binding({tag})", "a block index loop inside a kernel")
                self.kernel(s)
                return
            raise UnsupportedConstruct(f"T.thread_binding({tag})", "explicit thread-index loops; use "
                                       "T.Kernel(..., threads=...) and T.get_thread_binding()")
        with self.site(s, text=stmt_text(s)):
            lo, ext = self.expr(s.min), self.expr(s.extent)
            step = s.step if getattr(s, "step", None) is not None else None
            if kind == FOR_PARALLEL:
                self.parallel(s, lo, ext)
                return
            if kind not in (FOR_SERIAL, FOR_UNROLLED, FOR_VECTORIZED):
                raise UnsupportedConstruct(f"For loop kind {s.kind}", stmt_text(s))
        self.serial_loop(s, lo, ext, "serial")

    def serial_loop(self, s: tir.For, lo: Ex, ext: Ex, kind_label: str) -> None:
        step = s.step if getattr(s, "step", None) is not None else None
        with self.site(s, text=stmt_text(s)):
            n = self.pyname(s.loop_var.name)
            self.vmap[s.loop_var] = VarInfo(n, frozenset(), D.canonical(s.loop_var.dtype))
            lo_c = self.uniform(lo, f"lower bound of loop {s.loop_var.name}")
            ext_c = self.uniform(ext, f"extent of loop {s.loop_var.name}")
            if step is not None and not (isinstance(step, tir.IntImm) and int(step.value) == 1):
                st = self.uniform(self.expr(step), f"step of loop {s.loop_var.name}")
                self.emit(f"for {n} in range({lo_c}, {lo_c} + ({ext_c}) * ({st}), {st}):")
            elif lo_c == "0":
                self.emit(f"for {n} in range({ext_c}):")
            else:
                self.emit(f"for {n} in range({lo_c}, {lo_c} + {ext_c}):")
        with contextlib.suppress(Exception):
            self.analyzer.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))
        self.loops.append((s.loop_var.name, n, kind_label))
        with self.indent():
            with self.var_scope():
                self.stmt(s.body)
            self.emit("pass")
        self.loops.pop()

    def parallel_plan(self, s: tir.For) -> bool:
        """How TileLang 0.1.15 lowers this ``T.Parallel`` nest, where vectorised lockstep execution
        would give another answer: True when the nest must run as per-thread serial loops (a
        fragment element, or a local element with no fragment in the nest, written with an index
        that no loop variable of the nest reaches -- TileLang replicates the nest in every thread:
        ``acc[0] += X[i]`` is a sum). Raises UnsupportedConstruct where the GPU's answer depends
        on the layout TileLang infers (several iterations of a distributed nest writing one element
        of a fragment, local buffer or var; a fragment element read by another iteration than the
        one writing it)."""
        analysis = _nest_accesses(s)
        nontrivial = {v for v, n in analysis["extents"].items() if n != 1}
        if not nontrivial:
            return False
        has_fragment = any(b.scope() == E.FRAGMENT_SCOPE for b, _, _, _ in analysis["accesses"])
        serial = False
        for buf, idx, enclosing, store in analysis["stores"]:
            scope = buf.scope()
            if scope not in (E.FRAGMENT_SCOPE, "local"):
                continue
            encl = {v for v in enclosing if v in nontrivial}
            used = {v for v in encl if any(_uses_var(i, v) for i in idx)}
            if encl and not used:
                if scope == E.FRAGMENT_SCOPE:
                    consts = [int(i.value) for i in idx if isinstance(i, tir.IntImm)]
                    if len(consts) == len(idx) and any(consts):
                        raise UnsupportedConstruct(
                            f"fragment {buf.name}{consts} written inside T.Parallel",
                            f"TileLang 0.1.15 rejects it (\"Fragment buffer access with non-zero index "
                            f"{consts} is not supported. Only fragment[0] access is allowed within T.Parallel "
                            f"loop\"); use {buf.name}[0], a T.serial loop, or T.reduce_*")
                    serial = True
                elif not has_fragment:
                    serial = True
        if serial:
            return True
        for buf, idx, enclosing, store in analysis["stores"]:
            scope = buf.scope()
            encl = [v for v in enclosing if v in nontrivial]
            if scope == E.FRAGMENT_SCOPE or scope == "local":
                missing = [v for v in encl if not any(_uses_var(i, v) for i in idx)]
                if not missing:
                    continue
                rmw = _reads_buffer(store.value, buf)
                if scope == "local" and not rmw:
                    continue         # flag[0] = 1 under a T.Parallel if: same value from every thread
                names = ", ".join(v.name for v in missing)
                raise UnsupportedConstruct(
                    f"{buf.name}[{', '.join(str(i) for i in idx)}] {'updated' if rmw else 'written'} by several "
                    f"T.Parallel iterations ({names})",
                    f"TileLang 0.1.15 gives those iterations to different threads, each keeping its own copy of "
                    f"the element, so the GPU does not compute {'a reduction' if rmw else 'one value'} here; "
                    + ("use T.reduce_sum / T.reduce_max (or a one-element fragment, acc[0] += ..., which TileLang "
                       "runs serially in every thread)" if scope == "local" else
                       f"use T.reduce_sum / T.reduce_max (or write {buf.name}[0] so the loop runs serially in "
                       "every thread)"))
            elif scope == "local.var":
                if any(_uses_var(store.value, v) for v in encl) or any(_uses_var(i, v) for i in idx for v in encl):
                    raise UnsupportedConstruct(
                        f"T.alloc_var {buf.name} {'updated' if _reads_buffer(store.value, buf) else 'written'} "
                        f"inside T.Parallel with a value of the loop variables",
                        "TileLang 0.1.15 distributes the iterations over the threads, each thread keeps its own "
                        "value of the var, so the GPU does not compute a reduction here; use a one-element "
                        f"fragment (acc[0] += ...) or T.reduce_*")
        written = {}
        for buf, idx, _, _ in analysis["stores"]:
            if buf.scope() == E.FRAGMENT_SCOPE:
                written.setdefault(buf.data, (buf, idx))
        for buf, idx, _, _ in analysis["accesses"]:
            w = written.get(buf.data)
            if w is None or len(w[1]) != len(idx):
                continue
            if not all(tvm.ir.structural_equal(a, b) for a, b in zip(w[1], idx)):
                raise UnsupportedConstruct(
                    f"fragment {buf.name} written at [{', '.join(map(str, w[1]))}] and read at "
                    f"[{', '.join(map(str, idx))}] in one T.Parallel nest",
                    "an iteration reads an element another iteration writes (a loop-carried dependence through "
                    "a fragment); TileLang 0.1.15 cannot lower it (layout inference fails); copy through shared "
                    "memory or split the loop")
        return False

    def parallel(self, s: tir.For, lo: Ex, ext: Ex) -> None:
        if self.serial_par == 0 and self.depth == 0 and not contains(s.body, is_collective) \
                and self.parallel_plan(s):
            self.serial_par += 1
            try:
                self.serial_loop(s, lo, ext, "T.Parallel run serially in every thread")
            finally:
                self.serial_par -= 1
            return
        if self.serial_par:
            if contains(s.body, is_collective):
                raise UnsupportedConstruct("tile operator inside T.Parallel", stmt_text(s))
            self.serial_loop(s, lo, ext, "T.Parallel run serially in every thread")
            return
        if contains(s.body, is_collective):
            bad = []
            from .analysis import walk

            def find(n):
                if not bad and is_collective(n):
                    bad.append(n)
            walk(s.body, find)
            raise UnsupportedConstruct(E.op_name(bad[0].value), "a tile operator or barrier inside T.Parallel "
                                       f"(`{stmt_text(bad[0])}`)")
        self.depth += 1
        d = self.depth
        if d >= self.ndim:
            raise EmulationError("internal: parallel depth exceeds the kernel's vector rank")
        n = self.pyname(s.loop_var.name)
        lo_c = self.uniform(lo, f"lower bound of T.Parallel loop {s.loop_var.name}")
        ext_c = self.uniform(ext, f"extent of T.Parallel loop {s.loop_var.name}")
        if not re.fullmatch(r"[0-9]+", lo_c):
            lo_n = self.tmp("_lo")
            self.emit(f"{lo_n} = {lo_c}")
            lo_c = lo_n
        if not re.fullmatch(r"[0-9]+", ext_c):
            n_n = self.tmp("_n")
            self.emit(f"{n_n} = {ext_c}")
            ext_c = n_n
        self.emit(f"{n} = _rt.ar({lo_c}, {ext_c}, {d}, {self.ndim})")
        self.emit("_x.stats['parallel_loops'] += 1")
        self.vmap[s.loop_var] = VarInfo(n, frozenset({d}), D.canonical(s.loop_var.dtype))
        self.par_loops.append((s.loop_var, d, lo_c, ext_c))
        self.loops.append((s.loop_var.name, n, "parallel"))
        with contextlib.suppress(Exception):
            self.analyzer.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))
        with self.var_scope():
            self.stmt(s.body)
        self.loops.pop()
        self.par_loops.pop()
        self.depth -= 1

    # ------------------------------------------------------------------ if
    def if_(self, s: tir.IfThenElse) -> None:
        with self.site(s, text="if " + short(str(s.condition), 120)):
            c = self.expr(s.condition)
        if not c.vec:
            with self.site(s, text="if " + short(str(s.condition), 120)):
                self.emit(f"if {c.code}:")
            with self.indent():
                with self._assume(s.condition):
                    with self.var_scope():
                        self.stmt(s.then_case)
                self.emit("pass")
            if s.else_case is not None:
                self.emit("else:")
                with self.indent():
                    with self._assume(tir.Not(s.condition)):
                        with self.var_scope():
                            self.stmt(s.else_case)
                    self.emit("pass")
            return
        collective = contains(s.then_case, is_collective) or (
            s.else_case is not None and contains(s.else_case, is_collective))
        if collective:
            if c.axes - {0}:
                raise UnsupportedConstruct("tile operator under a T.Parallel condition", f"`if {s.condition}`")
            self.role_split(s, c)
            return
        # masked execution
        with self.site(s, text="if " + short(str(s.condition), 120)):
            cn = self.tmp("_m")
            self.emit(f"{cn} = {c.code}")
            old = (self.mask, self.mask_axes)
            base = self.mask
            then_m = f"({base} & {cn})" if base else cn
            mt = self.tmp("_m")
            self.emit(f"{mt} = {then_m}")
        self.mask, self.mask_axes = mt, old[1] | c.axes
        # (no analyzer constraint here: vector accesses cover every lane, masked-off ones included)
        self.emit(f"if np.any({mt}):")
        with self.indent():
            with self.var_scope():
                self.stmt(s.then_case)
            self.emit("pass")
        if s.else_case is not None:
            me = self.tmp("_m")
            self.emit(f"{me} = " + (f"({base} & np.logical_not({cn}))" if base else f"np.logical_not({cn})"))
            self.mask = me
            self.emit(f"if np.any({me}):")
            with self.indent():
                with self.var_scope():
                    self.stmt(s.else_case)
                self.emit("pass")
        self.mask, self.mask_axes = old

    def role_split(self, s: tir.IfThenElse, c: Ex) -> None:
        """Warp specialisation: the branches run as concurrent roles (generator functions)."""
        if self.mask:
            raise UnsupportedConstruct("warp-specialised branch under a per-thread condition",
                                       f"`if {s.condition}` is nested in another thread-index if without tile ops")
        if not self.role_mode:
            raise EmulationError("internal: role split outside role mode")
        text = short(str(s.condition), 80)
        with self.site(s, text=f"if {text}"):
            sel = self.tmp("_s")
            self.emit(f"{sel} = _rt.tcond({c.code}, {self.tids}.size)")
        branches = [(s.then_case, sel, text, s.condition)]
        if s.else_case is not None:
            nsel = self.tmp("_s")
            self.emit(f"{nsel} = np.logical_not({sel})")
            branches.append((s.else_case, nsel, f"not ({text})", tir.Not(s.condition)))
        specs = []
        for body, selname, label, cond in branches:
            fn = self.tmp("_role")
            role_label = " / ".join(self.role_names + [label])
            self.emit(f"def {fn}():")
            with self.indent():
                saved = (dict(self.vmap), self.tids, self.tflat, dict(self.thread_var_names))
                self.role_names.append(label)
                tids = self.tmp("_tids")
                tf = self.tmp("_tf")
                self.emit(f"{tids} = {self.tids}[{selname}]")
                self.emit(f"{tf} = _rt.threads_axis({tids}, {self.ndim})")
                for var, vi in list(self.vmap.items()):
                    if 0 in vi.axes and var not in [v for v, _ in self.thread_var_names.values()]:
                        nn = self.pyname(vi.name + "_r")
                        self.emit(f"{nn} = _rt.tsel({vi.name}, {selname})")
                        self.vmap[var] = VarInfo(nn, vi.axes, vi.dtype)
                self.tids, self.tflat = tids, tf
                X, Y, Z = self.thread_dims
                for axis, (var, _) in list(self.thread_var_names.items()):
                    nn = self.pyname(var.name + "_r")
                    code = {0: f"({tf} % {X})" if (Y > 1 or Z > 1) else tf,
                            1: f"(({tf} // {X}) % {Y})", 2: f"({tf} // {X * Y})"}[axis]
                    self.emit(f"{nn} = {code}")
                    self.vmap[var] = VarInfo(nn, frozenset({0}), self.vmap[var].dtype)
                    self.thread_var_names[axis] = (var, nn)
                with self._assume(cond):
                    self.stmt(body)
                self.emit("if False:")
                self.emit("    yield None")
                self.role_names.pop()
                self.vmap, self.tids, self.tflat, self.thread_var_names = saved[0], saved[1], saved[2], saved[3]
            specs.append(f"({selname}, {fn}, {role_label!r})")
        with self.site(s, text=f"if {text}"):
            self.emit(f"yield _Split(({', '.join(specs)},))")

    # ------------------------------------------------------------------ kernels and blocks
    in_kernel = False

    def kernel(self, s: tir.For) -> None:
        """A T.Kernel grid: nested blockIdx loops around the block body."""
        loops = []
        body = s
        while is_thread_binding_loop(body) and body.thread_binding.thread_tag.startswith("blockIdx"):
            loops.append(body)
            body = body.body
        self.kernel_index += 1
        kidx = self.kernel_index
        threads = _find_launch_threads(body) or [1, 1, 1]
        X, Y, Z = threads
        self.thread_dims = (X, Y, Z)
        self.nthreads = X * Y * Z
        self.ndim = 1 + max_parallel_depth(body)
        self.role_mode = _needs_roles(body, self.ta)
        self.in_kernel = True
        self.thread_var_names = {}
        info = {"threads": (X, Y, Z), "role_mode": self.role_mode, "ndim": self.ndim, "grid": []}
        self.kernels.append(info)
        axis_vars = {}
        with self.site(s, text=f"T.Kernel #{kidx + 1} (" + ", ".join(
                f"{lp.thread_binding.thread_tag}={lp.extent}" for lp in loops) + f", threads={threads})"):
            for lp in loops:
                tag = lp.thread_binding.thread_tag[-1]
                if tag in axis_vars:
                    raise UnsupportedConstruct(f"blockIdx.{tag}", "bound twice in one kernel")
                n = self.pyname(lp.loop_var.name)
                self.vmap[lp.loop_var] = VarInfo(n, frozenset(), D.canonical(lp.loop_var.dtype))
                ext = self.expr(lp.extent)
                if ext.vec or not _is_const_expr_of(lp.extent, [x.loop_var for x in loops], negate=True):
                    raise UnsupportedConstruct("grid extent", f"`{lp.extent}` depends on another block index")
                lo = self.expr(lp.min)
                axis_vars[tag] = (lp, n, ext.code, lo.code)
                with contextlib.suppress(Exception):
                    self.analyzer.bind(lp.loop_var, tvm.ir.Range.from_min_extent(lp.min, lp.extent))
                info["grid"].append((tag, str(lp.extent)))
            params = [axis_vars[t][1] for t in "xyz" if t in axis_vars]
            blk = f"_blk{kidx}"
            tids_g = self.gname(np.arange(self.nthreads, dtype=np.int64), "_TIDS")
            self.emit(f"def {blk}({', '.join(params)}):")
        saved_tids = (self.tids, self.tflat)
        with self.indent():
            self.tids, self.tflat = "_tids", "_tf"
            self.emit(f"_tids = {tids_g}")
            self.emit(f"_tf = _rt.threads_axis(_tids, {self.ndim})")
            self.loops = []
            with self.var_scope():
                self.stmt(body)
            if self.role_mode:
                self.emit("if False:")
                self.emit("    yield None")
            self.emit("return None")
        self.tids, self.tflat = saved_tids
        # the launch: blocks in linear order, blockIdx.x fastest
        with self.site(s, text=f"T.Kernel #{kidx + 1} launch"):
            self.emit("_x.stats['kernels'] += 1")
            self.emit(f"_x.threads = ({X}, {Y}, {Z}); _x.nthreads = {self.nthreads}")
            loop_depth = 0
            names = {"x": "0", "y": "0", "z": "0"}
            for t in "zyx":
                if t not in axis_vars:
                    continue
                lp, n, ext_c, lo_c = axis_vars[t]
                names[t] = n
                rng = f"range({ext_c})" if lo_c == "0" else f"range({lo_c}, {lo_c} + {ext_c})"
                self.emit(f"for {n} in {rng}:")
                self.ind += 1
                loop_depth += 1
            self.emit(f"_x.block = ({names['x']}, {names['y']}, {names['z']})")
            call = f"{blk}({', '.join(params)})"
            if self.role_mode:
                self.emit(f"_run_roles(_x, {call}, {tids_g})")
            else:
                self.emit(f"_x.stats['blocks'] += 1; _x.named = {{}}; {call}")
            self.ind -= loop_depth
        self.in_kernel = False

    def block(self, b: tir.SBlock) -> None:
        if b.init is not None:
            raise UnsupportedConstruct("T.block init", "reduction blocks with an init statement")
        if len(b.match_buffers):
            raise UnsupportedConstruct("T.match_buffer inside a block")
        ann = dict(b.annotations) if b.annotations is not None else {}
        counts = {}
        if E.BARRIER_INIT in ann:
            for data, cnt in dict(ann[E.BARRIER_INIT]).items():
                counts[data] = [int(c) for c in cnt]
        with self.site(b, text=f"block {b.name_hint}: allocations"):
            self.alloc_buffers(list(b.alloc_buffers), counts)
            if E.SAFE_VALUE_MAP in ann:
                for data, val in dict(ann[E.SAFE_VALUE_MAP]).items():
                    entry = self.bmap.get(data)
                    if not entry:
                        raise UnsupportedConstruct("T.annotate_safe_value", "of a buffer that is not a parameter")
                    v = self.expr(val)
                    for bi in entry.values():
                        self.emit(f"{bi.ref}.safe = {self.dt(bi.dtype)}.type({self.uniform(v, 'safe value')})")
        self.stmt(b.body)

    def alloc_buffers(self, bufs, counts) -> None:
        for buf in bufs:
            scope = buf.scope()
            bi = self._register_buffer(buf, scope)
            shape = [self.uniform(self.expr(x), f"shape of {buf.name}") for x in buf.shape]
            shp = "(" + ", ".join(shape) + ("," if len(shape) == 1 else "") + ")"
            if bi.is_barrier:
                cnt = None
                for data, c in counts.items():
                    if data.same_as(buf.data):
                        cnt = c
                self.emit(f"{bi.name} = _rt.alloc_barriers({buf.name!r}, {shp}, {cnt!r})")
            elif scope == "global":
                raise UnsupportedConstruct("global buffer allocation inside a kernel", buf.name)
            else:
                if bi.per_thread:
                    shp = f"({self.nthreads}, " + ", ".join(shape) + ")"
                self.emit(f"{bi.name} = _rt.alloc({shp}, {self.dt(bi.dtype)}, _x, {bi.ref})")

    def _barrier_ref(self, load: tir.BufferLoad) -> str:
        bi = self.buf(load.buffer)
        if not bi.is_barrier:
            raise UnsupportedConstruct("barrier operand", f"{load.buffer.name} (scope {bi.scope}) is not an "
                                       "mbarrier (T.alloc_barrier)")
        exs = [self.expr(i) for i in load.indices]
        ix = ", ".join(self.uniform(x, "mbarrier index") for x in exs) + ("," if len(exs) == 1 else "")
        return f"{bi.name}[_rt.ck({bi.ref}, {bi.name}, ({ix}))]"

    def _barrier_ptr_ref(self, arg, what: str) -> str:
        """An mbarrier given as a pointer (``tvm_access_ptr(..., bar.data, offset, ...)``, ...)."""
        load, data, offset = E.decode_barrier_pointer(arg, what)
        if load is not None:
            return self._barrier_ref(load)
        entry = self.bmap.get(data)
        bi = next(iter(entry.values())) if entry else None
        if bi is None or not bi.is_barrier:
            raise UnsupportedConstruct(what, f"`{arg}` does not point to an mbarrier (T.alloc_barrier)")
        off = self.uniform(self.expr(offset), "mbarrier pointer offset")
        flat = f"{bi.name}.reshape(-1)"
        return f"{flat}[_rt.ck({bi.ref}, {flat}, ({off},))]"

    # ------------------------------------------------------------------ Evaluate
    def evaluate(self, s: tir.Evaluate) -> None:  # noqa: C901
        v = s.value
        if not isinstance(v, tir.Call):
            if isinstance(v, (tir.IntImm, tir.FloatImm, tir.StringImm)):
                return
            self.emit(self.expr(v).code)
            return
        name = E.op_name(v)
        if name in E.NOOP_OPS:
            self.emit(f"pass  # {name}: performance only")
            return
        if name in E.TILE_OPS or name.startswith("tl.tileop."):
            self.tile_op(v, name)
            return
        if name == E.MBAR_ARRIVE or name == E.MBAR_ARRIVE_EXPECT_TX:
            bar = self._barrier_ref(v.args[0])
            n = f"{self.tids}.size" if self.role_mode else str(self.nthreads)
            self.emit(f"_rt.mbar_arrive(_x, {bar}, {n})")
            return
        if name == E.TCGEN05_MMA_ARRIVE:
            if E.call_flag(v, "use_2cta"):
                raise UnsupportedConstruct("T.tcgen05_mma_arrive(..., arrive_2cta=True)", "arrivals on the peer "
                                           "CTA's barrier (clusters; blocks run one after another here)")
            bar = self._barrier_ptr_ref(v.args[0], "T.tcgen05_mma_arrive")
            # tcgen05.commit under elect_one_sync: one arrival per warp that executes it; the MMAs
            # issued before it are complete already
            n = f"_rt.nwarps({self.tids})" if self.role_mode else str(-(-self.nthreads // 32))
            self.emit(f"_rt.mbar_arrive(_x, {bar}, {n})")
            return
        if name == E.MBAR_WAIT:
            bar = self._barrier_ref(v.args[0])
            p = self.uniform(self.expr(v.args[1]), "mbarrier parity")
            w = self.tmp("_w")
            self.emit(f"{w} = _rt.mbar_wait({bar}, {p}, _x)")
            if self.role_mode:
                self.emit(f"if {w} is not None: yield {w}")
            else:
                self.emit(f"if {w} is not None: _wait_now(_x, {w})")
            return
        if name == E.STORAGE_SYNC:
            args = list(v.args)
            bid = self.uniform(self.expr(args[1]), "barrier id") if len(args) > 1 else "0"
            cnt = self.uniform(self.expr(args[2]), "barrier thread count") if len(args) > 2 else str(self.nthreads)
            if self.role_mode:
                w = self.tmp("_w")
                who = " / ".join(self.role_names) or "whole block"
                self.emit(f"{w} = _rt.named_sync(_x, {bid}, {cnt}, {self.tids}.size, {who!r})")
                self.emit(f"if {w} is not None: yield {w}")
            else:
                self.emit(f"_sync_plain(_x, {bid}, {cnt})")
            return
        if name == E.NAMED_BARRIER_ARRIVE:
            bid = self.uniform(self.expr(v.args[0]), "barrier id")
            cnt = self.uniform(self.expr(v.args[1]), "barrier thread count")
            who = " / ".join(self.role_names) or "whole block"
            n = f"{self.tids}.size" if self.role_mode else str(self.nthreads)
            self.emit(f"_rt.named_arrive(_x, {bid}, {cnt}, {n}, {who!r})")
            return
        if name in E.ELEM_ATOMICS:
            self.emit(self.elem_atomic(v, value_needed=False).code)
            return
        if name in E.CALL_EXTERN and isinstance(v.args[0], tir.StringImm) and v.args[0].value in E.PRINT_FUNCS:
            self.print_(v)
            return
        if name in ("tl.device_assert", "tl.device_assert_with_msg"):
            c = self.expr(v.args[0])
            msg = v.args[1].value if len(v.args) > 1 and isinstance(v.args[1], tir.StringImm) else ""
            m = self.mask or "True"
            self.emit(f"if not np.all(np.logical_or(np.logical_not({m}), {c.code})): "
                      f"raise _EmulationError('device assert failed' + {(': ' + msg) if msg else ''!r})")
            return
        if name == "tl.loop_break":
            if self.mask or self.depth > 0:
                raise UnsupportedConstruct("T.loop_break under a per-thread condition or inside T.Parallel",
                                           "the emulator runs a block's threads in lockstep; a loop some threads "
                                           "leave early is per-thread SIMT control flow it does not model")
            if not any(kind != "parallel" for _, _, kind in self.loops):
                raise UnsupportedConstruct("T.loop_break outside a loop")
            self.emit("break")
            return
        if name in ("tl.sync_grid",):
            raise UnsupportedConstruct(name, "grid-wide synchronisation (blocks run one after another)")
        ex = self.expr(v)
        self.emit(ex.code)

    def print_(self, v: tir.Call) -> None:
        fname = v.args[0].value
        a = v.args[1:]
        m = self.mask or "None"
        in_par = "True" if self.depth > 0 else "False"
        pre = f"_x, {self.tids}, {m}, {in_par}"
        if fname == "debug_print_msg":
            self.emit(f"_rt.print_msg({pre}, {a[0].value!r})")
        elif fname == "debug_print_var":
            val = self.expr(a[1])
            self.emit(f"_rt.print_var({pre}, {a[0].value!r}, {val.code}, {val.dtype!r})")
        else:
            idx, val = self.expr(a[2]), self.expr(a[3])
            self.emit(f"_rt.print_buffer_value({pre}, {a[0].value!r}, {a[1].value!r}, {idx.code}, {val.code}, "
                      f"{val.dtype!r})")

    def elem_atomic(self, v: tir.Call, value_needed: bool) -> Ex:
        name = E.op_name(v)
        kind, ret = E.ELEM_ATOMICS[name]
        load = E.decode_access_ptr(v.args[0], f"T.atomic_{kind}")
        bi = self.buf(load.buffer)
        exs = self._index_exs(bi, load.indices)
        ix = ", ".join(x.code for x in exs) + ("," if len(exs) == 1 else "")
        axes = frozenset().union(*[x.axes for x in exs]) if exs else frozenset()
        if kind == "load":
            val = Ex("0", frozenset(), bi.dtype)
        else:
            val = self.expr(v.args[1])
            if val.dtype != bi.dtype:
                val = self.cast(val, bi.dtype)
        m = self.mask or "None"
        code = (f"_rt.atomic(_x, {kind!r}, {bi.ref}, {bi.name}, ({ix}), {val.code}, {m}, {ret or value_needed}"
                f"{self._fixed(bi, load.indices)})")
        return Ex(code, axes | val.axes | (self.mask_axes if self.mask else frozenset()), bi.dtype)

    # ------------------------------------------------------------------ tile operators
    def _region_args(self, r: E.Region, op: str):
        bi = self.buf(r.buffer)
        if bi.is_barrier:
            raise UnsupportedConstruct(op, f"operand {r.buffer.name} is an mbarrier")
        if bi.per_thread:
            raise UnsupportedConstruct(op, f"operand {r.buffer.name} is a per-thread local buffer (its value "
                                       "differs between threads)")
        mins = [self.uniform(self.expr(m), f"{op} region start") for m in r.mins]
        exts = [self.uniform(self.expr(x), f"{op} region extent") for x in r.extents]
        tup = lambda xs: "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"  # noqa: E731
        return f"{bi.ref}, {bi.name}, {tup(mins)}, {tup(exts)}"

    def tile_op(self, call: tir.Call, name: str) -> None:
        if self.depth > 0:
            raise UnsupportedConstruct(name, "a tile operator inside T.Parallel")
        if self.mask:
            raise UnsupportedConstruct(name, "a tile operator under a per-thread condition")
        op = E.decode_tile_op(call)
        short_name = "T." + name.rsplit(".", 1)[-1]
        if isinstance(op, E.CopyOp):
            bar = f", bar={self._barrier_ptr_ref(op.barrier, short_name + ' barrier')}" if op.barrier is not None else ""
            self.emit(f"_rt.copy(_x, {self._region_args(op.src, short_name)}, {self._region_args(op.dst, short_name)}, "
                      f"{short_name!r}{bar})")
        elif isinstance(op, E.FillOp):
            bi = self.buf(op.dst.buffer)
            val = self.expr(op.value)
            vcode = f"{self.dt(bi.dtype)}.type({self.uniform(val, 'T.fill value')})"
            self.emit(f"_rt.fill(_x, {self._region_args(op.dst, 'T.fill')}, {vcode})")
        elif isinstance(op, E.ReduceOp):
            src, dst = self._region_args(op.src, "T.reduce"), self._region_args(op.dst, "T.reduce")
            self.emit(f"_rt.reduce(_x, {src}, {dst}, {op.kind!r}, {op.dim}, {op.clear})")
        elif isinstance(op, E.ScanOp):
            self.emit(f"_rt.scan(_x, {op.kind!r}, {self._region_args(op.src, short_name)}, "
                      f"{self._region_args(op.dst, short_name)}, {op.dim}, {op.reverse})")
        elif isinstance(op, E.GemmOp):
            self.gemm(op, short_name)
        elif isinstance(op, E.TransposeOp):
            self.emit(f"_rt.transpose(_x, {self._region_args(op.src, short_name)}, "
                      f"{self._region_args(op.dst, short_name)})")
        elif isinstance(op, E.TileAtomicOp):
            self.emit(f"_rt.tile_atomic(_x, {op.kind!r}, {self._region_args(op.src, short_name)}, "
                      f"{self._region_args(op.dst, short_name)})")
        else:  # pragma: no cover
            raise UnsupportedConstruct(name)

    def gemm(self, op: E.GemmOp, short_name: str) -> None:
        """``T.gemm`` / ``T.wgmma_gemm`` / ``T.tcgen05_gemm``. An accumulator in tensor memory means
        TCGEN5MMA (Blackwell): one thread issues the MMA, whose completion arrives once on ``mbar``;
        the synchronous ``T.gemm`` then waits for that phase (TileLang inserts the wait when
        lowering), ``T.tcgen05_gemm`` does not (the program waits itself)."""
        c_tmem = self.buf(op.C.buffer).scope == E.TMEM_SCOPE
        if op.is_tcgen05 and not c_tmem:
            raise UnsupportedConstruct(f"{short_name} with C = {op.C.buffer.name} (scope {op.C.buffer.scope()})",
                                       "TCGEN5MMA accumulates in tensor memory: C must be a T.alloc_tmem buffer "
                                       "(TileLang 0.1.15 rejects this GEMM)")
        if c_tmem and op.name == E.GEMM and op.mbar is None:
            raise UnsupportedConstruct(f"{short_name} into tensor memory ({op.C.buffer.name}) without mbar=",
                                       "a GEMM with a T.alloc_tmem accumulator is a TCGEN5MMA, which reports its "
                                       "completion on an mbarrier: pass mbar=T.alloc_barrier(1) (TileLang 0.1.15 "
                                       "rejects it without one)")
        clear = self.uniform(self.expr(op.clear_accum), "clear_accum")
        self.emit(f"_rt.gemm(_x, {short_name!r}, {self._region_args(op.A, short_name)}, "
                  f"{self._region_args(op.B, short_name)}, {self._region_args(op.C, short_name)}, "
                  f"{op.transpose_A}, {op.transpose_B}, {clear}, {op.M}, {op.N}, {op.K})")
        if op.mbar is None:
            return
        if not c_tmem:
            # register-accumulator GEMMs (mma.sync, wgmma) do not use the barrier
            self.emit(f"pass  # mbar={op.mbar.buffer.name}: unused by a GEMM whose C is not in tensor memory")
            return
        bar = self._barrier_ref(op.mbar)
        if op.is_tcgen05:
            self.emit(f"_rt.mma_commit(_x, {bar}, None)")
            return
        w = self.tmp("_w")
        self.emit(f"{w} = _rt.mma_commit(_x, {bar}, {short_name!r})")
        if self.role_mode:
            self.emit(f"if {w} is not None: yield {w}")
        else:
            self.emit(f"if {w} is not None: _wait_now(_x, {w})")


class _BarrierRef(BufRef):
    def __init__(self, name):
        self.name = name
        self.scope = E.BARRIER_SCOPE
        self.dtype_name = "uint64"
        self.dtype = None
        self.is_global = False
        self.safe = None
        self.per_thread = False


def _find_launch_threads(s):
    found = []

    def rec(n):
        if found:
            return
        if isinstance(n, tir.SBlock):
            t = E.block_threads(n)
            if t is not None:
                found.append(t)
                return
        if isinstance(n, tir.SBlockRealize):
            rec(n.block)
            return
        from .analysis import children
        for c in children(n):
            rec(c)
    rec(s)
    return found[0] if found else None


def _needs_roles(body, ta: ThreadAnalysis) -> bool:
    """Does the kernel contain a warp-specialised branch (a thread-index if around tile ops or
    barriers)? Then its blocks run under the scheduler."""
    def pred(n):
        return isinstance(n, tir.IfThenElse) and ta.varies(n.condition) and contains(n, is_collective)
    return contains(body, pred)


def _check_swizzle(value) -> None:
    """A block swizzle only reorders which block computes which tile, so the emulator runs the
    blocks unswizzled; but an enabled swizzle's panel must hold at least 1 tile: the CUDA's
    ``rasterization2D*<panel>`` divides the block index by the panel's size, and TileLang's code
    generator refuses a panel below 1 (``panel_size > 0``), as the emulator does."""
    name, panel = value.args[0], value.args[1]
    if isinstance(panel, tir.IntImm) and panel.value < 1:
        raise EmulationError(f"T.use_swizzle: a panel of {panel.value} tiles with enable=True, which TileLang's "
                             f"CUDA code generator refuses ({getattr(name, 'value', name)}<{panel.value}> would "
                             f"divide the block index by {panel.value}) -- give a panel of at least 1, or enable=False")


def _unguarded_dims(buf: tir.Buffer, indices) -> tuple:
    """The dimensions of a global access that TileLang's ``LegalizeSafeMemoryAccess`` leaves
    unguarded and that may be out of range. It guards each dimension separately and skips one
    whose index has no variable and no load (a constant): ``X[5, j]`` of a 5-row tensor reads the
    memory after it on the GPU. A constant within a static extent needs no check."""
    dims = []
    for d, (i, n) in enumerate(zip(indices, buf.shape)):
        found = [False]

        def fn(e, found=found):
            if isinstance(e, (tir.Var, tir.BufferLoad)):
                found[0] = True
        tir.stmt_functor.post_order_visit(tir.Evaluate(i), fn)
        if found[0]:
            continue
        c, ext = arith.Analyzer().simplify(i), n
        if isinstance(c, tir.IntImm) and isinstance(ext, tir.IntImm) and 0 <= c.value < ext.value:
            continue
        dims.append(d)
    return tuple(dims)


def _is_const_expr_of(e, vars_, negate=False) -> bool:
    found = [False]

    def fn(n):
        if isinstance(n, tir.Var) and any(n.same_as(v) for v in vars_):
            found[0] = True
    tir.stmt_functor.post_order_visit(tir.Evaluate(e), fn)
    return not found[0] if negate else found[0]


def _uses_var(e, var) -> bool:
    found = [False]

    def fn(n):
        if isinstance(n, tir.Var) and n.same_as(var):
            found[0] = True
    tir.stmt_functor.post_order_visit(tir.Evaluate(e) if isinstance(e, tir.PrimExpr) else e, fn)
    return found[0]


def _reads_buffer(e, buf) -> bool:
    found = [False]

    def fn(n):
        if isinstance(n, tir.BufferLoad) and n.buffer.data.same_as(buf.data):
            found[0] = True
    tir.stmt_functor.post_order_visit(tir.Evaluate(e), fn)
    return found[0]


def _nest_accesses(s: tir.For) -> dict:
    """The T.Parallel loop variables of a nest (with constant extents, else -1), every store
    (buffer, indices, enclosing parallel vars, statement) and every access (loads and stores)."""
    from .analysis import children
    extents, stores, accesses = {}, [], []

    def visit_expr(e, enclosing):
        def fn(n):
            if isinstance(n, tir.BufferLoad):
                accesses.append((n.buffer, list(n.indices), enclosing, None))
        tir.stmt_functor.post_order_visit(tir.Evaluate(e) if isinstance(e, tir.PrimExpr) else e, fn)

    def rec(n, enclosing):
        if isinstance(n, tir.For) and int(n.kind) == FOR_PARALLEL:
            ext = n.extent
            extents[n.loop_var] = int(ext.value) if isinstance(ext, tir.IntImm) else -1
            enclosing = enclosing + (n.loop_var,)
        if isinstance(n, tir.BufferStore):
            stores.append((n.buffer, list(n.indices), enclosing, n))
            accesses.append((n.buffer, list(n.indices), enclosing, n))
            visit_expr(n.value, enclosing)
            for i in n.indices:
                visit_expr(i, enclosing)
            return
        if isinstance(n, tir.IfThenElse):
            visit_expr(n.condition, enclosing)
        elif isinstance(n, tir.Bind):
            visit_expr(n.value, enclosing)
        elif isinstance(n, tir.Evaluate):
            visit_expr(n.value, enclosing)
        for c in children(n):
            rec(c, enclosing)
    rec(s, ())
    return {"extents": extents, "stores": stores, "accesses": accesses}


_LIB_DIRS: list = []


def _in_library(path: str) -> bool:
    if not _LIB_DIRS:
        import os
        import tilelang
        import tvm as _tvm
        _LIB_DIRS.extend(os.path.dirname(m.__file__) + os.sep for m in (tilelang, _tvm))
    return any(path.startswith(d) for d in _LIB_DIRS)


def _uses_unbound(e, vmap, deferred) -> bool:
    """Does ``e`` read a variable that is neither bound yet nor deferred (nor a buffer's data)?"""
    found = [False]

    def fn(n):
        if isinstance(n, tir.Var) and n not in vmap and n not in deferred and not str(n.dtype) == "handle":
            found[0] = True
    tir.stmt_functor.post_order_visit(tir.Evaluate(e) if isinstance(e, tir.PrimExpr) else e, fn)
    return found[0]
