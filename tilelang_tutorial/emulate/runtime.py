"""Helpers called by the generated code: element access with TileLang's bounds rules, the tile
operators, atomics, ``T.print``, warp-level intrinsics and barriers.

Conventions shared with :mod:`.codegen`:

* a *vector* value is a numpy array with ``ndim = 1 + (parallel depth of the kernel)``: axis 0 is
  the block's threads (size 1 when the value is the same for every thread), axis ``d`` the
  ``d``-th enclosing ``T.Parallel`` loop; scalars are Python ints / numpy scalars;
* a *mask* is such a boolean array (or None): the lanes for which the statement runs;
* a :class:`BufRef` describes a buffer (name, scope, dtype, safe value); the array itself is
  passed separately.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from . import dtypes as D
from .errors import EmulationError, OutOfBounds, UnsupportedConstruct
from .checks import poison_onchip
from .dtypes import slices_to_index_arrays as _slices_to_index_arrays
from .scheduler import MBarrier, MmaWait, NamedBarrier, ParityWait, SyncWait


class BufRef:
    """Compile-time facts about a buffer, plus its run-time safe value (global buffers)."""

    __slots__ = ("name", "scope", "dtype_name", "dtype", "is_global", "safe", "per_thread")

    def __init__(self, name: str, scope: str, dtype_name: str, per_thread: bool = False):
        self.name = name
        self.scope = scope
        self.dtype_name = D.canonical(dtype_name)
        self.dtype = D.np_dtype(dtype_name) if scope != "shared.barrier" else None
        self.is_global = scope == "global"
        self.safe = None
        self.per_thread = per_thread

    def safe_value(self):
        return self.dtype.type(0) if self.safe is None else self.safe

    def logical_shape(self, arr) -> tuple:
        return tuple(arr.shape[1:]) if self.per_thread else tuple(arr.shape)

    def label(self) -> str:
        kind = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local.fragment": "fragment",
                "local": "local", "local.var": "var", "shared.barrier": "mbarrier",
                "shared.tmem": "tensor-memory"}.get(self.scope, self.scope)
        return f"{kind} buffer {self.name}"


class Exec:
    """State of one emulated launch (shared by all blocks): stats, current block, output."""

    __slots__ = ("stats", "block", "threads", "nthreads", "named", "out", "chk", "sched")

    def __init__(self, out=None, chk=None):
        self.stats = {"kernels": 0, "blocks": 0, "tile_ops": 0, "gemm_flops": 0, "parallel_loops": 0,
                      "roles": 0, "role_switches": 0, "guarded_loads": 0, "dropped_stores": 0,
                      "mbarrier_arrivals": 0, "printed_lines": 0}
        self.block = (0, 0, 0)
        self.threads = (1, 1, 1)
        self.nthreads = 1
        self.named: dict = {}
        self.out = out
        self.chk = chk          # checks.Checker of this launch, or None
        self.sched = None       # the scheduler of the current block (warp-specialised kernels)


# ----------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------
_AR_CACHE: dict = {}


def ar(lo, n, axis: int, ndim: int) -> np.ndarray:
    """``arange(lo, lo + n)`` laid out along ``axis`` of an ``ndim``-d vector."""
    key = (lo, n, axis, ndim)
    a = _AR_CACHE.get(key)
    if a is None:
        shape = [1] * ndim
        shape[axis] = max(int(n), 0)
        a = np.arange(int(lo), int(lo) + max(int(n), 0), dtype=np.int64).reshape(shape)
        a.flags.writeable = False
        if len(_AR_CACHE) > 4096:
            _AR_CACHE.clear()
        _AR_CACHE[key] = a
    return a


def threads_axis(tids: np.ndarray, ndim: int) -> np.ndarray:
    return tids.reshape((-1,) + (1,) * (ndim - 1))


def uni(v, what: str):
    """Collapse a value that must be the same for every lane (a tile-op argument, a loop bound) to
    a scalar; UnsupportedConstruct if it differs between threads / iterations."""
    if isinstance(v, np.ndarray):
        if v.size == 0:
            raise UnsupportedConstruct(what, "its value is empty")
        first = v.flat[0]
        if v.size > 1 and not np.all(v == first):
            raise UnsupportedConstruct(what, "its value differs between threads or T.Parallel iterations; "
                                       "it must be the same for the whole block (or role)")
        return first.item() if hasattr(first, "item") and D.is_int(v.dtype) else first
    return v


def tcond(cond, ntids: int) -> np.ndarray:
    """A thread-index condition as a 1-d boolean array over the current role's threads."""
    c = np.asarray(cond)
    if c.ndim == 0:
        return np.full(ntids, bool(c))
    if c.ndim > 1 and any(s != 1 for s in c.shape[1:]):
        raise UnsupportedConstruct("thread-index if", "a warp-specialised branch condition may not depend on a "
                                   "T.Parallel loop variable")
    c = c.reshape(c.shape[0], -1)[:, 0] if c.ndim > 1 else c
    if c.shape[0] == 1:
        return np.full(ntids, bool(c[0]))
    return c.astype(bool)


def tsel(v, sel):
    """The part of a per-thread value that belongs to a sub-role (``sel`` over the parent's threads)."""
    if isinstance(v, np.ndarray) and v.ndim > 0 and v.shape[0] == sel.shape[0] and sel.shape[0] > 1:
        return v[sel]
    return v


def any_lane(mask) -> bool:
    return mask is None or bool(np.any(mask))


def where(c, t, f, dt):
    r = np.where(c, t, f)
    return r if r.dtype == dt else r.astype(dt)


def cast(x, dt):
    if isinstance(x, np.ndarray):
        return D.astype(x, dt)
    return D.cast_scalar(x, dt)


