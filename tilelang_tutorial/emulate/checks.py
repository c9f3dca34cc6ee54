"""What the emulator checks beyond running the program: uninitialised reads, races, the target's
limits. One :class:`Checker` per launch collects :class:`Finding` objects; each is also issued as
a Python warning (one line) unless the run is strict, where the first one is raised.

* **Uninitialised reads.** Fresh on-chip buffers (shared, fragment, local, var, tensor memory) are
  poisoned with a *signalling* NaN carrying the payload ``0xA5`` (floats; arithmetic turns it
  into an ordinary quiet NaN, only a copy keeps the exact bits) or the bytes ``0xA5`` (32- and
  64-bit integers). A read whose active lanes see that exact bit pattern reads an element nothing
  has written yet. A buffer found free of the pattern is not scanned again in that block, so the
  cost after the first read is one dictionary lookup. 8- and 16-bit integers, bools and fp8 are
  not checked (their poison is a plausible value).
* **Races in one step.** Lanes of one statement (threads, ``T.Parallel`` iterations) storing
  *different* values into one element of a shared buffer or a fragment without an atomic.
* **Races between warp-specialised roles.** Each role of a block has a vector clock; an mbarrier
  arrive publishes the arriving role's clock into the phase it completes, a wait that passes (or
  a named barrier / ``__syncthreads``) joins it. Each access to a shared buffer by a role is
  recorded (bounding box of the elements, the role's clock, the source line); an access by
  another role that overlaps a write (or a write that overlaps a read) not ordered before it by
  the clocks is a race, reported with both roles and both lines.
* **Limits** (:func:`check_limits`): shared memory per block and threads per block of the target
  architecture, before the run.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import dtypes as D
from .errors import EmulationError

#: the check names accepted by ``emulate.run(..., checks=...)``
ALL_CHECKS = frozenset({"uninit", "races", "limits"})
DEFAULT_CHECKS = ALL_CHECKS


def parse_checks(checks) -> frozenset:
    """``None`` / ``True`` / ``"all"`` -> every check; ``False`` / ``""`` / ``"none"`` -> none; else a
    comma-separated string or an iterable of names from :data:`ALL_CHECKS`."""
    if checks is None or checks is True or checks == "all":
        return DEFAULT_CHECKS
    if checks is False or checks == "" or checks == "none":
        return frozenset()
    names = [c.strip() for c in checks.split(",")] if isinstance(checks, str) else [str(c) for c in checks]
    names = {"races" if n == "race" else n for n in names if n}
    bad = sorted(names - ALL_CHECKS)
    if bad:
        raise ValueError(f"unknown emulator check(s) {', '.join(map(repr, bad))}; choose from "
                         f"{', '.join(sorted(ALL_CHECKS))} (comma-separated), 'all' or 'none'")
    return frozenset(names)


# ----------------------------------------------------------------------------------------------
# findings
# ----------------------------------------------------------------------------------------------
class EmulatorWarning(UserWarning):
    """Base class of the warnings the emulator's checks issue."""


class UninitialisedReadWarning(EmulatorWarning):
    pass


class RaceWarning(EmulatorWarning):
    pass


class UninitialisedRead(EmulationError):
    """Raised by a strict run (``strict=True``) at the first uninitialised read."""

    def __init__(self, finding):
        self.finding = finding
        super().__init__(finding.message)


class Race(EmulationError):
    """Raised by a strict run (``strict=True``) at the first race."""

    def __init__(self, finding):
        self.finding = finding
        super().__init__(finding.message)


@dataclass
class Finding:
    """One report: ``kind`` is ``"uninit"`` or ``"race"``; ``message`` is one line."""
    kind: str
    buffer: str
    element: tuple
    message: str
    block: tuple = (0, 0, 0)
    lines: list = field(default_factory=list)     # source lines involved ("file:line: text")
    who: list = field(default_factory=list)       # threads or roles involved

    def __str__(self) -> str:
        return self.message


def _fmt_val(v) -> str:
    v = np.asarray(v)[()]
    if isinstance(v, (np.floating, float)) or getattr(v, "dtype", np.dtype("O")).kind == "f":
        return f"{float(v):.6g}"
    try:
        return str(int(v))
    except (TypeError, ValueError):
        return str(v)


