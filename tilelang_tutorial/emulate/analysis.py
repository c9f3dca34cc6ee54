"""Static analyses of a pre-lowering TileLang PrimFunc, done once before code generation.

* which variables are *thread indices* (``tl.launch_thread_idx``) and which variables / local
  buffers hold values that *differ between the threads* of a block (a fixpoint over the program);
* which statements are *collective* (tile operators, barriers): a thread-index ``if`` around such a
  statement is warp specialisation (roles), around anything else a per-thread mask;
* the deepest ``T.Parallel`` nest of each kernel (the rank of the emulator's vectors);
* source locations (TileLang stamps each statement with a span when ``TILELANG_ENABLE_IR_SPAN`` is
  on, its default) and short statement texts for error messages.
"""
from __future__ import annotations

import linecache
import re

from tvm import tirx as tir

from . import encoding as E

# ----------------------------------------------------------------------------------------------
# text and locations
# ----------------------------------------------------------------------------------------------
_DECL = re.compile(r"^\s*[\w.]+ = T\.(Buffer|int\d+|uint\d+|float\d+|bool|handle|match_buffer|decl_buffer)\b")


def short(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def stmt_text(stmt, n: int = 160) -> str:
    """First line of the TVMScript of ``stmt``, without the buffer/var declarations it prints first."""
    try:
        lines = str(stmt).splitlines()
    except Exception:  # noqa: BLE001
        return type(stmt).__name__
    body = [ln for ln in lines if ln.strip() and not _DECL.match(ln) and not ln.lstrip().startswith("#")]
    return short(body[0].strip() if body else (lines[0] if lines else type(stmt).__name__), n)


def span_of(node):
    """(file, line) of a statement or None."""
    try:
        from tilelang.ir import get_stmt_span
        sp = get_stmt_span(node)
    except Exception:  # noqa: BLE001
        sp = None
    if sp is None or sp.source_name is None:
        return None
    name = sp.source_name.name
    if not name or int(sp.line) <= 0:
        return None
    return (name, int(sp.line))


def func_span(func):
    try:
        from tilelang.ir import get_prim_func_span
        sp = get_prim_func_span(func)
    except Exception:  # noqa: BLE001
        sp = getattr(func, "span", None)
    if sp is None or sp.source_name is None:
        return None
    return (sp.source_name.name, int(sp.line))


def source_line(span) -> str:
    if span is None:
        return ""
    return linecache.getline(span[0], span[1]).strip()


_IPYKERNEL_CELL = re.compile(r"(^|/)ipykernel_\d+/\d+\.py$")


def fmt_span(span) -> str:
    if span is None:
        return ""
    import os
    path = span[0]
    if _IPYKERNEL_CELL.search(path):          # a notebook cell (IPython names it by a hash)
        return f"cell line {span[1]}"
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return f"{path}:{span[1]}"


# ----------------------------------------------------------------------------------------------
# generic walking
# ----------------------------------------------------------------------------------------------
def children(s):
    """Direct sub-statements of a statement."""
    if isinstance(s, tir.SeqStmt):
        return list(s.seq)
    if isinstance(s, tir.SBlockRealize):
        return [s.block]
    if isinstance(s, tir.SBlock):
        return [s.body] + ([s.init] if s.init is not None else [])
    if isinstance(s, (tir.For, tir.While, tir.AttrStmt)):
        return [s.body]
    if isinstance(s, tir.IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    return []


def walk(s, fn):
    fn(s)
    for c in children(s):
        walk(c, fn)


def is_collective(s) -> bool:
    """A statement every thread of a (sub)block executes together: tile op, barrier, sync."""
    if isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call):
        name = E.op_name(s.value)
        return name in E.TILE_OPS or name in E.BARRIER_OPS or name.startswith("tl.tileop.")
    return False


def contains(s, pred) -> bool:
    found = [False]

    def fn(n):
        if not found[0] and pred(n):
            found[0] = True
    walk(s, fn)
    return found[0]


def is_thread_binding_loop(s) -> bool:
    return isinstance(s, tir.For) and int(s.kind) == int(tir.ForKind.THREAD_BINDING)


def max_parallel_depth(s) -> int:
    best = 0

    def rec(n, d):
        nonlocal best
        if isinstance(n, tir.For) and int(n.kind) == int(tir.ForKind.PARALLEL):
            d += 1
            best = max(best, d)
        for c in children(n):
            rec(c, d)
    rec(s, 0)
    return best


def expr_uses(e, pred) -> bool:
    found = [False]

    def fn(n):
        if not found[0] and pred(n):
            found[0] = True
    tir.stmt_functor.post_order_visit(tir.Evaluate(e) if isinstance(e, tir.PrimExpr) else e, fn)
    return found[0]


# calls whose value differs between threads
THREAD_VARYING_CALLS = frozenset({"tl.get_lane_idx", "tl.get_warp_idx", "tl.get_warp_idx_sync",
                                  "tl.get_warp_group_idx", "tl.tl_shuffle_elect", "tl.shfl_xor_sync",
                                  "tl.shfl_down_sync", "tl.shfl_up_sync", "tl.shfl_sync"})


class ThreadAnalysis:
    """Thread indices, thread-varying variables and per-thread local buffers of a PrimFunc.

    A local (``local`` / ``local.var``) buffer gets one copy per thread when some store into it
    has a thread-varying value or index, happens under a thread-varying mask, or happens in more
    than one warp-specialised role; otherwise one copy serves the block (all threads hold the same
    value, which is what the GPU's per-thread registers hold too).
    """

    def __init__(self, func: tir.PrimFunc):
        self.thread_vars: dict = {}          # Var -> axis (0 = x, 1 = y, 2 = z)
        self.tv_vars: set = set()            # Vars whose value differs between threads
        self.pt_bufs: set = set()            # data Vars of per-thread local buffers
        walk(func.body, self._find_thread_vars)
        self._store_roles: dict = {}
        changed = True
        while changed:
            changed = False
            self._store_roles = {}
            before = (len(self.tv_vars), len(self.pt_bufs))
            self._visit(func.body, masked=False, role=())
            for data, roles in self._store_roles.items():
                if len(roles) > 1 and data not in self.pt_bufs:
                    self.pt_bufs.add(data)
            changed = (len(self.tv_vars), len(self.pt_bufs)) != before

    def _find_thread_vars(self, s):
        if isinstance(s, tir.Bind) and isinstance(s.value, tir.Call) and E.op_name(s.value) == E.LAUNCH_THREAD_IDX:
            self.thread_vars[s.var] = E.int_value(s.value.args[0], "tl.launch_thread_idx axis")

    def varies(self, e) -> bool:
        """Does the expression's value differ between the threads of a block?"""
        def pred(n):
            if isinstance(n, tir.Var):
                return n in self.thread_vars or n in self.tv_vars
            if isinstance(n, tir.BufferLoad):
                return n.buffer.data in self.pt_bufs
            if isinstance(n, tir.Call) and isinstance(n.op, E.Op):
                name = n.op.name
                if name in THREAD_VARYING_CALLS:
                    return True
                if name in ("tl.any_sync", "tl.all_sync"):
                    return False       # decided by their argument (visited as a child)
            return False
        return expr_uses(e, pred)

    def _visit(self, s, masked: bool, role: tuple):
        if isinstance(s, tir.Bind):
            if s.var not in self.thread_vars and s.var not in self.tv_vars and self.varies(s.value):
                self.tv_vars.add(s.var)
            return
        if isinstance(s, tir.BufferStore):
            if s.buffer.scope() in E.LOCAL_SCOPES:
                data = s.buffer.data
                self._store_roles.setdefault(data, set()).add(role)
                if data not in self.pt_bufs and (masked or self.varies(s.value)
                                                 or any(self.varies(i) for i in s.indices)):
                    self.pt_bufs.add(data)
            return
        if isinstance(s, tir.IfThenElse) and self.varies(s.condition):
            if contains(s, is_collective):     # warp specialisation: roles
                self._visit(s.then_case, masked, role + (("then", id(s)),))
                if s.else_case is not None:
                    self._visit(s.else_case, masked, role + (("else", id(s)),))
            else:
                self._visit(s.then_case, True, role)
                if s.else_case is not None:
                    self._visit(s.else_case, True, role)
            return
        for c in children(s):
            self._visit(c, masked, role)