def tdiv(a, b):
    """Truncating integer division (C semantics), scalars or arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        q = np.abs(a) // np.abs(b)
        return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)
    if b == 0:
        raise EmulationError("integer division by zero")
    q = abs(int(a)) // abs(int(b))
    return -q if (a < 0) != (b < 0) else q


def tmod(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.fmod(a, b)
    if b == 0:
        raise EmulationError("integer modulo by zero")
    return int(math.fmod(int(a), int(b)))


def ifloordiv(a, b):
    if not isinstance(b, np.ndarray) and b == 0:
        raise EmulationError("integer division by zero")
    return a // b


def ifloormod(a, b):
    if not isinstance(b, np.ndarray) and b == 0:
        raise EmulationError("integer modulo by zero")
    return a % b


def ffloordiv(a, b):
    return np.floor(a / b)


def ffloormod(a, b):
    return a - np.floor(a / b) * b


def rsqrt(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / np.sqrt(x)


def sigmoid(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / (one + np.exp(-x))


def rcp(x):
    one = x.dtype.type(1) if hasattr(x, "dtype") else 1.0
    return one / x


def erf(x):
    import torch
    a = np.asarray(x)
    wide = np.float64 if a.dtype == np.float64 else np.float32
    r = torch.special.erf(torch.from_numpy(np.ascontiguousarray(a.astype(wide)))).numpy()
    r = r.astype(a.dtype)
    return r if isinstance(x, np.ndarray) else r[()]


def round_away(x):
    """CUDA ``round``: halfway cases away from zero."""
    a = np.asarray(x)
    t = np.trunc(a)
    r = np.where(np.abs(a - t) >= 0.5, t + np.sign(a), t).astype(a.dtype)
    return r if isinstance(x, np.ndarray) else r[()]


def smax(a, b):
    """max of two float scalars, NaN if either is NaN (like np.maximum, ~5x cheaper on scalars)."""
    return a if (a >= b or a != a) else b


def smin(a, b):
    return a if (a <= b or a != a) else b


def clamp(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


def popcount(x):
    a = np.asarray(x)
    u = a.astype(np.uint64) & np.uint64((1 << (a.dtype.itemsize * 8)) - 1)
    c = np.zeros(u.shape, dtype=np.int32)
    while np.any(u):
        c += (u & np.uint64(1)).astype(np.int32)
        u = u >> np.uint64(1)
    return c if isinstance(x, np.ndarray) else int(c)


def reinterpret(x, dt):
    a = np.asarray(x)
    if a.dtype.itemsize != dt.itemsize:
        raise UnsupportedConstruct("T.reinterpret", f"{a.dtype} and {dt} have different sizes")
    r = a.view(dt)
    return r if isinstance(x, np.ndarray) else r[()]


def shift_right(a, b):
    return np.right_shift(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else a >> b


def shift_left(a, b):
    return np.left_shift(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else a << b


# ----------------------------------------------------------------------------------------------
# bounds errors
# ----------------------------------------------------------------------------------------------
def _fmt_index(ix) -> str:
    return "[" + ", ".join(str(int(v)) for v in ix) + "]"


def oob(ref: BufRef, arr, kind: str, index, more: int = 0, dim: int | None = None) -> OutOfBounds:
    shape = ref.logical_shape(arr)
    if ref.per_thread:
        index = tuple(index)[1:]
        dim = None if dim is None else dim - 1
    idx = _fmt_index(index)
    msg = f"out-of-bounds {kind} of {ref.label()} (scope {ref.scope}, shape {shape}): index {idx}"
    if dim is not None and 0 <= dim < len(shape):
        msg += f" -- dimension {dim} is {int(index[dim])}, valid range [0, {shape[dim]})"
    if more:
        msg += f" (and {more} more out-of-range element{'s' if more > 1 else ''})"
    return OutOfBounds(msg, buffer=ref.name, scope=ref.scope, shape=shape, index=tuple(int(v) for v in index))


def ck(ref: BufRef, arr, ix: tuple, kind: str = "read") -> tuple:
    """Validate a scalar index tuple of an on-chip buffer (also constant global indices)."""
    for d, (i, n) in enumerate(zip(ix, arr.shape)):
        if not 0 <= i < n:
            raise oob(ref, arr, kind, ix, dim=d)
    return ix


def unguarded(ref: BufRef, arr, ix: tuple, fixed: tuple, mask, kind: str) -> None:
    """Raise ``OutOfBounds`` if a global access is out of range in a dimension TileLang does not
    guard (``fixed``: those whose index is a constant, see ``codegen._unguarded_dims``) and some
    lane performs it: the GPU reads or writes memory that is not the tensor's. ``ix``: the index
    per dimension in the vector layout (scalars or arrays broadcastable with ``mask``); lanes that
    ``mask`` turns off perform nothing."""
    bad = [d for d in fixed if not 0 <= int(np.asarray(ix[d]).flat[0]) < arr.shape[d]]
    if not bad:
        return
    shape = np.broadcast_shapes(*[np.shape(i) for i in ix], np.shape(mask) if mask is not None else ())
    active = np.broadcast_to(np.asarray(True if mask is None else mask, dtype=bool), shape)
    if not active.any():
        return
    pos = tuple(np.argwhere(active)[0]) if shape else ()
    full = [np.broadcast_to(i, shape)[pos] for i in ix]
    raise oob(ref, arr, kind, full, more=int(np.count_nonzero(active)) - 1, dim=bad[0])


def _in_range(ix, shape):
    ok = None
    for i, n in zip(ix, shape):
        if isinstance(i, np.ndarray):
            c = (i >= 0) & (i < n)
        else:
            c = 0 <= i < n
            if c:
                continue
            c = np.False_
        ok = c if ok is None else ok & c
    return ok  # None: all scalars in range


# ----------------------------------------------------------------------------------------------
# element access
# ----------------------------------------------------------------------------------------------
def gld1(ref: BufRef, arr, ix: tuple, x: Exec, fixed: tuple = (), mask=None):
    """Scalar load from global memory with TileLang's guard (out of range -> safe value); the
    ``fixed`` dimensions have no guard (:func:`unguarded`, for the lanes of ``mask``)."""
    if fixed:
        unguarded(ref, arr, ix, fixed, mask, "read")
    for i, n in zip(ix, arr.shape):
        if not 0 <= i < n:
            x.stats["guarded_loads"] += 1
            return ref.safe_value()
    return arr[ix]


def gst1(ref: BufRef, arr, ix: tuple, v, x: Exec, fixed: tuple = ()) -> None:
    """Scalar store to global memory with TileLang's guard (out of range -> dropped); the
    ``fixed`` dimensions have no guard (:func:`unguarded`)."""
    if fixed:
        unguarded(ref, arr, ix, fixed, None, "write")
    for i, n in zip(ix, arr.shape):
        if not 0 <= i < n:
            x.stats["dropped_stores"] += 1
            return
    arr[ix] = v


def gather(ref: BufRef, arr, ix: tuple, mask, x: Exec, fixed: tuple = ()):
    """Vector load with index arrays (any pattern). Global: out-of-range lanes read the safe value
    (but see ``fixed``, :func:`unguarded`); on-chip: an out-of-range *active* lane is an error
    (masked-off lanes read garbage)."""
    if len(ix) != arr.ndim:
        raise EmulationError(f"{ref.label()}: {len(ix)} indices for a {arr.ndim}-d buffer")
    if fixed:
        unguarded(ref, arr, ix, fixed, mask, "read")
    ixs = [np.asarray(i) for i in ix]
    shape = np.broadcast_shapes(*[i.shape for i in ixs])
    ok = _in_range(ixs, arr.shape)
    if ok is None or np.all(ok):
        return arr[tuple(ixs)] if ixs else arr[()]
    ok = np.broadcast_to(ok, shape)
    if ref.is_global:
        safe_ix = tuple(np.where(ok, i, 0) for i in ixs)
        x.stats["guarded_loads"] += 1
        return np.where(ok, arr[safe_ix], ref.safe_value())
    bad = ~ok if mask is None else (~ok & np.broadcast_to(mask, np.broadcast_shapes(shape, np.shape(mask))))
    if np.any(bad):
        _raise_first(ref, arr, "read", ixs, bad)
    safe_ix = tuple(np.where(ok, i, 0) for i in ixs)
    return arr[safe_ix]


def _raise_first(ref, arr, kind, ixs, bad):
    pos = np.argwhere(bad)[0]
    shape = bad.shape
    full = [np.broadcast_to(i, shape)[tuple(pos)] for i in ixs]
    dim = next((d for d, (v, n) in enumerate(zip(full, arr.shape)) if not 0 <= v < n), None)
    raise oob(ref, arr, kind, full, more=int(np.count_nonzero(bad)) - 1, dim=dim)


def scatter(ref: BufRef, arr, ix: tuple, val, mask, x: Exec, fixed: tuple = ()) -> None:
    """Vector store with index arrays. Lanes writing the same element: the last active lane (in
    thread, then loop order) wins -- on the GPU that is a race with an arbitrary winner. Global:
    out-of-range lanes are dropped (but see ``fixed``, :func:`unguarded`)."""
    if fixed:
        unguarded(ref, arr, ix, fixed, mask, "write")
    ixs = [np.asarray(i) for i in ix]
    v = np.asarray(val)
    shapes = [i.shape for i in ixs] + [v.shape] + ([np.shape(mask)] if mask is not None else [])
    shape = np.broadcast_shapes(*shapes)
    ixs = [np.broadcast_to(i, shape) for i in ixs]
    v = np.broadcast_to(v, shape)
    positions = None
    if mask is not None:
        m = np.broadcast_to(mask, shape)
        if not m.any():
            return
        if x.chk is not None and x.chk.races:
            positions = np.flatnonzero(m)
        ixs = [i[m] for i in ixs]
        v = v[m]
    ok = _in_range(ixs, arr.shape)
    if ok is not None and not np.all(ok):
        if ref.is_global:
            x.stats["dropped_stores"] += 1
            ok = np.broadcast_to(ok, np.shape(ixs[0]))
            if x.chk is not None and x.chk.races:
                positions = (np.flatnonzero(ok) if positions is None else positions[ok.reshape(-1)])
            ixs = [i[ok] for i in ixs]
            v = v[ok]
        else:
            bad = ~np.broadcast_to(ok, np.shape(ixs[0]))
            if np.any(bad):
                _raise_first(ref, arr, "write", ixs, bad)
    if x.chk is not None and x.chk.races:
        if positions is None:
            positions = np.arange(int(np.prod(shape)) if shape else 1)
        x.chk.same_step(ref, arr, [np.asarray(i).reshape(-1) for i in ixs], np.asarray(v).reshape(-1), shape,
                        positions, _tids_of(x))
    arr[tuple(ixs)] = v


def _tids_of(x):
    sched = x.sched
    if sched is not None and sched.current is not None:
        return np.asarray(sched.current.tids).reshape(-1)
    return np.arange(x.nthreads)


def store_lanes(ref: BufRef, arr, ix: tuple, val, mask, x: Exec, fixed: tuple = ()) -> None:
    """A store whose element index is the same for every lane while the value or the mask vary
    (``flag[0] = 1`` inside a T.Parallel ``if``): written if any lane is active; the value of the
    last active lane wins."""
    racy = x.chk is not None and x.chk.races and isinstance(val, np.ndarray) and val.ndim
    if mask is not None:
        m = np.asarray(mask)
        if not m.any():
            return
        if isinstance(val, np.ndarray) and val.ndim:
            shape = np.broadcast_shapes(val.shape, m.shape)
            mm = np.broadcast_to(m, shape)
            lanes = np.broadcast_to(val, shape)[mm]
            if racy:
                x.chk.same_step(ref, arr, [np.full(lanes.size, int(i)) for i in ix], lanes, shape,
                                np.flatnonzero(mm), _tids_of(x))
            val = lanes[-1]
    elif isinstance(val, np.ndarray) and val.ndim:
        if racy:
            lanes = val.reshape(-1)
            x.chk.same_step(ref, arr, [np.full(lanes.size, int(i)) for i in ix], lanes, val.shape,
                            np.arange(lanes.size), _tids_of(x))
        val = val.reshape(-1)[-1]
    if ref.is_global:
        gst1(ref, arr, ix, val, x, fixed)
    else:
        arr[ck(ref, arr, ix, "write")] = val


def view_load(ref: BufRef, arr, sl: tuple, mask, x: Exec, post, fixed: tuple = ()):
    """Load through slices ``sl`` (slice or int per dimension) whose bounds were not proven at
    compile time: a view when in bounds, else the guarded / checked element path. ``post`` turns
    the sliced view into the vector layout (transpose, new axes). ``fixed``: see :func:`unguarded`
    (an int in ``sl``)."""
    if fixed:
        unguarded(ref, arr, _slice_lanes(sl, post), fixed, mask, "read")
    if _slices_in_bounds(sl, arr.shape):
        return post(arr[sl])
    ix = _slices_to_index_arrays(sl)
    if ref.is_global:
        x.stats["guarded_loads"] += 1
        ok = _in_range(ix, arr.shape)
        safe_ix = tuple(np.where(ok, i, 0) for i in ix)
        return post(np.where(ok, arr[safe_ix], ref.safe_value()))
    if mask is None:
        bad = ~_in_range(ix, arr.shape)
        _raise_first(ref, arr, "read", ix, bad)
    # masked: only active lanes must be in range -> check in the vector layout
    ok = _in_range(ix, arr.shape)
    okv = post(ok)
    m = np.broadcast_to(mask, np.broadcast_shapes(np.shape(mask), okv.shape))
    if np.any(m & ~np.broadcast_to(okv, m.shape)):
        lane_ix = [post(np.broadcast_to(i, ok.shape)) for i in ix]
        bad = m & ~np.broadcast_to(okv, m.shape)
        _raise_first(ref, arr, "read", [np.broadcast_to(i, bad.shape) for i in lane_ix], bad)
    safe_ix = tuple(np.where(ok, i, 0) for i in ix)
    return post(arr[safe_ix])


def view_store(ref: BufRef, arr, sl: tuple, val, mask, x: Exec, post, fixed: tuple = ()) -> None:
    """Store through slices whose bounds were not proven (see :func:`view_load`)."""
    if fixed:
        unguarded(ref, arr, _slice_lanes(sl, post), fixed, mask, "write")
    if _slices_in_bounds(sl, arr.shape):
        tgt = post(arr[sl])
        if mask is None:
            tgt[...] = val
        else:
            np.copyto(tgt, val, where=np.asarray(mask, dtype=bool), casting="unsafe")
        return
    ix = _slices_to_index_arrays(sl)
    lane_ix = tuple(post(np.broadcast_to(i, np.broadcast_shapes(*[np.shape(j) for j in ix]))) for i in ix)
    scatter(ref, arr, lane_ix, val, mask, x)


def _slice_lanes(sl, post) -> list:
    """The index per dimension of a slice access, laid out like its vector (``post``)."""
    ix = _slices_to_index_arrays(sl)
    shape = np.broadcast_shapes(*[np.shape(i) for i in ix])
    return [post(np.broadcast_to(i, shape)) for i in ix]


def _slices_in_bounds(sl, shape) -> bool:
    for s, n in zip(sl, shape):
        if isinstance(s, slice):
            start, stop, step = s.start, s.stop, s.step or 1
            if stop == start:
                continue
            last = stop - step
            if start < 0 or start >= n or last < 0 or last >= n:
                return False
        elif not 0 <= s < n:
            return False
    return True


def sl(start, n, step=1):
    start = int(start)
    n = max(int(n), 0)
    return slice(start, start + n * step, step)


# ----------------------------------------------------------------------------------------------
# allocation
# ----------------------------------------------------------------------------------------------
def alloc(shape, dt, x=None, ref=None) -> np.ndarray:
    arr = poison_onchip(tuple(int(s) for s in shape), dt)
    if x is not None and x.chk is not None and x.chk.uninit:
        x.chk.track(ref, arr)
    return arr


def u(x, ref, arr, v, mask, ixf):
    """An on-chip load under the uninitialised-read check: returns ``v``."""
    chk = x.chk
    if chk is None or not chk.dirty:
        return v
    base = arr if arr.base is None else arr.base
    if id(base) not in chk.dirty:
        return v
    return chk.load(ref, arr, v, mask, ixf)


def rl(x, ref, v, mask, ixf):
    """An element load from shared memory inside a warp-specialised role (role-race check)."""
    chk = x.chk
    if chk is not None and chk.roles is not None:
        _role_elems(x, ref, mask, ixf, False)
    return v


def rs(x, ref, mask, ixf) -> None:
    chk = x.chk
    if chk is not None and chk.roles is not None:
        _role_elems(x, ref, mask, ixf, True)


def _role_elems(x, ref, mask, ixf, write):
    sched = x.sched
    if sched is None or sched.current is None or sched.current.parent is None:
        return
    kind, *rest = ixf()
    if kind == "sl" and mask is None:
        box = tuple((s.start, s.start + (len(range(s.start, s.stop, s.step or 1)) - 1) * (s.step or 1) + 1)
                    if isinstance(s, slice) else (int(s), int(s) + 1) for s in rest[0])
        x.chk.roles.access(sched.current, ref, box, write, x.chk.gen_line(4))
        return
    if kind == "sl":
        sl, post = rest
        raw = _slices_to_index_arrays(sl)
        full = np.broadcast_shapes(*[np.shape(i) for i in raw])
        ixs = [post(np.broadcast_to(i, full)) for i in raw]
    else:
        ixs = [np.asarray(i) for i in rest[0]]
    shapes = [np.shape(i) for i in ixs] + ([np.shape(mask)] if mask is not None else [])
    shape = np.broadcast_shapes(*shapes) if shapes else ()
    if mask is not None:
        m = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
        if not m.any():
            return
        ixs = [np.broadcast_to(i, shape)[m] for i in ixs]
    box = tuple((int(np.min(i)), int(np.max(i)) + 1) for i in ixs)
    x.chk.roles.access(sched.current, ref, box, write, x.chk.gen_line(4))


def _lane_indices(ixf):
    kind, *rest = ixf()
    if kind == "sl":
        sl, post = rest
        raw = _slices_to_index_arrays(sl)
        full = np.broadcast_shapes(*[np.shape(i) for i in raw])
        return [post(np.broadcast_to(i, full)) for i in raw]
    return [np.asarray(i) for i in rest[0]]


def step_rw(x, ref, arr, wixf, rixfs, mask, tids) -> None:
    """Race check of one shared-memory store statement that also reads the buffer: a lane reading
    an element that a lane of another thread writes in the same step."""
    chk = x.chk
    if chk is None or not chk.races:
        return
    w = _lane_indices(wixf)
    rs = [_lane_indices(f) for f in rixfs]
    shapes = [np.shape(i) for i in w] + [np.shape(i) for r in rs for i in r]
    if mask is not None:
        shapes.append(np.shape(mask))
    shape = np.broadcast_shapes(*shapes)
    if not shape or int(np.prod(shape)) < 2:
        return
    act = np.ones(shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), shape)

    def lin(ixs):
        full = [np.broadcast_to(i, shape) for i in ixs]
        ok = act.copy()
        for i, n in zip(full, arr.shape):
            ok &= (i >= 0) & (i < n)
        safe = [np.where(ok, i, 0) for i in full]
        return np.ravel_multi_index(tuple(safe), arr.shape).reshape(-1), ok.reshape(-1)

    wl, wok = lin(w)
    wpos = np.flatnonzero(wok)
    if wpos.size == 0:
        return
    order = np.argsort(wl[wpos], kind="stable")
    wsorted, wsp = wl[wpos][order], wpos[order]
    tids = np.asarray(tids).reshape(-1)
    nt = tids.size

    def thread(p):
        pos = np.unravel_index(p, shape)
        if shape[0] > 1:
            return tids[pos[0]]
        k = np.ravel_multi_index(pos[1:], shape[1:]) if len(shape) > 1 else np.zeros_like(p)
        return tids[k % nt]
    for r in rs:
        rl_, rok = lin(r)
        rpos = np.flatnonzero(rok)
        if rpos.size == 0:
            continue
        j = np.searchsorted(wsorted, rl_[rpos])
        j = np.clip(j, 0, wsorted.size - 1)
        hit = wsorted[j] == rl_[rpos]
        if not np.any(hit):
            continue
        rp, wp = rpos[hit], wsp[j[hit]]
        differ = thread(rp) != thread(wp)
        if not np.any(differ):
            continue
        a, b = int(rp[differ][0]), int(wp[differ][0])
        elem = np.unravel_index(int(rl_[a]), arr.shape)
        where, src, _ = chk._where(2)
        ra, wb = chk._lane(a, shape, tids), chk._lane(b, shape, tids)
        from .checks import _fmt_elem
        msg = (f"race: {ref.label()} element {_fmt_elem(elem)} is read by {ra} and written by {wb} in the same "
               f"step, at {where}" + (f": {src}" if src else "") + f" [kernel {chk.kernel}, block "
               f"{tuple(int(v) for v in x.block)}]; no barrier orders them inside one statement (write the result "
               "to another buffer, or split the statement with a T.sync_threads() between)")
        chk.report("race", ("rw", ref.name, where), ref.name, elem, msg, [f"{where}: {src}"] * 2, [ra, wb])
        return


def _rd(x, ref, arr, win, what, sub=None):
    """A tile operator reads ``arr[win]``: uninitialised-read and role-race checks."""
    chk = x.chk
    if chk.dirty and not ref.is_global:
        base = arr if arr.base is None else arr.base
        if id(base) in chk.dirty:
            chk.region(ref, arr, win, what, sub)
    if chk.roles is not None and ref.scope in _SHARED:
        _role_access(x, ref, win, False)


def _wr(x, ref, win):
    if x.chk.roles is not None and ref.scope in _SHARED:
        _role_access(x, ref, win, True)


_SHARED = ("shared", "shared.dyn")


def _role_access(x, ref, win, write):
    sched = x.sched
    if sched is None or sched.current is None:
        return
    box = tuple((int(s.start or 0), int(s.stop)) for s in win)
    x.chk.roles.access(sched.current, ref, box, write, x.chk.gen_line(4))


def alloc_barriers(name: str, shape, counts) -> np.ndarray:
    n = int(np.prod([int(s) for s in shape])) if shape else 1
    arr = np.empty(n, dtype=object)
    for k in range(n):
        c = counts[k] if counts is not None and k < len(counts) else (counts[-1] if counts else 1)
        arr[k] = MBarrier(f"{name}[{k}]" if n > 1 else name, c)
    return arr.reshape(tuple(int(s) for s in shape)) if shape else arr


# ----------------------------------------------------------------------------------------------
# tile regions
# ----------------------------------------------------------------------------------------------
def _region(ref: BufRef, arr, mins, exts, op: str, role: str, allow_global_oob: bool):
    """(window slices of the in-range part, its position inside the tile, tile shape, partial?)"""
    if len(mins) != arr.ndim:
        raise EmulationError(f"{op}: a {len(mins)}-d region of the {arr.ndim}-d {ref.label()}")
    win, inner, ext, partial = [], [], [], False
    for d, (lo, e) in enumerate(zip(mins, exts)):
        lo, e, n = int(lo), int(e), arr.shape[d]
        a, b = max(lo, 0), min(lo + e, n)
        b = max(a, b)
        if a != lo or b != lo + e:
            partial = True
        win.append(slice(a, b))
        inner.append(slice(a - lo, a - lo + (b - a)))
        ext.append(e)
    if partial and not (allow_global_oob and ref.is_global):
        desc = ", ".join(f"{int(lo)}:{int(lo) + int(e)}" for lo, e in zip(mins, exts))
        first = next(d for d, (lo, e) in enumerate(zip(mins, exts))
                     if int(lo) < 0 or int(lo) + int(e) > arr.shape[d])
        raise OutOfBounds(f"out-of-bounds {op} {role}: region {ref.name}[{desc}] exceeds {ref.label()} "
                          f"(scope {ref.scope}, shape {tuple(arr.shape)}) in dimension {first}",
                          buffer=ref.name, scope=ref.scope, shape=tuple(arr.shape),
                          index=tuple(int(m) for m in mins))
    return tuple(win), tuple(inner), tuple(ext), partial


def _squeeze(shape):
    return tuple(s for s in shape if s != 1)


def copy(x: Exec, sref, sarr, smins, sexts, dref, darr, dmins, dexts, op="T.copy", bar=None) -> None:
    """``bar``: the mbarrier of a ``T.tma_copy``. The copy completes at once here; the role-race
    check orders its write only before the waits on that barrier's phase, as on the GPU."""
    swin, sin, sext, spart = _region(sref, sarr, smins, sexts, op, "source", True)
    dwin, din, dext, dpart = _region(dref, darr, dmins, dexts, op, "destination", True)
    if _squeeze(sext) != _squeeze(dext):
        raise EmulationError(f"{op}: the source region {sref.name} {sext} and the destination region "
                             f"{dref.name} {dext} have different shapes")
    if x.chk is not None:
        _rd(x, sref, sarr, swin, op, (dext, din) if dpart and not spart else None)
        if bar is not None and x.chk.roles is not None and dref.scope in _SHARED and x.sched is not None:
            box = tuple((int(s.start or 0), int(s.stop)) for s in dwin)
            x.chk.roles.async_write(x.sched.current, bar, dref, box, x.chk.gen_line(3))
        else:
            _wr(x, dref, dwin)
    if spart:
        tile = np.full(sext, sref.safe_value(), dtype=sarr.dtype)
        tile[sin] = sarr[swin]
        x.stats["guarded_loads"] += 1
    else:
        tile = sarr[swin]
    tile = D.astype(tile.reshape(dext), darr.dtype)
    if dpart:
        darr[dwin] = tile[din]
        x.stats["dropped_stores"] += 1
    else:
        darr[dwin] = tile
    x.stats["tile_ops"] += 1