def _fmt_elem(ix) -> str:
    return "[" + ", ".join(str(int(v)) for v in ix) + "]"


# ----------------------------------------------------------------------------------------------
# poison patterns
# ----------------------------------------------------------------------------------------------
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_PATTERN: dict = {}


def _pattern_of(dt: np.dtype):
    """(unsigned view dtype, bit pattern) of the detectable poison of ``dt``, or None."""
    try:
        return _PATTERN[dt]
    except KeyError:
        pass
    key = dt
    pat = None
    name = D.canonical(dt.name) if hasattr(dt, "name") else ""
    if name == "float16":
        pat = (np.uint16, 0x7DA5)
    elif name == "bfloat16":
        pat = (np.uint16, 0x7FA5)
    elif name == "float32":
        pat = (np.uint32, 0x7FA5A5A5)
    elif name == "float64":
        pat = (np.uint64, 0x7FF4A5A5A5A5A5A5)
    elif dt.kind in "iu" and dt.itemsize >= 4:
        pat = (_UINT[dt.itemsize], int("A5" * dt.itemsize, 16))
    if pat is not None:
        pat = (np.dtype(pat[0]), pat[0](pat[1]))
    _PATTERN[key] = pat
    return pat


def poison_onchip(shape, dt: np.dtype) -> np.ndarray:
    """A fresh on-chip buffer: the detectable poison where ``dt`` has one, else D.poison_array."""
    pat = _pattern_of(dt)
    if pat is None:
        return D.poison_array(shape, dt)
    arr = np.empty(shape, dtype=dt)
    arr.view(pat[0]).fill(pat[1])
    return arr


def _poisoned(v, pat):
    a = np.asarray(v)
    return a.view(pat[0]) == pat[1]


# ----------------------------------------------------------------------------------------------
# the checker of one launch
# ----------------------------------------------------------------------------------------------
_GEN_PREFIX = "<tilelang-emulate"
# warnings point at the first frame outside the tutorial's package (the reader's cell / test)
_PKG_DIR = __import__("os").path.dirname(__import__("os").path.dirname(__file__))


def _user_stacklevel() -> int:
    """The warnings stack level of the first frame outside tilelang_tutorial (the code that ran the
    kernel: a notebook cell, a test), so the warning shows the reader's line."""
    f, level = sys._getframe(1), 1
    while f is not None and (f.f_code.co_filename.startswith(_PKG_DIR)
                             or f.f_code.co_filename.startswith(_GEN_PREFIX)):
        f, level = f.f_back, level + 1
    return level


