"""Warp-specialised roles, mbarriers, named barriers, and the cooperative scheduler.

A *role* is a set of threads of one block running one branch of a thread-index ``if`` whose
branches contain tile operators or barriers (warp specialisation, e.g. ``if tx < 128: consumer
else: producer``). The generated code of a role is a Python generator: it yields when it must wait
(an mbarrier phase, a ``__syncthreads``/named barrier, or its own sub-roles). The scheduler runs one
role at a time, deterministically: the current role runs until it blocks or ends, then the next
runnable role in creation order (round robin) continues. When every live role waits, no progress
is possible: that is a :class:`~tilelang_tutorial.emulate.errors.Deadlock`, reported with each
role's threads, the line it waits at, the barrier, its phase and arrival count, and the parity it
waits for.
"""
from __future__ import annotations

import numpy as np

from .errors import Deadlock, EmulationError


def describe_threads(tids) -> str:
    t = np.asarray(tids).ravel()
    if t.size == 0:
        return "no threads"
    if t.size == 1:
        return f"thread {int(t[0])}"
    if int(t[-1]) - int(t[0]) + 1 == t.size and np.all(np.diff(t) == 1):
        return f"threads {int(t[0])}-{int(t[-1])}"
    shown = ", ".join(str(int(v)) for v in t[:6])
    return f"{t.size} threads {{{shown}{', ...' if t.size > 6 else ''}}}"


# ----------------------------------------------------------------------------------------------
# barriers
# ----------------------------------------------------------------------------------------------
class MBarrier:
    """An mbarrier: ``count`` arrivals complete a phase; ``phase`` counts completed phases.

    ``barrier_wait(bar, parity)`` passes once the phase with that parity has completed, i.e. while
    the current (incomplete) phase has the other parity -- the hardware's ``try_wait.parity``.
    More arrivals than ``count`` in one phase roll over into the next phase (each thread's arrive
    is one decrement of the pending count, as on the GPU).
    """

    __slots__ = ("name", "count", "pending", "phase", "arrivals")

    def __init__(self, name: str, count: int):
        self.name = name
        self.count = int(count)
        self.pending = int(count)
        self.phase = 0
        self.arrivals = 0

    def arrive(self, n: int) -> None:
        if self.count <= 0:
            raise EmulationError(f"mbarrier {self.name} was initialised with arrival count {self.count}")
        self.arrivals += n
        self.pending -= n
        while self.pending <= 0:
            self.phase += 1
            self.pending += self.count

    def done(self, parity) -> bool:
        return (self.phase & 1) != (int(parity) & 1)

    def state(self) -> str:
        return (f"in phase {self.phase} (parity {self.phase & 1}), {self.count - self.pending} of "
                f"{self.count} arrivals")

    def __repr__(self) -> str:
        return f"<mbarrier {self.name} {self.state()}>"


class NamedBarrier:
    """``bar.sync id, count`` / ``bar.arrive`` (``__syncthreads()`` is id 0 with every thread)."""

    __slots__ = ("id", "expected", "arrived", "generation", "arrived_roles")

    def __init__(self, bid: int):
        self.id = bid
        self.expected = None
        self.arrived = 0
        self.generation = 0
        self.arrived_roles: list[str] = []

    def arrive(self, n: int, count: int, who: str) -> int:
        """Arrive with ``n`` threads; returns the generation the arrivals belong to."""
        if self.expected is None or self.arrived == 0:
            self.expected = int(count)
        elif int(count) != self.expected:
            raise EmulationError(f"named barrier {self.id}: threads arrive with thread count {count}, others "
                                 f"with {self.expected}")
        gen = self.generation
        self.arrived += n
        self.arrived_roles.append(who)
        if self.arrived > self.expected:
            raise EmulationError(f"named barrier {self.id}: {self.arrived} threads arrived, but the barrier "
                                 f"expects {self.expected} ({', '.join(self.arrived_roles)})")
        if self.arrived == self.expected:
            self.generation += 1
            self.arrived = 0
            self.arrived_roles = []
        return gen

    def label(self) -> str:
        return "__syncthreads() (named barrier 0)" if self.id == 0 else f"named barrier {self.id}"


# ----------------------------------------------------------------------------------------------
# what a role yields
# ----------------------------------------------------------------------------------------------
class ParityWait:
    __slots__ = ("bar", "parity")

    def __init__(self, bar: MBarrier, parity: int):
        self.bar, self.parity = bar, int(parity) & 1

    def ready(self) -> bool:
        return self.bar.done(self.parity)

    def describe(self) -> str:
        return (f"waits for mbarrier {self.bar.name} to complete a phase of parity {self.parity}; the barrier is "
                f"{self.bar.state()}")