def fill(x: Exec, ref, arr, mins, exts, value) -> None:
    win, _, _, part = _region(ref, arr, mins, exts, "T.fill", "destination", True)
    if x.chk is not None:
        _wr(x, ref, win)
    if ref.per_thread:
        raise UnsupportedConstruct("T.fill of a per-thread local buffer")
    arr[win] = value
    x.stats["tile_ops"] += 1


def _acc_dtype(dt):
    if D.is_float(dt):
        return np.float64 if dt == np.float64 else np.float32
    if dt == np.bool_:
        return np.bool_
    return np.int64


def reduce(x: Exec, sref, sarr, smins, sexts, dref, darr, dmins, dexts, kind: str, dim: int, clear: bool) -> None:
    swin, _, sext, _ = _region(sref, sarr, smins, sexts, f"T.reduce_{kind}", "source", False)
    dwin, _, dext, _ = _region(dref, darr, dmins, dexts, f"T.reduce_{kind}", "destination", False)
    if x.chk is not None:
        _rd(x, sref, sarr, swin, f"T.reduce_{kind}")
        if not clear:
            _rd(x, dref, darr, dwin, f"T.reduce_{kind}(..., clear=False) (its destination)")
        _wr(x, dref, dwin)
    src = sarr[swin]
    if not 0 <= dim < src.ndim:
        raise EmulationError(f"T.reduce_{kind}: dim {dim} of a {src.ndim}-d region")
    expect = int(np.prod(sext)) // max(sext[dim], 1)
    if int(np.prod(dext)) != expect:
        raise EmulationError(f"T.reduce_{kind}: reducing {sref.name} {sext} over dim {dim} gives {expect} values, "
                             f"but the destination region {dref.name} {dext} holds {int(np.prod(dext))}")
    ddt = darr.dtype
    acc = _acc_dtype(ddt)
    if kind in ("sum", "abssum"):
        v = D.astype(src, np.dtype(acc))
        if kind == "abssum":
            v = np.abs(v)
        r = v.sum(axis=dim, dtype=acc)
    elif kind in ("max", "absmax", "min"):
        v = np.abs(src) if kind == "absmax" else src
        r = v.max(axis=dim) if kind != "min" else v.min(axis=dim)
    elif kind == "bitand":
        r = np.bitwise_and.reduce(src, axis=dim)
    elif kind == "bitor":
        r = np.bitwise_or.reduce(src, axis=dim)
    else:
        r = np.bitwise_xor.reduce(src, axis=dim)
    r = D.astype(np.asarray(r), ddt).reshape(dext)
    dst = darr[dwin]
    if not clear:
        old = dst
        if kind in ("sum", "abssum"):
            r = (old + r).astype(ddt)
        elif kind in ("max", "absmax"):
            r = np.maximum(old, r)
        elif kind == "min":
            r = np.minimum(old, r)
        elif kind == "bitand":
            r = old & r
        elif kind == "bitor":
            r = old | r
        else:
            r = old ^ r
    darr[dwin] = r
    x.stats["tile_ops"] += 1