class Checker:
    def __init__(self, kinds: frozenset, strict: bool, locate, kernel_name: str):
        self.uninit = "uninit" in kinds
        self.races = "races" in kinds
        self.strict = strict
        self.locate = locate               # frame -> (where text, source line text, loop values)
        self.kernel = kernel_name
        self.dirty: dict = {}              # id(array) -> (BufRef, array): may still hold poison
        self._scans: dict = {}             # id(array) -> reads checked so far
        self.findings: list[Finding] = []
        self._seen: set = set()
        self.x = None                      # the Exec (block index)
        self.roles = None                  # RoleTracker of the current block, or None
        self.locate_line = None            # generated-code line -> (file:line, source text)

    # ------------------------------------------------------------------ reporting
    def _where(self, depth: int = 2):
        f = sys._getframe(depth)
        while f is not None and not f.f_code.co_filename.startswith(_GEN_PREFIX):
            f = f.f_back
        return self.locate(f) if f is not None else ("", "", "")

    def gen_line(self, depth: int = 2) -> int:
        """The line of the generated code executing now (resolved to a source line only when a
        finding needs it: cheap enough for every access)."""
        f = sys._getframe(depth)
        while f is not None and not f.f_code.co_filename.startswith(_GEN_PREFIX):
            f = f.f_back
        return f.f_lineno if f is not None else -1

    def line_text(self, gen_line: int) -> str:
        where, src = self.locate_line(gen_line) if self.locate_line is not None else ("", "")
        return f"{where} ({src})" if src else where

    def report(self, kind: str, key, buffer: str, element, message: str, lines=(), who=()) -> None:
        if key in self._seen:
            return
        self._seen.add(key)
        block = tuple(int(v) for v in self.x.block) if self.x is not None else (0, 0, 0)
        f = Finding(kind, buffer, tuple(int(v) for v in element), message, block, list(lines), list(who))
        self.findings.append(f)
        if self.strict:
            raise (UninitialisedRead(f) if kind == "uninit" else Race(f))
        warnings.warn(message, UninitialisedReadWarning if kind == "uninit" else RaceWarning,
                      stacklevel=_user_stacklevel())

    # ------------------------------------------------------------------ uninitialised reads
    def track(self, ref, arr) -> None:
        if _pattern_of(arr.dtype) is not None:
            self.dirty[id(arr)] = (ref, arr)
            self._scans.pop(id(arr), None)

    def _still_dirty(self, arr):
        base = arr if arr.base is None else arr.base
        ent = self.dirty.get(id(base))
        if ent is None or ent[1] is not base:
            return None
        pat = _pattern_of(base.dtype)
        n = self._scans.get(id(base), 0)
        self._scans[id(base)] = n + 1
        # the whole buffer is scanned on the first read and then every 16th: a buffer the program
        # fills completely leaves the dirty set, one it never fills is not rescanned at every read
        if n % 16 == 0 and not np.any(_poisoned(base, pat)):
            del self.dirty[id(base)]
            return None
        return ent, pat

    def load(self, ref, arr, v, mask, ixf):
        """An element / vector load from an on-chip buffer (``ixf()``: ('ix', index tuple) or
        ('sl', slices, post) for the report)."""
        st = self._still_dirty(arr)
        if st is None:
            return v
        _, pat = st
        bad = _poisoned(v, pat)
        if mask is not None:
            m = np.asarray(mask, dtype=bool)
            shape = np.broadcast_shapes(bad.shape, m.shape)
            bad = np.broadcast_to(bad, shape) & np.broadcast_to(m, shape)
        if not np.any(bad):
            return v
        pos = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
        kind, *rest = ixf()
        if kind == "ix":
            ix = rest[0]
            elem = [int(np.broadcast_to(np.asarray(i), bad.shape)[pos]) if np.ndim(i) else int(i) for i in ix]
        else:
            from .dtypes import slices_to_index_arrays as _slices_to_index_arrays
            sl, post = rest
            raw = _slices_to_index_arrays(sl)
            full = np.broadcast_shapes(*[np.shape(i) for i in raw])
            elem = [int(np.broadcast_to(post(np.broadcast_to(i, full)), bad.shape)[pos]) for i in raw]
        self._uninit(ref, elem, "read")
        return v

    def region(self, ref, arr, win, what: str, sub=None) -> None:
        """A tile operator reads ``arr[win]`` (``sub``: only that part of the window, reshaped)."""
        st = self._still_dirty(arr)
        if st is None:
            return
        _, pat = st
        vals = arr[win]
        if sub is not None:
            shape, inner = sub
            bad = _poisoned(vals.reshape(shape)[inner], pat)
            if not np.any(bad):
                return
            # map back: positions in the reshaped window -> window positions
            idx = np.arange(vals.size).reshape(shape)[inner][tuple(np.argwhere(bad)[0])]
            pos = np.unravel_index(int(idx), vals.shape)
        else:
            bad = _poisoned(vals, pat)
            if not np.any(bad):
                return
            pos = tuple(np.argwhere(bad)[0])
        elem = [int(s.start or 0) + int(p) for s, p in zip(win, pos)]
        self._uninit(ref, elem, f"read by {what}")

    def _uninit(self, ref, elem, how: str) -> None:
        if ref.per_thread:
            thread, elem = elem[0], elem[1:]
            whose = f" (thread {thread}'s copy)"
        else:
            whose = ""
        where, src, loops = self._where(3)
        label = ref.label()
        hint = ("a missing T.clear / T.fill, or a copy that does not cover it?" if ref.scope != "local.var"
                else "a T.alloc_var without init= read before its first store?")
        msg = (f"uninitialised read: {label} element {_fmt_elem(elem)}{whose} is {how} before anything wrote "
               f"it, at {where}" + (f": {src}" if src else "") + (f" ({loops})" if loops else "")
               + f" [kernel {self.kernel}, block {tuple(int(v) for v in self.x.block)}] -- {hint}")
        # once per buffer: later reads of what the first one computed would repeat the same cause
        self.report("uninit", ("uninit", ref.name), ref.name, elem, msg, [f"{where}: {src}"])

    # ------------------------------------------------------------------ races in one step
    def same_step(self, ref, arr, ixs, v, shape, positions, tids) -> None:
        """Lanes of one store: ``ixs`` (flattened element indices per dim), ``v`` (values),
        ``positions`` (flat lane positions in the broadcast ``shape``). Reports two lanes writing
        one element with different values."""
        if ref.scope not in ("shared", "shared.dyn", "local.fragment", "global") or v.size < 2:
            return
        lin = np.ravel_multi_index(tuple(np.asarray(i, dtype=np.int64) for i in ixs), arr.shape)
        order = np.argsort(lin, kind="stable")
        ls, vs = lin[order], v[order]
        same = ls[1:] == ls[:-1]
        if not np.any(same):
            return
        a, b = vs[1:], vs[:-1]
        differ = a != b
        if D.is_float(vs.dtype):
            differ &= ~(np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32)))
        hit = same & differ
        if not np.any(hit):
            return
        k = int(np.argmax(hit))
        la, lb = int(order[k]), int(order[k + 1])
        elem = np.unravel_index(int(ls[k]), arr.shape)
        if ref.per_thread:
            return
        where, src, loops = self._where(3)
        who = [self._lane(positions[la], shape, tids), self._lane(positions[lb], shape, tids)]
        nwriters = int(np.count_nonzero(ls == ls[k]))
        msg = (f"race: {ref.label()} element {_fmt_elem(elem)} is written in one step by {nwriters} lanes with "
               f"different values, without an atomic -- {who[0]} writes {_fmt_val(vs[k])} and {who[1]} writes "
               f"{_fmt_val(vs[k + 1])}, both at {where}" + (f": {src}" if src else "")
               + f" [kernel {self.kernel}, block {tuple(int(v) for v in self.x.block)}]; the GPU keeps any one "
               "of them (use T.atomic_add / a reduction, or let one thread write)")
        self.report("race", ("step", ref.name, where), ref.name, elem, msg, [f"{where}: {src}"] * 2, who)

    @staticmethod
    def _lane(flat, shape, tids) -> str:
        pos = np.unravel_index(int(flat), shape) if shape else ()
        parts = []
        nt = tids.size if tids is not None else 1
        it = pos[1:]
        if shape and shape[0] > 1 and tids is not None:
            parts.append(f"thread {int(tids[pos[0]])}")
        if it:
            k = int(np.ravel_multi_index(it, shape[1:]))
            its = [int(v) for v in it]
            parts.append(f"iteration {its[0] if len(its) == 1 else tuple(its)}")
            if not (shape and shape[0] > 1) and tids is not None:
                parts.insert(0, f"thread {int(tids[k % nt])}")
        if len(parts) == 2:
            return f"{parts[0]} ({parts[1]})"
        return parts[0] if parts else "a lane"


