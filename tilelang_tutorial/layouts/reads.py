"""The shared-memory reads a kernel's own ``T.Parallel`` loops make, as bank-conflict patterns.

:func:`shared_reads` finds every element-wise store ``frag[i, j] = ... shared[f(i, j)] ...`` into a
register fragment, takes the fragment's inferred layout (which thread holds ``(i, j)`` in which slot
of its local array) and the shared buffer's layout (inferred, annotated, or row-major with the
shape it was allocated with, padding included), and groups the reads the way a warp issues them:
the 32 threads of a warp read their slot ``s`` with one instruction, so each (warp, slot) pair is
one request. That is the generated code for a scalar read loop (``B_tile[s] = A_shared[...]``,
one element per thread per slot); a loop the compiler vectorises reads several slots at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .banks import AccessPattern, bank_conflicts
from .inference import WARP_SIZE, LayoutInfo, _eval_expr, _infer, row_major_info


@dataclass
class SharedRead:
    """One read of a shared buffer into a fragment, and its conflict degree per request."""

    fragment: str
    shared: str
    expression: str           # "B_tile[i, j] = A_shared[j, i]"
    layout: LayoutInfo        # where the shared buffer's elements sit
    pattern: AccessPattern    # one phase per (warp, slot)
    degrees: np.ndarray       # passes each request needs (1 = conflict-free), shaped pattern.grid

    @property
    def worst(self) -> int:
        return int(self.degrees.max())

    def __str__(self) -> str:
        counts = {int(d): int((self.degrees == d).sum()) for d in np.unique(self.degrees)}
        spread = ", ".join(f"{n} need {d}" for d, n in sorted(counts.items()))
        return (f"{self.expression}: {self.degrees.size} warp requests ({spread} pass{'es' if len(counts) > 1 or self.worst > 1 else ''}); "
                f"worst {self.worst}-way")


def _loads_in(expr, shared_names):
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    found = []

    def visit(node):
        if isinstance(node, tirx.BufferLoad) and node.buffer.name in shared_names:
            found.append(node)

    post_order_visit(expr, visit)
    return found


def shared_reads(program, arch: str | None = None) -> list[SharedRead]:
    """Every ``fragment[i, j] = ... shared[...] ...`` store of ``program``'s ``T.Parallel`` loops,
    with the bank conflicts of each warp request (see the module's docstring)."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    infos, _lowered, _launch, allocated = _infer(program, arch, None)
    shared_names = {n for n, b in allocated.items() if str(b.scope()).startswith("shared")}
    stores = []

    def visit(node):
        if (isinstance(node, tirx.BufferStore) and node.buffer.name in infos
                and infos[node.buffer.name].kind == "fragment"
                and all(isinstance(ix, tirx.Var) for ix in node.indices)):
            for load in _loads_in(node.value, shared_names):
                stores.append((node, load))

    post_order_visit(program.body, visit)
    out = []
    for store, load in stores:
        frag = infos[store.buffer.name]
        names = [ix.name for ix in store.indices]
        grids = np.meshgrid(*[np.arange(int(s)) for s in frag.shape], indexing="ij")
        env = dict(zip(names, grids))
        try:
            coords = [np.broadcast_to(_eval_expr(ix, env), tuple(frag.shape)) for ix in load.indices]
        except NotImplementedError:
            continue
        if len(coords) != 2:
            continue
        name = load.buffer.name
        shape = [int(s) for s in allocated[name].shape]
        if name in infos and infos[name].kind == "shared":
            layout = infos[name]
            layout.name = f"{name} {shape}, laid out by inference or annotation"
        else:
            layout = row_major_info(shape[-2:], name=f"{name} {shape}, row-major", dtype=str(allocated[name].dtype))
        owner, register = frag.owner, frag.register
        warp = (owner - frag.thread_offset) // WARP_SIZE
        phases = []
        warps, slots = max(1, frag.threads // WARP_SIZE), int(frag.registers_per_thread)
        for w in range(warps):
            for s in range(slots):
                mask = (warp == w) & (register == s)            # every replica reads too
                rows = np.broadcast_to(coords[0], owner.shape)[mask]
                cols = np.broadcast_to(coords[1], owner.shape)[mask]
                phases.append(np.stack([rows, cols], axis=1).astype(np.int64))
        pattern = AccessPattern(
            name=f"{store.buffer.name} <- {name}", phases=phases, grid=(warps, slots),
            description="one request per warp and slot: a warp's 32 threads read their slot s together",
            row_label="warp", col_label="slot of the thread's local array")
        expression = (f"{store.buffer.name}[{', '.join(names)}] = "
                      f"{name}[{', '.join(str(ix) for ix in load.indices)}]")
        out.append(SharedRead(store.buffer.name, name, expression, layout, pattern, bank_conflicts(layout, pattern)))
    return out