def scan(x: Exec, kind, sref, sarr, smins, sexts, dref, darr, dmins, dexts, dim: int, reverse: bool) -> None:
    op = "T.cumsum" if kind == "sum" else "T.cummax"
    swin, _, sext, _ = _region(sref, sarr, smins, sexts, op, "source", False)
    dwin, _, dext, _ = _region(dref, darr, dmins, dexts, op, "destination", False)
    if x.chk is not None:
        _rd(x, sref, sarr, swin, op)
        _wr(x, dref, dwin)
    src = sarr[swin]
    if _squeeze(sext) != _squeeze(dext):
        raise EmulationError(f"{op}: source {sref.name} {sext} and destination {dref.name} {dext} differ in shape")
    v = np.flip(src, axis=dim) if reverse else src
    if kind == "sum":
        acc = _acc_dtype(src.dtype)
        r = np.cumsum(v, axis=dim, dtype=acc)
    else:
        r = np.maximum.accumulate(v, axis=dim)
    if reverse:
        r = np.flip(r, axis=dim)
    darr[dwin] = D.astype(np.ascontiguousarray(r), darr.dtype).reshape(dext)
    x.stats["tile_ops"] += 1


def _mat(ref, arr, mins, exts, op, role, x=None, read=True):
    win, _, ext, _ = _region(ref, arr, mins, exts, op, role, False)
    if x is not None and x.chk is not None:
        if read:
            _rd(x, ref, arr, win, f"{op} (operand {role})" if role != "C" else f"{op} (accumulator C, clear_accum=False)")
        if role == "C":
            _wr(x, ref, win)
    v = arr[win]
    if v.ndim > 2:
        if any(s != 1 for s in v.shape[:-2]):
            raise EmulationError(f"{op}: operand {role} region {ref.name} {ext} must be 2-d (leading dims of 1)")
        v = v.reshape(v.shape[-2:])
    elif v.ndim < 2:
        raise EmulationError(f"{op}: operand {role} region {ref.name} {ext} is not 2-d")
    return v


