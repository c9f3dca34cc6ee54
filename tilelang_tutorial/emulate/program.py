"""An emulated kernel: code generation, argument binding and validation, the run, error locations.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import linecache
import sys
import threading

import numpy as np
from tvm import tirx as tir

from . import dtypes as D
from . import runtime as RT
from .analysis import fmt_span, func_span, short, source_line
from . import checks as C
from .codegen import CodeGen
from .errors import ArgumentError, Deadlock, EmulationError
from .scheduler import Scheduler, Split, describe_threads


# ----------------------------------------------------------------------------------------------
# helpers visible to the generated code
# ----------------------------------------------------------------------------------------------
def _as(v, dt):
    if getattr(v, "dtype", None) == dt:
        return v
    return RT.cast(v, dt)


def _fma(a, b, c):
    dt = np.result_type(a, b, c)
    return _as(np.float64(a) * np.float64(b) + np.float64(c) if not isinstance(a, np.ndarray)
               else a.astype(np.float64) * b + c, dt)


def _exp10(x):
    dt = getattr(x, "dtype", np.dtype(np.float32))
    return np.power(dt.type(10), x)


def _saturate(x):
    dt = getattr(x, "dtype", np.dtype(np.float32))
    return np.clip(x, dt.type(0), dt.type(1))


def _mask_any_threads(m):
    m = np.asarray(m)
    if m.ndim and m.shape[0] > 1:
        return np.any(m, axis=0, keepdims=True)
    return m


def _wait_now(x, w):
    raise Deadlock(f"deadlock in block {x.block}: the whole block ({describe_threads(np.arange(x.nthreads))}) "
                   f"{w.describe()}, and no other role (warp-specialised branch) exists to complete it",
                   [w.describe()])


def _sync_plain(x, bid, count):
    if int(count) != x.nthreads:
        raise EmulationError(f"T.sync_threads({bid}, {count}): {x.nthreads} threads of the block arrive at a "
                             f"barrier that expects {count}; outside warp-specialised branches every thread "
                             "executes it, so the count must be the block's thread count")


_GEN_HELPERS = {
    "np": np, "_rt": RT, "_as": _as, "_fma": _fma, "_exp10": _exp10, "_saturate": _saturate,
    "_div": lambda a, b: a / b, "_mul": lambda a, b: a * b, "_add": lambda a, b: a + b,
    "_sub": lambda a, b: a - b, "_Split": Split, "_wait_now": _wait_now, "_sync_plain": _sync_plain,
    "_EmulationError": EmulationError, "_rt_mask_any_threads": _mask_any_threads,
}


# ----------------------------------------------------------------------------------------------
# BLAS threads: a multi-threaded OpenBLAS fighting torch's thread pool turns a 25 us tile matmul
# into ~10 ms on a small machine. Each run uses one BLAS thread and restores the setting after.
# ----------------------------------------------------------------------------------------------
class _Blas:
    _lock = threading.Lock()
    _funcs = None

    @classmethod
    def _find(cls):
        if cls._funcs is not None:
            return cls._funcs
        cls._funcs = ()
        try:
            with open("/proc/self/maps") as fh:
                paths = {ln.split()[-1] for ln in fh if "openblas" in ln.lower() and "/" in ln}
            for p in sorted(paths):
                lib = ctypes.CDLL(p)
                for get, set_ in (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                                  ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                                  ("openblas_get_num_threads", "openblas_set_num_threads")):
                    if hasattr(lib, get) and hasattr(lib, set_):
                        g, s = getattr(lib, get), getattr(lib, set_)
                        g.restype = ctypes.c_int
                        s.argtypes = [ctypes.c_int]
                        cls._funcs = cls._funcs + ((g, s),)
                        break
        except Exception:  # noqa: BLE001 (not Linux, or no OpenBLAS: nothing to do)
            cls._funcs = ()
        return cls._funcs

    @classmethod
    @contextlib.contextmanager
    def single_thread(cls):
        funcs = cls._find()
        saved = []
        for g, s in funcs:
            try:
                n = g()
                if n != 1:
                    s(1)
                    saved.append((s, n))
            except Exception:  # noqa: BLE001
                pass
        try:
            yield
        finally:
            for s, n in saved:
                s(n)


# ----------------------------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------------------------
class _Param:
    __slots__ = ("name", "kind", "buffer", "var", "dtype", "pyname")

    def __init__(self, name, kind, buffer=None, var=None, dtype=None, pyname=None):
        self.name, self.kind, self.buffer, self.var, self.dtype, self.pyname = name, kind, buffer, var, dtype, pyname

    def signature(self) -> str:
        if self.kind == "buffer":
            return f"{self.name}: {_shape_text(self.buffer.shape)} {self.dtype}"
        return f"{self.name}: {self.dtype}"


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _solve_dim(ext):
    """A dynamic dim ``v`` / ``v * k`` / ``k * v``: (v, k); else (None, None)."""
    if isinstance(ext, tir.Var):
        return ext, 1
    if isinstance(ext, tir.Mul):
        if isinstance(ext.a, tir.Var) and isinstance(ext.b, tir.IntImm):
            return ext.a, int(ext.b.value)
        if isinstance(ext.b, tir.Var) and isinstance(ext.a, tir.IntImm):
            return ext.b, int(ext.a.value)
    return None, None


def _eval_int(e, env: dict) -> int:
    """Evaluate an integer shape expression with the dims bound so far."""
    if isinstance(e, (int, np.integer)):
        return int(e)
    if isinstance(e, tir.IntImm):
        return int(e.value)
    if isinstance(e, tir.Var):
        if e not in env:
            raise KeyError(e.name)
        return env[e]
    ops = {tir.Add: lambda a, b: a + b, tir.Sub: lambda a, b: a - b, tir.Mul: lambda a, b: a * b,
           tir.FloorDiv: lambda a, b: a // b, tir.FloorMod: lambda a, b: a % b,
           tir.Max: max, tir.Min: min}
    for cls, fn in ops.items():
        if isinstance(e, cls):
            return fn(_eval_int(e.a, env), _eval_int(e.b, env))
    if isinstance(e, tir.Cast):
        return _eval_int(e.value, env)
    raise KeyError(str(e))


# ----------------------------------------------------------------------------------------------
# the kernel
# ----------------------------------------------------------------------------------------------
class EmulatedKernel:
    """A TileLang program compiled for the CPU emulator. Call it like the GPU kernel.

    ``program``: a ``T.prim_func`` or a compiled ``JITKernel`` (its ``.prim_func`` and ``.out_idx``
    are used). ``out_idx``: parameters to allocate and return (overrides the JITKernel's). One
    instance runs one launch at a time (it is not re-entrant; use one per thread).
    """

    _serial = 0

    def __init__(self, program, *, out_idx=None, name: str | None = None, checks=None, strict: bool = False):
        func = getattr(program, "prim_func", None) if not isinstance(program, tir.PrimFunc) else program
        if not isinstance(func, tir.PrimFunc):
            raise TypeError(f"emulate expects a T.prim_func (what a kernel factory returns) or a compiled TileLang "
                            f"kernel (JITKernel), got {type(program).__name__}")
        if out_idx is None and not isinstance(program, tir.PrimFunc):
            try:
                out_idx = list(getattr(program, "out_idx", None) or [])
            except Exception:  # noqa: BLE001
                out_idx = []
        self.func = func
        attrs = func.attrs
        has_symbol = attrs is not None and "global_symbol" in attrs
        self.name = name or (str(attrs["global_symbol"]) if has_symbol else "kernel")
        self.span = func_span(func)
        EmulatedKernel._serial += 1
        self.checks = C.parse_checks(checks)
        self.strict = bool(strict)
        gen = CodeGen(func, self.name, EmulatedKernel._serial, uninit="uninit" in self.checks).generate()
        self._gen = gen
        self.source = gen.source
        linecache.cache[gen.filename] = (len(gen.source), None, gen.source.splitlines(True), gen.filename)
        ns = dict(gen.globals)
        ns.update(_GEN_HELPERS)
        ns["_run_roles"] = self._run_roles
        exec(compile(gen.source, gen.filename, "exec"), ns)  # noqa: S102 (code we generated)
        self._entry = ns["_entry"]
        self.params: list[_Param] = []
        for kind, obj, pyname in gen.entry_params:
            if kind == "buffer":
                self.params.append(_Param(obj.name, "buffer", buffer=obj, dtype=D.canonical(obj.dtype), pyname=pyname))
            elif kind == "scalar":
                self.params.append(_Param(obj.name, "scalar", var=obj, dtype=D.canonical(obj.dtype), pyname=pyname))
        self.dims = [(obj, pyname) for kind, obj, pyname in gen.entry_params if kind == "dim"]
        n = len(self.params)
        self.out_idx = sorted({(i + n) if i < 0 else i for i in (out_idx or [])})
        for i in self.out_idx:
            if not 0 <= i < n or self.params[i].kind != "buffer":
                raise ArgumentError(f"{self.name}: out_idx {i} is not a tensor parameter")
        self.last_stats: dict | None = None
        self.last_findings: list = []
        self._sched = None
        self._limits_ok: set = set()

    # ------------------------------------------------------------------ public
    def signature(self) -> str:
        return f"{self.name}(" + ", ".join(p.signature() for p in self.params) + ")"

    def __repr__(self) -> str:
        return f"<EmulatedKernel {self.signature()}>"

    def check_limits(self, arch: str | None = None) -> None:
        """Raise checks.LimitExceeded (one line) when a kernel of the program cannot launch on
        ``arch`` (default: the tutorial's current architecture): threads and shared memory per block."""
        key = arch or ""
        if key in self._limits_ok:
            return
        C.check_limits(self.func, self.name, arch)
        self._limits_ok.add(key)

    def __call__(self, *args, **kwargs):
        arrays, outputs = self._bind(args, kwargs)
        return self._launch(arrays, outputs)

    def _launch(self, arrays, outputs, arch: str | None = None, registers=None):
        if "limits" in self.checks:
            self.check_limits(arch)
            C.check_registers(self.func, self.name, registers)
        chk = None
        if self.checks & {"uninit", "races"}:
            chk = C.Checker(self.checks, self.strict, self._locate_finding, self.name)
            chk.locate_line = self._locate_line
        x = RT.Exec(out=sys.stdout, chk=chk)
        if chk is not None:
            chk.x = x
        self.last_findings = chk.findings if chk is not None else []
        with np.errstate(all="ignore"), _Blas.single_thread():
            try:
                self._entry(x, *arrays)
            except EmulationError as e:
                if e.location is None:
                    # a deadlock report already says where each role waits
                    e.with_location(self._location(e.__traceback__, x,
                                                   not (isinstance(e, Deadlock) and e.located)))
                raise
            except Exception as e:  # noqa: BLE001 (numpy / runtime error inside the kernel's code)
                if self._innermost_site(e.__traceback__) is None:
                    raise
                raise EmulationError(f"error while emulating the kernel: {type(e).__name__}: {e}",
                                     location=self._location(e.__traceback__, x)) from e
            finally:
                self.last_stats = dict(x.stats)
                self._sched = None
        if outputs is None:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    # ------------------------------------------------------------------ arguments
    def _bind(self, args, kwargs):
        import torch

        n_out = len(self.out_idx)
        inputs = [p for i, p in enumerate(self.params) if i not in self.out_idx]
        names = ", ".join(p.name for p in inputs)
        if len(args) > len(inputs):
            raise ArgumentError(f"{self.name} takes {len(inputs)} argument{'s' if len(inputs) != 1 else ''} ({names})"
                                + (f" -- the {n_out} output(s) are allocated and returned (out_idx)" if n_out else "")
                                + f", got {len(args)}")
        given = {}
        for p, a in zip(inputs, args):
            given[p.name] = a
        for k, v in kwargs.items():
            if not any(p.name == k for p in inputs):
                raise ArgumentError(f"{self.name} has no parameter named {k!r} (parameters: {names})")
            if k in given:
                raise ArgumentError(f"{self.name}: parameter {k!r} given twice (by position and by name)")
            given[k] = v
        missing = [p.name for p in inputs if p.name not in given]
        if missing:
            raise ArgumentError(f"{self.name} takes {len(inputs)} arguments ({names}); missing: {', '.join(missing)}")
        env: dict = {}
        origin: dict = {}
        arrays = {}
        # tensors first (they bind the dynamic dims), then scalars
        for p in inputs:
            if p.kind != "buffer":
                continue
            t = given[p.name]
            arrays[p.name] = self._check_tensor(p, t, env, origin)
        self._check_dims(inputs, given, env, origin)
        outputs = None
        if n_out:
            outputs = []
            for i in self.out_idx:
                p = self.params[i]
                try:
                    shape = [_eval_int(s, env) for s in p.buffer.shape]
                except KeyError as e:
                    raise ArgumentError(f"{self.name}: cannot size output {p.name} {_shape_text(p.buffer.shape)}: "
                                        f"{e} is not determined by the inputs") from None
                t = torch.empty(shape, dtype=D.torch_dtype(p.dtype))
                arr = D.tensor_to_numpy(t)
                arr[...] = D.poison_array(arr.shape, arr.dtype)
                outputs.append(t)
                arrays[p.name] = arr
        values = []
        for p in self.params:
            if p.kind == "buffer":
                values.append(arrays[p.name])
            else:
                values.append(self._check_scalar(p, given[p.name]))
        for var, _ in self.dims:
            if var not in env:
                raise ArgumentError(f"{self.name}: the dynamic size {var.name} is not determined by any tensor's shape")
            values.append(env[var])
        return values, outputs

    def _check_tensor(self, p: _Param, t, env, origin):
        import torch

        where = f"{self.name}: argument {p.name}"
        if isinstance(t, np.ndarray):
            arr = t
            dtname = D.canonical(arr.dtype.name)
            shape, strides_ok = tuple(arr.shape), arr.flags.c_contiguous
        elif isinstance(t, torch.Tensor):
            if t.device.type != "cpu":
                raise ArgumentError(f"{where} is on {t.device}; the emulator runs on CPU tensors (pass .cpu())")
            dtname = D.torch_dtype_name(t.dtype)
            shape, strides_ok = tuple(t.shape), t.is_contiguous()
            arr = None
        else:
            raise ArgumentError(f"{where} must be a torch.Tensor, got {type(t).__name__}")
        if dtname != p.dtype:
            raise ArgumentError(f"{where} must have dtype {p.dtype}, got {dtname}")
        want = p.buffer.shape
        if len(shape) != len(want):
            raise ArgumentError(f"{where} must have {len(want)} dimension{'s' if len(want) != 1 else ''} "
                                f"{_shape_text(want)}, got shape {shape}")
        for d, (e, n) in enumerate(zip(want, shape)):
            if isinstance(e, tir.IntImm):
                if int(e.value) != n:
                    raise ArgumentError(f"{where} must have shape {_shape_text(want)}, got {shape} "
                                        f"(dimension {d} must be {int(e.value)})")
                continue
            var, k = _solve_dim(e)
            if var is None:
                continue      # checked once every dim is bound
            if n % k:
                raise ArgumentError(f"{where} has shape {shape}: dimension {d} ({e}) must be a multiple of {k}")
            val = n // k
            if var in env and env[var] != val:
                raise ArgumentError(f"{where} has shape {shape}: dimension {d} ({e}) gives {var.name} = {val}, but "
                                    f"{origin[var]} gave {var.name} = {env[var]}")
            if var not in env:
                env[var] = val
                origin[var] = f"{p.name} dimension {d}"
        if not strides_ok:
            raise ArgumentError(f"{where} must be contiguous (row-major), got strides "
                                f"{tuple(t.stride()) if hasattr(t, 'stride') else arr.strides}; pass .contiguous()")
        if arr is None:
            arr = D.tensor_to_numpy(t)
        return arr

    def _check_dims(self, inputs, given, env, origin):
        for p in inputs:
            if p.kind != "buffer":
                continue
            t = given[p.name]
            shape = tuple(t.shape)
            for d, e in enumerate(p.buffer.shape):
                if isinstance(e, tir.IntImm):
                    continue
                try:
                    want = _eval_int(e, env)
                except KeyError as k:
                    raise ArgumentError(f"{self.name}: argument {p.name} dimension {d} is `{e}`, which the emulator "
                                        f"cannot bind from the shapes ({k} unknown)") from None
                if want != shape[d]:
                    vals = ", ".join(f"{v.name} = {env[v]} (from {origin[v]})" for v in env)
                    raise ArgumentError(f"{self.name}: argument {p.name} has shape {shape}, but dimension {d} must be "
                                        f"{e} = {want} with {vals}")

    def _check_scalar(self, p: _Param, v):
        dt = D.np_dtype(p.dtype)
        where = f"{self.name}: argument {p.name} ({p.dtype})"
        if hasattr(v, "numel") and hasattr(v, "item"):
            if v.numel() != 1:
                raise ArgumentError(f"{where} must be a number, got a tensor of shape {tuple(v.shape)}")
            v = v.item()
        if isinstance(v, np.generic):
            v = v.item()
        if dt == np.bool_:
            if not isinstance(v, (bool, int)):
                raise ArgumentError(f"{where} must be a bool, got {type(v).__name__}")
            return bool(v)
        if D.is_int(dt):
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                else:
                    raise ArgumentError(f"{where} must be an integer, got {v!r}")
            info = np.iinfo(dt)
            if not info.min <= v <= info.max:
                raise ArgumentError(f"{where} = {v} is out of the {p.dtype} range")
            return int(v)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ArgumentError(f"{where} must be a number, got {type(v).__name__}")
        return dt.type(v)

    # ------------------------------------------------------------------ roles
    def _run_roles(self, x, gen, tids):
        x.stats["blocks"] += 1
        x.named = {}
        tracker = None
        if x.chk is not None and x.chk.races:
            tracker = x.chk.roles = C.RoleTracker(x.chk)
        sched = Scheduler(x.stats, locate=self._locate_frame, tracker=tracker)
        self._sched = sched
        x.sched = sched
        try:
            sched.run(gen, tids, f"block {x.block}")
            if tracker is not None:
                tracker.block_ended()
        finally:
            self._sched = None
            x.sched = None
            if x.chk is not None:
                x.chk.roles = None

    # ------------------------------------------------------------------ locations
    def _site_of_frame(self, frame):
        if frame is None or frame.f_code.co_filename != self._gen.filename:
            return None
        ln = frame.f_lineno - 1
        if 0 <= ln < len(self._gen.line_sites):
            idx = self._gen.line_sites[ln]
            if idx >= 0:
                return self._gen.sites[idx]
        return None

    def _site_lines(self, site, local_vars) -> list:
        """["file:line: source", "TIR: statement", "loop variables: ..."] for a site."""
        if site is None:
            return []
        out = []
        if site.span is not None:
            src = source_line(site.span)
            out.append(f"at {fmt_span(site.span)}" + (f": {src}" if src else ""))
            out.append(f"TIR: {site.stmt}")
        else:
            out.append(f"at TIR statement: {site.stmt}")
        loops = self._loop_values(site, local_vars or {})
        if loops:
            out.append(loops)
        return out

    def _locate_line(self, lineno: int):
        """(file:line, source text) of a line of the generated code."""
        ln = lineno - 1
        site = None
        if 0 <= ln < len(self._gen.line_sites) and self._gen.line_sites[ln] >= 0:
            site = self._gen.sites[self._gen.line_sites[ln]]
        if site is None:
            return ("?", "")
        from .codegen import _in_library
        if site.span is None or _in_library(site.span[0]):
            return (f"`{short(site.stmt, 90)}`", "")
        src = source_line(site.span)
        if "  #" in src:
            src = src.split("  #", 1)[0].rstrip()
        return (fmt_span(site.span), src)

    def _locate_finding(self, frame):
        """(file:line, source text, loop values) of a frame of the generated code."""
        site = self._site_of_frame(frame)
        if site is None:
            return ("", "", "")
        from .codegen import _in_library
        if site.span is None or _in_library(site.span[0]):
            # a statement TileLang's own macros built (T.reduce_* with clear=False, T.cumsum, ...)
            fs = fmt_span(self.span) if self.span is not None else ""
            where = f"`{short(site.stmt, 90)}` in kernel {self.name}" + (f" (defined at {fs})" if fs else "")
            return (where, "", self._loop_values(site, frame.f_locals))
        where = fmt_span(site.span)
        src = source_line(site.span)
        if "  #" in src:                 # the statement, without its comment
            src = src.split("  #", 1)[0].rstrip()
        return (where, src or site.stmt, self._loop_values(site, frame.f_locals))

    def _locate_frame(self, frame) -> str:
        """Where a suspended role is (for deadlock reports): lines joined for an indented block."""
        site = self._site_of_frame(frame)
        return "\n      ".join(self._site_lines(site, frame.f_locals)) if site is not None else ""

    @staticmethod
    def _loop_values(site, local_vars) -> str:
        vals = []
        for tname, pyname, _kind in site.loops:
            if pyname not in local_vars:
                continue
            v = local_vars[pyname]
            if isinstance(v, np.ndarray):
                flat = v.reshape(-1)
                vals.append(f"{tname} = {int(flat[0])}..{int(flat[-1])} (T.Parallel)" if flat.size
                            else f"{tname} = (empty)")
            else:
                vals.append(f"{tname} = {v}")
        return ("loop variables: " + ", ".join(vals)) if vals else ""

    def _innermost_site(self, tb):
        """(site, frame) of the innermost frame of the generated code in a traceback, or None."""
        found = None
        while tb is not None:
            site = self._site_of_frame(tb.tb_frame)
            if site is not None:
                found = (site, tb.tb_frame)
            tb = tb.tb_next
        return found

    def _location(self, tb, x, with_statement: bool = True) -> str:
        frame_site = self._innermost_site(tb)
        where = f"kernel {self.name}"
        if self.span is not None:
            where += f" (defined at {fmt_span(self.span)})"
        nk = len(self._gen.kernels)
        if frame_site is not None and nk > 1:
            where += f", T.Kernel #{frame_site[0].kernel + 1} of {nk}"
        where += f", block {tuple(int(v) for v in x.block)}"
        sched = self._sched
        if with_statement and sched is not None and sched.current is not None and sched.current.parent is not None:
            where += f", {sched.current.label()}"
        lines = [f"  in {where}"]
        if with_statement and frame_site is not None:
            site, frame = frame_site
            lines += ["  " + ln for ln in self._site_lines(site, frame.f_locals)]
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# cache
# ----------------------------------------------------------------------------------------------
_CACHE: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()


def get_kernel(program, checks=None, strict: bool = False) -> EmulatedKernel:
    """The cached :class:`EmulatedKernel` of ``program`` (by identity and checks), compiling it on
    first use."""
    kinds = C.parse_checks(checks)
    key = (id(program), kinds, bool(strict))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] is program:
            _CACHE.move_to_end(key)
            return hit[1]
    k = EmulatedKernel(program, checks=kinds, strict=strict)
    with _CACHE_LOCK:
        _CACHE[key] = (program, k)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return k


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


__all__ = ["EmulatedKernel", "get_kernel", "clear_cache", "short"]