# ----------------------------------------------------------------------------------------------
# races between roles: vector clocks
# ----------------------------------------------------------------------------------------------
class RoleTracker:
    """Happens-before between the warp-specialised roles of one block (see the module docstring).

    Roles are keyed by the scheduler's Role objects. ``clock[r]`` is a dict role-key -> int. An
    access record is (role key, clock value of that role at the access, box, is_write, where)."""

    MAX_RECORDS = 24

    def __init__(self, checker: Checker):
        self.checker = checker
        self.clock: dict = {}
        self.names: dict = {}
        self.records: dict = {}           # buffer name -> list of records
        self.mbar: dict = {}              # (id(barrier), phase) -> published clock
        self.named: dict = {}             # (barrier id, generation) -> joined clock
        self.async_roles: dict = {}       # (issuing role, barrier id) -> _AsyncCopy
        self.in_flight: dict = {}         # (barrier id, phase) -> the first copy landing on it, until a wait

    def _key(self, role):
        return id(role)

    def clock_of(self, role) -> dict:
        k = self._key(role)
        c = self.clock.get(k)
        if c is None:
            parent = getattr(role, "parent", None)
            c = dict(self.clock_of(parent)) if parent is not None else {}
            c[k] = c.get(k, 0) + 1
            self.clock[k] = c
            self.names[k] = role            # labelled only when a finding names it
        return c

    def tick(self, role) -> None:
        c = self.clock_of(role)
        k = self._key(role)
        c[k] = c.get(k, 0) + 1

    @staticmethod
    def _join(into: dict, other: dict) -> None:
        for k, v in other.items():
            if into.get(k, 0) < v:
                into[k] = v

    def arrive(self, role, bar) -> None:
        """``role`` arrives on mbarrier ``bar`` in its current phase."""
        key = (id(bar), bar.phase)
        pub = self.mbar.setdefault(key, {})
        self._join(pub, self.clock_of(role))
        self.tick(role)

    def async_write(self, role, bar, ref, box, where: int) -> None:
        """An asynchronous copy (``T.tma_copy(..., barrier=bar)``) issued by ``role`` writes ``box``
        of ``ref``. The copy starts after the role's earlier accesses, but it lands when ``bar``'s
        current phase completes: another role sees it only through a wait on that phase (or one
        ordered after such a wait), not through the issuing role's later arrivals on other
        barriers. Its write is recorded under a role of its own per (issuer, barrier), whose
        clock is published into that phase."""
        if role is None or getattr(role, "parent", None) is None:
            return                       # the whole block outside warp-specialised branches
        key = (self._key(role), id(bar))
        copier = self.async_roles.get(key)
        if copier is None:
            copier = self.async_roles[key] = _AsyncCopy(role, bar)
        clock = self.clock_of(copier)
        self._join(clock, self.clock_of(role))
        self.tick(copier)
        self.access(copier, ref, box, True, where)
        self._join(self.mbar.setdefault((id(bar), bar.phase), {}), clock)
        self.in_flight.setdefault((id(bar), bar.phase), (copier, ref, box, where))

    def waited(self, role, bar, parity) -> None:
        """``role`` passed a wait for the last completed phase of parity ``parity``."""
        ph = bar.phase - 1
        while ph >= 0 and (ph & 1) != (int(parity) & 1):
            ph -= 1
        if ph < 0:
            return
        for key in [k for k in self.in_flight if k[0] == id(bar) and k[1] <= ph]:
            del self.in_flight[key]     # a phase completes after every earlier one: their copies landed
        pub = self.mbar.get((id(bar), ph))
        if pub:
            self._join(self.clock_of(role), pub)

    def block_ended(self) -> None:
        """The block ran to its end: a copy whose barrier phase nothing waited for may still be in
        flight on a GPU, writing shared memory the next block on that SM is given."""
        for (_, phase), (copier, ref, box, where) in self.in_flight.items():
            where = self.checker.line_text(where)
            msg = (f"race: {copier.label()} into {ref.label()} at {where}: nothing waits for that phase ({phase}), "
                   f"so the block can end with the copy still in flight [kernel {self.checker.kernel}, block "
                   f"{tuple(int(v) for v in self.checker.x.block)}]")
            self.checker.report("race", ("in flight", ref.name, where), ref.name, tuple(b[0] for b in box), msg,
                                [where], [copier.label()])

    def sync_join(self, roles) -> None:
        """Every role in ``roles`` passed one named barrier generation together."""
        joined: dict = {}
        for r in roles:
            self._join(joined, self.clock_of(r))
        for r in roles:
            self._join(self.clock_of(r), joined)
            self.tick(r)

    def _label(self, k) -> str:
        r = self.names.get(k)
        return r.label() if hasattr(r, "label") else str(r)

    def finished(self, role) -> None:
        """A sub-role ended: its parent resumes after it (the parent waits for its sub-roles)."""
        parent = role.parent
        if parent is not None:
            self._join(self.clock_of(parent), self.clock_of(role))

    def access(self, role, ref, box, write: bool, where: int) -> None:
        """``where``: the generated-code line (Checker.gen_line)."""
        if role is None or getattr(role, "parent", None) is None:
            return                       # the whole block outside warp-specialised branches
        k = self._key(role)
        c = self.clock_of(role)
        recs = self.records.get(ref.name)
        if recs is None:
            recs = self.records[ref.name] = []
        for (rk, rc, rbox, rw, rwhere) in recs:
            if rk == k or not (rw or write):
                continue
            if c.get(rk, 0) >= rc:       # that access happened before this one
                continue
            if not _overlap(rbox, box):
                continue
            elem = tuple(max(a[0], b[0]) for a, b in zip(rbox, box))
            kinds = ("writes" if rw else "reads", "writes" if write else "reads")
            rwhere, where = self.checker.line_text(rwhere), self.checker.line_text(where)
            rname, name = self._label(rk), self._label(k)
            msg = (f"race: {ref.label()} element {_fmt_elem(elem)}: {rname} {kinds[0]} it at "
                   f"{rwhere} and {name} {kinds[1]} it at {where} with no mbarrier wait or "
                   f"barrier ordering them [kernel {self.checker.kernel}, block "
                   f"{tuple(int(v) for v in self.checker.x.block)}]")
            self.checker.report("race", ("roles", ref.name, rwhere, where), ref.name, elem, msg,
                                [rwhere, where], [rname, name])
            break
        recs.append((k, c.get(k, 0), box, write, where))
        if len(recs) > self.MAX_RECORDS:
            del recs[: len(recs) - self.MAX_RECORDS]