def gemm(x: Exec, op, aref, aarr, amins, aexts, bref, barr, bmins, bexts, cref, carr, cmins, cexts,
         trans_a: bool, trans_b: bool, clear, M: int, N: int, K: int) -> None:
    a = _mat(aref, aarr, amins, aexts, op, "A", x)
    b = _mat(bref, barr, bmins, bexts, op, "B", x)
    c = _mat(cref, carr, cmins, cexts, op, "C", x, not bool(clear))
    if D.is_int(a.dtype):
        wide = np.int64
        af, bf = a.astype(wide), b.astype(wide)
    else:
        wide = np.float64 if (a.dtype == np.float64 or b.dtype == np.float64) else np.float32
        af, bf = D.astype(a, np.dtype(wide)), D.astype(b, np.dtype(wide))
    if trans_a:
        af = af.T
    if trans_b:
        bf = bf.T
    if af.shape != (M, K) or bf.shape != (K, N) or c.shape != (M, N):
        raise EmulationError(f"{op}: A {aref.name} gives {af.shape}, B {bref.name} gives {bf.shape}, C {cref.name} is "
                             f"{c.shape}; expected ({M}, {K}) @ ({K}, {N}) -> ({M}, {N})")
    r = af @ bf
    if not bool(clear):
        r = r + D.astype(c, np.dtype(wide)) if not D.is_int(c.dtype) else r + c.astype(np.int64)
    c[...] = D.astype(r, c.dtype) if not D.is_int(c.dtype) else r.astype(c.dtype)
    x.stats["tile_ops"] += 1
    x.stats["gemm_flops"] += 2 * M * N * K