class MmaWait:
    """The wait a synchronous ``T.gemm(..., mbar=bar)`` performs after its TCGEN5MMA: for the phase
    that the MMA's completion (one arrival) belongs to."""

    __slots__ = ("bar", "phase", "op")

    def __init__(self, bar: MBarrier, phase: int, op: str):
        self.bar, self.phase, self.op = bar, int(phase), op

    def ready(self) -> bool:
        return self.bar.phase > self.phase

    def describe(self) -> str:
        return (f"waits in {self.op}(..., mbar={self.bar.name}) for mbarrier {self.bar.name} to complete phase "
                f"{self.phase}, which its MMA's completion (one arrival) belongs to; the barrier expects "
                f"{self.bar.count} arrivals per phase (an MMA-completion barrier is T.alloc_barrier(1)) and is "
                f"{self.bar.state()}")


class SyncWait:
    __slots__ = ("bar", "generation")

    def __init__(self, bar: NamedBarrier, generation: int):
        self.bar, self.generation = bar, generation

    def ready(self) -> bool:
        return self.bar.generation != self.generation

    def describe(self) -> str:
        b = self.bar
        return f"waits at {b.label()}: {b.arrived} of {b.expected} threads have arrived"


class Split:
    """Request to run ``children`` (``(selection over the parent's threads, generator function,
    name)``) as concurrent roles; the parent resumes when all have finished."""

    __slots__ = ("children",)

    def __init__(self, children):
        self.children = children


class _ChildrenWait:
    __slots__ = ("role",)

    def __init__(self, role):
        self.role = role

    def ready(self) -> bool:
        return self.role.live_children == 0

    def describe(self) -> str:
        return "waits for its sub-roles to finish"


class Role:
    __slots__ = ("name", "tids", "gen", "parent", "waiting", "live_children", "finished")

    def __init__(self, name: str, tids: np.ndarray, gen, parent):
        self.name = name
        self.tids = tids
        self.gen = gen
        self.parent = parent
        self.waiting = None
        self.live_children = 0
        self.finished = False

    def label(self) -> str:
        return f"role [{self.name}] ({describe_threads(self.tids)})"


class Scheduler:
    """Runs the roles of one block to completion (or raises Deadlock)."""

    def __init__(self, stats: dict, locate=None, tracker=None):
        self.stats = stats
        self.tracker = tracker       # checks.RoleTracker (race checks between roles) or None
        self.locate = locate         # frame -> "file:line `stmt`" text, for deadlock reports
        self.roles: list[Role] = []
        self.current: Role | None = None

    def run(self, gen, tids: np.ndarray, block_label: str) -> None:
        root = Role("whole block", tids, gen, None)
        self.roles = [root]
        cur = root
        while True:
            if not cur.finished and (cur.waiting is None or cur.waiting.ready()):
                if self.tracker is not None and isinstance(cur.waiting, ParityWait):
                    self.tracker.waited(cur, cur.waiting.bar, cur.waiting.parity)
                cur.waiting = None
                self._step(cur)
                continue
            if all(r.finished for r in self.roles):
                return
            nxt = self._pick(cur)
            if nxt is None:
                raise self._deadlock(block_label)
            if nxt is not cur:
                self.stats["role_switches"] += 1
            cur = nxt

    def _step(self, role: Role) -> None:
        self.current = role
        try:
            req = role.gen.send(None)
        except StopIteration:
            self._finish(role)
            return
        if isinstance(req, Split):
            idx = self.roles.index(role) + 1
            new = []
            for sel, fn, name in req.children:
                child_tids = role.tids[sel]
                if child_tids.size == 0:
                    continue
                new.append(Role(name, child_tids, fn(), role))
            if self.tracker is not None:
                for r in new:           # their clocks start from the parent's, as of the split
                    self.tracker.clock_of(r)
            role.live_children = len(new)
            self.roles[idx:idx] = new
            self.stats["roles"] += len(new)
            role.waiting = _ChildrenWait(role)
        else:
            role.waiting = req

    def _finish(self, role: Role) -> None:
        role.finished = True
        if self.tracker is not None and role.parent is not None:
            self.tracker.finished(role)
        if role.parent is not None:
            role.parent.live_children -= 1
            self.roles.remove(role)

    def _pick(self, after: Role):
        n = len(self.roles)
        start = self.roles.index(after) if after in self.roles else -1
        for k in range(1, n + 1):
            r = self.roles[(start + k) % n]
            if not r.finished and (r.waiting is None or r.waiting.ready()):
                return r
        return None

    def _deadlock(self, block_label: str) -> Deadlock:
        lines = []
        for r in self.roles:
            if r.finished or r.waiting is None or isinstance(r.waiting, _ChildrenWait):
                continue
            where = ""
            if self.locate is not None and r.gen.gi_frame is not None:
                where = self.locate(r.gen.gi_frame)
            lines.append(f"  {r.label()} {r.waiting.describe()}" + (f"\n      {where}" if where else ""))
        msg = (f"deadlock in {block_label}: every live role waits and none can make progress\n"
               + "\n".join(lines))
        return Deadlock(msg, lines, located=True)