class _AsyncCopy:
    """The asynchronous copies one role issues against one mbarrier, as a role of the tracker."""

    def __init__(self, parent, bar):
        self.parent, self.bar = parent, bar

    def label(self) -> str:
        issuer = self.parent.label() if hasattr(self.parent, "label") else str(self.parent)
        return f"{issuer}'s T.tma_copy (landing on mbarrier {self.bar.name})"


def _overlap(a, b) -> bool:
    return all(x0 < y1 and y0 < x1 for (x0, x1), (y0, y1) in zip(a, b))


# ----------------------------------------------------------------------------------------------
# limits
# ----------------------------------------------------------------------------------------------
class LimitExceeded(EmulationError):
    """The kernel cannot launch on the target: too much shared memory or too many threads."""


MAX_THREADS_PER_BLOCK = 1024


def pipelined_loops(body) -> list:
    """``[(num_stages, {shared buffer name: copies})]`` for each ``T.Pipelined`` loop with
    ``num_stages`` > 1: every shared buffer the loop touches is live through it, and TileLang's
    pipelining gives each one a copy from global memory fills ``num_stages`` copies (the loads of
    the next tiles run while the current ones are used); the others keep one."""
    from tvm import tirx as tir
    from tvm.tirx.stmt_functor import post_order_visit
    from . import encoding as E

    loops = []

    def touched(loop) -> dict:
        names, filled = set(), set()

        def visit(n):
            if isinstance(n, (tir.BufferLoad, tir.BufferStore)) and n.buffer.scope() in E.SHARED_SCOPES:
                names.add(n.buffer.name)
            elif isinstance(n, tir.Call) and E.op_name(n) in E.COPY_OPS and len(n.args) >= 2:
                try:
                    src, dst = E.decode_region(n.args[0], "copy"), E.decode_region(n.args[1], "copy")
                except Exception:  # noqa: BLE001 (a form the limit check need not understand)
                    return
                if src.buffer.scope() == "global" and dst.buffer.scope() in E.SHARED_SCOPES:
                    filled.add(dst.buffer.name)
        post_order_visit(loop.body, visit)
        return {name: name in filled for name in names | filled}

    def visit_loop(n):
        if isinstance(n, tir.For) and n.annotations is not None and "num_stages" in n.annotations:
            stages = int(n.annotations["num_stages"])
            if stages > 1:
                loops.append((stages, {name: stages if filled else 1 for name, filled in touched(n).items()}))
    post_order_visit(body, visit_loop)
    return loops