def transpose(x: Exec, sref, sarr, smins, sexts, dref, darr, dmins, dexts) -> None:
    swin, _, sext, _ = _region(sref, sarr, smins, sexts, "T.transpose", "source", False)
    dwin, _, dext, _ = _region(dref, darr, dmins, dexts, "T.transpose", "destination", False)
    if x.chk is not None:
        _rd(x, sref, sarr, swin, "T.transpose")
        _wr(x, dref, dwin)
    s = sarr[swin]
    t = np.swapaxes(s, -1, -2)
    if t.shape != tuple(dext):
        raise EmulationError(f"T.transpose: source {sref.name} {sext} transposed is {t.shape}, destination is {dext}")
    darr[dwin] = D.astype(t, darr.dtype)
    x.stats["tile_ops"] += 1


def tile_atomic(x: Exec, kind, sref, sarr, smins, sexts, dref, darr, dmins, dexts) -> None:
    op = f"T.atomic_{kind}"
    swin, _, sext, spart = _region(sref, sarr, smins, sexts, op, "value", False)
    dwin, din, dext, dpart = _region(dref, darr, dmins, dexts, op, "destination", True)
    if _squeeze(sext) != _squeeze(dext):
        raise EmulationError(f"{op}: value region {sref.name} {sext} and destination {dref.name} {dext} differ "
                             "in shape")
    if x.chk is not None:
        _rd(x, sref, sarr, swin, op)
        if not dref.is_global:
            _rd(x, dref, darr, dwin, f"{op} (its destination)")
        _wr(x, dref, dwin)
    v = D.astype(sarr[swin].reshape(dext), darr.dtype)
    if dpart:
        v = v[din]
        x.stats["dropped_stores"] += 1
    cur = darr[dwin]
    if kind == "add":
        darr[dwin] = (cur + v).astype(darr.dtype)
    elif kind == "max":
        darr[dwin] = np.maximum(cur, v)
    else:
        darr[dwin] = np.minimum(cur, v)
    x.stats["tile_ops"] += 1


# ----------------------------------------------------------------------------------------------
# element atomics
# ----------------------------------------------------------------------------------------------
_UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum, "or": np.bitwise_or}


def atomic(x: Exec, kind: str, ref: BufRef, arr, ix: tuple, val, mask, ret: bool, fixed: tuple = ()):
    """Element atomic(s). Duplicate targets accumulate (each lane is one atomic, applied in lane
    order); out-of-range lanes of a global buffer are dropped (TileLang guards atomics too), but
    see ``fixed`` (:func:`unguarded`)."""
    if fixed:
        unguarded(ref, arr, ix, fixed, mask, "atomic update")
    ixs = [np.asarray(i) for i in ix]
    v = np.asarray(val)
    shapes = [i.shape for i in ixs] + [v.shape] + ([np.shape(mask)] if mask is not None else [])
    shape = np.broadcast_shapes(*shapes)
    scalar = shape == ()
    ixs = [np.broadcast_to(i, shape).reshape(-1) for i in ixs]
    v = np.broadcast_to(v, shape).reshape(-1)
    active = np.ones(v.shape, bool) if mask is None else np.broadcast_to(mask, shape).reshape(-1).copy()
    ok = _in_range(ixs, arr.shape)
    if ok is not None:
        ok = np.broadcast_to(ok, v.shape)
        if ref.is_global:
            if np.any(active & ~ok):
                x.stats["dropped_stores"] += 1
            active &= ok
        elif np.any(active & ~ok):
            _raise_first(ref, arr, "atomic update", ixs, active & ~ok)
    prev = np.zeros(v.shape, dtype=arr.dtype) if ret else None
    sel = np.nonzero(active)[0]
    if kind in ("load", "store"):
        for k in sel:
            t = tuple(int(i[k]) for i in ixs)
            if kind == "load":
                prev[k] = arr[t]
            else:
                arr[t] = v[k]
    elif not ret and arr.dtype.kind in "fiub" and arr.dtype.type.__module__ == "numpy":
        if sel.size:
            _UFUNC[kind].at(arr, tuple(i[sel] for i in ixs), D.astype(v[sel], arr.dtype) if v.dtype != arr.dtype
                            else v[sel])
    else:  # per-lane read-modify-write: exact per-update rounding, previous values for *_ret
        f = _UFUNC[kind]
        for k in sel:
            t = tuple(int(i[k]) for i in ixs)
            old = arr[t]
            if ret:
                prev[k] = old
            arr[t] = f(old, arr.dtype.type(v[k]))
    if not ret:
        return None
    return prev.reshape(shape)[()] if scalar else prev.reshape(shape)


# ----------------------------------------------------------------------------------------------
# T.print (the format of tl_templates/cuda/debug.h)
# ----------------------------------------------------------------------------------------------
def _fmt_value(v, dtname: str) -> tuple[str, str]:
    cname, conv = D.PRINT_TYPES.get(dtname, ("unknown", "%p"))
    if dtname == "bool":
        return cname, "true" if bool(v) else "false"
    if conv == "%f":
        f = float(v)
        if math.isnan(f):
            return cname, "-nan" if math.copysign(1.0, f) < 0 else "nan"
        return cname, "%f" % f
    if conv in ("%d", "%u"):
        return cname, "%d" % int(v)
    return cname, str(v)