def shared_bytes(func) -> list:
    """Per T.Kernel: (threads, bytes of shared memory it needs at least, [(name, bytes, copies)] of
    the buffers behind that figure). The figure is the larger of every buffer allocated once and,
    per ``T.Pipelined`` loop, the buffers live through it with one copy per stage of those filled
    from global memory (:func:`pipelined_loops`). It is a lower bound: TileLang may also reuse the
    memory of buffers whose lifetimes do not overlap, which is why buffers outside a loop do not count
    towards it."""
    from tvm import tirx as tir
    from .analysis import walk
    from . import encoding as E

    out = []

    def kernel_info(body):
        threads = [None]
        sizes = {}

        def fn(n):
            if isinstance(n, tir.SBlock):
                t = E.block_threads(n)
                if t is not None and threads[0] is None:
                    threads[0] = t
                for b in n.alloc_buffers:
                    if b.scope() in ("shared", "shared.dyn"):
                        try:
                            elems = int(np.prod([int(s) for s in b.shape]))
                        except TypeError:
                            continue
                        sizes[b.name] = elems * tvm_bits(b.dtype) // 8
        walk(body, fn)
        best = [(name, size, 1) for name, size in sizes.items()]
        for _, copies in pipelined_loops(body):
            live = [(name, sizes[name], k) for name, k in copies.items() if name in sizes]
            if sum(size * k for _, size, k in live) > sum(size * k for _, size, k in best):
                best = live
        return threads[0], best

    def rec(n):
        if isinstance(n, tir.For) and int(n.kind) == int(tir.ForKind.THREAD_BINDING) \
                and n.thread_binding is not None and n.thread_binding.thread_tag.startswith("blockIdx"):
            t, bufs = kernel_info(n)
            out.append((t, sum(size * k for _, size, k in bufs), bufs))
            return
        from .analysis import children
        for c in children(n):
            rec(c)
    rec(func.body)
    return out