def _thread_xyz(t: int, dims) -> tuple:
    X, Y, _ = dims
    return (t % X, (t // X) % Y, t // (X * Y))


def _lines_per_lane(x: Exec, tids, mask, values, in_parallel: bool):
    """Yield (thread id, value) for each lane that prints: every active thread, or inside a
    T.Parallel loop every active iteration (owner thread = iteration number mod threads)."""
    tids = np.asarray(tids).reshape(-1)
    nt = tids.size
    vals = [np.asarray(v) for v in values]
    shapes = [v.shape for v in vals] + ([np.shape(mask)] if mask is not None else [])
    shape = np.broadcast_shapes(*shapes) if shapes else ()
    if not in_parallel:
        def per_thread(a):
            a = a.reshape(a.shape[0], -1)[:, 0] if a.ndim else a.reshape(1)
            return np.broadcast_to(a, (nt,))
        vals = [per_thread(v) for v in vals]
        m = None if mask is None else per_thread(np.asarray(mask))
        for k in range(nt):
            if m is None or m[k]:
                yield int(tids[k]), [v[k] for v in vals]
        return
    # inside T.Parallel: one line per iteration
    par_shape = tuple(shape[1:])
    full = (max(shape[0], 1),) + par_shape if shape else (1,)
    vals = [np.broadcast_to(v, full) for v in vals]
    m = None if mask is None else np.broadcast_to(mask, full)
    n_iter = int(np.prod(par_shape)) if par_shape else 1
    for it in range(n_iter):
        pos = np.unravel_index(it, par_shape) if par_shape else ()
        owner = it % nt
        row = owner if full[0] == nt else 0
        if m is not None and not m[(row,) + tuple(pos)]:
            continue
        yield int(tids[owner]), [v[(row,) + tuple(pos)] for v in vals]


def print_var(x: Exec, tids, mask, in_parallel: bool, msg: str, value, dtname: str) -> None:
    bx, by, bz = x.block
    out = []
    for t, (v,) in _lines_per_lane(x, tids, mask, [value], in_parallel):
        cname, s = _fmt_value(v, dtname)
        tx, ty, tz = _thread_xyz(t, x.threads)
        out.append(f"msg='{msg}' BlockIdx=({bx}, {by}, {bz}), ThreadIdx=({tx}, {ty}, {tz}): dtype={cname} value={s}\n")
    _emit(x, out)


def print_buffer_value(x: Exec, tids, mask, in_parallel: bool, msg: str, name: str, index, value,
                       dtname: str) -> None:
    bx, by, bz = x.block
    out = []
    dt = "uint16_t" if dtname == "uint16" else None
    for t, (i, v) in _lines_per_lane(x, tids, mask, [index, value], in_parallel):
        cname, s = _fmt_value(v, dtname)
        tx, ty, tz = _thread_xyz(t, x.threads)
        out.append(f"msg='{msg}' BlockIdx=({bx}, {by}, {bz}), ThreadIdx=({tx}, {ty}, {tz}): buffer={name}, "
                   f"index={int(i)}, dtype={dt or cname} value={s}\n")
    _emit(x, out)


def print_msg(x: Exec, tids, mask, in_parallel: bool, msg: str) -> None:
    bx, by, bz = x.block
    out = []
    for t, _ in _lines_per_lane(x, tids, mask, [], in_parallel):
        tx, ty, tz = _thread_xyz(t, x.threads)
        out.append(f"msg='{msg}' BlockIdx=({bx}, {by}, {bz}), ThreadIdx=({tx}, {ty}, {tz})\n")
    _emit(x, out)


def _emit(x: Exec, lines) -> None:
    if lines:
        (x.out or sys.stdout).write("".join(lines))
        x.stats["printed_lines"] += len(lines)


# ----------------------------------------------------------------------------------------------
# warp-level intrinsics (over the threads of the current role)
# ----------------------------------------------------------------------------------------------
def _per_thread(v, tids, mask):
    """(values per thread as 1-d array or None if uniform, active per thread)."""
    nt = tids.size
    a = np.asarray(v)
    act = np.ones(nt, bool)
    if mask is not None:
        mm = np.asarray(mask)
        mm = mm.reshape(mm.shape[0], -1).any(axis=1) if mm.ndim > 1 else mm.reshape(-1)
        act = np.broadcast_to(mm, (nt,)).copy() if mm.size in (1, nt) else act
    if a.ndim == 0:
        return None, act, a
    if a.ndim > 1 and any(s != 1 for s in a.shape[1:]):
        raise UnsupportedConstruct("warp intrinsic inside T.Parallel", "a warp vote / shuffle of a value that varies "
                                   "over a T.Parallel loop is not emulated (which thread owns which element is "
                                   "decided by layout inference)")
    a = a.reshape(a.shape[0])
    if a.shape[0] == 1:
        return None, act, a[0]
    return a, act, None


def _warp_groups(tids):
    return np.asarray(tids) // 32


def vote(kind: str, pred, tids, mask, ndim: int):
    vals, act, uni_v = _per_thread(pred, tids, mask)
    if vals is None:
        b = bool(uni_v)
        return int(b)
    p = (vals != 0) & act
    w = _warp_groups(tids)
    out = np.zeros(tids.size, np.int32)
    for g in np.unique(w):
        sel = w == g
        if kind == "any":
            r = bool(np.any(p[sel]))
        else:
            r = bool(np.all((vals[sel] != 0) | ~act[sel]))
        out[sel] = int(r)
    return out.reshape((-1,) + (1,) * (ndim - 1))


def block_vote(kind: str, pred, tids, nthreads: int):
    """``__syncthreads_or`` / ``_and`` / ``_count``: one value for the whole block (``count``: the
    threads whose ``pred`` is non-zero). Refused where only part of the block runs the statement
    (a warp-specialised role): on the GPU the other threads would never reach the barrier."""
    if np.asarray(tids).size != nthreads:
        raise UnsupportedConstruct(f"T.syncthreads_{kind}", f"reached by {np.asarray(tids).size} of the block's "
                                   f"{nthreads} threads (a warp-specialised role): every thread must reach it")
    vals, _, uni_v = _per_thread(pred, tids, None)
    p = np.full(nthreads, bool(uni_v)) if vals is None else vals != 0
    if kind == "count":
        return int(np.count_nonzero(p))
    return int(bool(np.any(p)) if kind == "or" else bool(np.all(p)))


def shfl(kind: str, value, arg, width, tids, ndim: int):
    vals, act, uni_v = _per_thread(value, tids, None)
    if vals is None:
        return uni_v
    tids = np.asarray(tids)
    lane = tids % 32
    w = int(width)
    a = np.asarray(arg).reshape(-1) if isinstance(arg, np.ndarray) else arg
    if kind == "xor":
        src_lane = lane ^ a
    elif kind == "down":
        src_lane = lane + a
    elif kind == "up":
        src_lane = lane - a
    else:  # idx
        src_lane = (lane // w) * w + (np.asarray(a) % w)
    seg = lane // w
    inside = (src_lane >= 0) & (src_lane < 32) & (src_lane // w == seg)
    src_tid = np.where(inside, tids - lane + src_lane, tids)
    pos = np.searchsorted(tids, src_tid)
    pos = np.clip(pos, 0, tids.size - 1)
    found = tids[pos] == src_tid
    out = np.where(found, vals[pos], vals)
    return out.reshape((-1,) + (1,) * (ndim - 1))


# ----------------------------------------------------------------------------------------------
# barriers
# ----------------------------------------------------------------------------------------------
def mbar_arrive(x: Exec, bar, n: int) -> None:
    if not isinstance(bar, MBarrier):
        raise EmulationError(f"T.barrier_arrive on {bar!r}, which is not an mbarrier (T.alloc_barrier)")
    if x.chk is not None and x.chk.roles is not None and x.sched is not None and x.sched.current is not None:
        x.chk.roles.arrive(x.sched.current, bar)
    bar.arrive(int(n))
    x.stats["mbarrier_arrivals"] += 1


def mma_commit(x: Exec, bar, sync_op):
    """A TCGEN5MMA's completion (``tcgen05.commit``): one arrival on ``bar``; the MMA itself has
    completed already. ``sync_op`` (the op's name) for the synchronous ``T.gemm``, which then waits
    for the phase this arrival belongs to: returns None when it has completed, else a wait (the
    barrier expects more arrivals per phase); None for ``T.tcgen05_gemm``, which does not wait."""
    if not isinstance(bar, MBarrier):
        raise EmulationError(f"mbar= of a GEMM is {bar!r}, which is not an mbarrier (T.alloc_barrier)")
    phase = bar.phase
    if x.chk is not None and x.chk.roles is not None and x.sched is not None and x.sched.current is not None:
        x.chk.roles.arrive(x.sched.current, bar)
    bar.arrive(1)
    x.stats["mbarrier_arrivals"] += 1
    if sync_op is None or bar.phase > phase:
        return None
    return MmaWait(bar, phase, sync_op)


def nwarps(tids) -> int:
    """How many warps the threads ``tids`` belong to."""
    return int(np.unique(np.asarray(tids).ravel() // 32).size)


def mbar_wait(bar, parity, x=None):
    """Role mode: None if the phase of ``parity`` has completed, else a wait for the scheduler."""
    if not isinstance(bar, MBarrier):
        raise EmulationError(f"T.barrier_wait on {bar!r}, which is not an mbarrier (T.alloc_barrier)")
    if bar.done(parity):
        if x is not None and x.chk is not None and x.chk.roles is not None and x.sched is not None \
                and x.sched.current is not None:
            x.chk.roles.waited(x.sched.current, bar, parity)
        return None
    return ParityWait(bar, parity)


def named_sync(x: Exec, bid, count, n: int, who: str):
    """``bar.sync``: arrive with ``n`` threads and wait for the generation to complete."""
    bid = int(bid)
    nb = x.named.get(bid)
    if nb is None:
        nb = x.named[bid] = NamedBarrier(bid)
    tracker = x.chk.roles if x.chk is not None else None
    if tracker is not None and x.sched is not None and x.sched.current is not None:
        tracker.named.setdefault((bid, nb.generation), []).append(x.sched.current)
    gen = nb.arrive(n, int(count) if count is not None else x.nthreads, who)
    if tracker is not None and nb.generation != gen:
        tracker.sync_join(tracker.named.pop((bid, gen), []))
    return None if nb.generation != gen else SyncWait(nb, gen)


def named_arrive(x: Exec, bid, count, n: int, who: str) -> None:
    bid = int(bid)
    nb = x.named.get(bid)
    if nb is None:
        nb = x.named[bid] = NamedBarrier(bid)
    tracker = x.chk.roles if x.chk is not None else None
    if tracker is not None and x.sched is not None and x.sched.current is not None:
        tracker.named.setdefault((bid, nb.generation), []).append(x.sched.current)
    gen = nb.arrive(n, int(count), who)
    if tracker is not None and nb.generation != gen:
        tracker.sync_join(tracker.named.pop((bid, gen), []))