def tvm_bits(dtype) -> int:
    import tvm
    dt = tvm.DataType(str(dtype))
    return int(dt.bits) * int(dt.lanes)


REGS_PER_THREAD = 255
REGS_PER_SM = 65536


def check_registers(func, name: str, registers) -> None:
    """``registers``: per-thread registers as ptxas reported them (an int, or the dict
    ``inspector.resource_usage(kernel)`` returns: kernel name -> {"registers": n, ...}). Raise
    LimitExceeded when a thread needs more than 255 or the block more than the 64 Ki registers of
    an SM."""
    if registers is None:
        return
    if isinstance(registers, dict):
        regs = [int(v.get("registers", 0)) if isinstance(v, dict) else int(v) for v in registers.values()]
        registers = max(regs) if regs else 0
    registers = int(registers)
    threads = [t for t, _, _ in shared_bytes(func) if t is not None]
    n = max((int(np.prod(t)) for t in threads), default=1)
    if registers > REGS_PER_THREAD:
        raise LimitExceeded(f"{name}: {registers} registers per thread exceeds the {REGS_PER_THREAD} a thread may use")
    if registers * n > REGS_PER_SM:
        raise LimitExceeded(f"{name}: {registers} registers x {n} threads = {registers * n} registers per block, more "
                            f"than the {REGS_PER_SM} of one SM; the launch would fail (fewer threads, or "
                            "T.annotate_min_blocks_per_sm / smaller tiles for fewer registers)")


def check_limits(func, name: str, arch: str | None) -> None:
    """Raise LimitExceeded (one line) when a kernel of ``func`` cannot launch on ``arch``."""
    from .. import archs   # the table alone: importing the runtime here would make a cycle
    try:
        arch = arch or archs.current_arch()
    except Exception:  # noqa: BLE001 (the runtime cannot decide: check threads only)
        arch = None
    info = archs.ARCHS.get(arch) if arch else None
    for k, (threads, total, bufs) in enumerate(shared_bytes(func)):
        nk = f" (T.Kernel #{k + 1})" if k else ""
        if threads is not None:
            n = int(np.prod(threads))
            if n > MAX_THREADS_PER_BLOCK:
                raise LimitExceeded(f"{name}{nk}: threads={n} per block exceeds the CUDA limit of "
                                    f"{MAX_THREADS_PER_BLOCK} threads per block (every NVIDIA GPU); the launch "
                                    "would fail")
        if info is not None and total > info.smem_per_block:
            top = ", ".join(f"{b} {s // 1024} KiB" + (f" x {k} stages" if k > 1 else "")
                            for b, s, k in sorted(bufs, key=lambda t: -t[1] * t[2])[:3])
            raise LimitExceeded(f"{name}{nk}: its shared memory buffers need at least {total} bytes ({total / 1024:.0f} KiB: "
                                f"{top}) per block, more than the {info.smem_per_block} bytes "
                                f"({info.smem_per_block / 1024:.0f} KiB) one block may use on {arch} "
                                f"({info.label}): the launch would fail; use smaller tiles or fewer pipeline stages")
