"""The reader's kernel flows: a bug typed into a notebook's kernel cell is reported by every later
check of that kernel, never hidden by a cell that quietly uses the package's copy.

For each :class:`~tilelang_tutorial.lessons.FlowBug` a lesson declares, a copy of its notebook is
edited and executed (in this machine's mode: the emulator without a GPU) in a fresh kernel: every
code cell from the edited kernel cell up to the bug's ``until`` heading (its scope), and, before
the kernel cell, only the cells that define a name the scope reads (directly or through another
such cell) and the set-up cell. Every code cell in the scope after the kernel cell is then read:
none may pass (a ✔, OK or PASSED with no ✘, FAIL or error beside it), at least one must fail. A
cell that must use the package's copy of a kernel says so on its first line and is not read.
"""
from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import full_only
from tilelang_tutorial import kernel_cells, lessons

ROOT = Path(__file__).resolve().parent.parent
PASS = re.compile(r"✔|\bOK\b|\bPASSED\b")
FAIL = re.compile(r"✘|\bFAIL(ED)?\b|Error\b")
#: what torch prints for a CUDA error, after which the process cannot use the GPU again
CUDA_ERROR = re.compile(r"CUDA error|cudaError|illegal memory access")
PACKAGE_COPY = re.compile(r"^#.*package's copy", re.IGNORECASE)

ALL_BUGS = sorted((bug for lesson in lessons.all_lessons() for bug in lesson.flow_bugs()), key=lambda bug: bug.notebook)


def ci_sample(bugs):
    """CI (``CI=true``: two cores, a budget of minutes) runs the first bug of every kernel cell, so
    every editable kernel cell is still followed to its last check; the others are marked ``full``
    (``./tutorial test --full``, and every run outside CI, runs them all)."""
    seen, kept = set(), []
    for bug in bugs:
        if (bug.notebook, bug.cell) not in seen:
            seen.add((bug.notebook, bug.cell))
            kept.append(bug)
    return kept


CI_BUGS = ci_sample(ALL_BUGS)


def _src(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
        else:
            data = out.get("data", {})
            parts.append(data.get("text/plain", "") if "text/html" not in data else re.sub(r"<[^>]+>", " ", data["text/html"]))
    return "".join(p if isinstance(p, str) else "".join(p) for p in parts)


def inject(bug) -> tuple[dict, int, int]:
    """The edited notebook, the index of the edited kernel cell and of the end of the bug's scope."""
    path = ROOT / "notebooks" / bug.notebook
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in kernel_cells.kernel_cells(path) if bug.cell in c.names]
    assert len(cells) == 1, f"{bug.notebook}: {len(cells)} kernel cells name {bug.cell!r}"
    index = cells[0].index
    source = _src(nb["cells"][index])
    assert source.count(bug.old) == 1, f"{bug.notebook} cell {index}: {bug.old!r} occurs {source.count(bug.old)} times"
    nb["cells"][index]["source"] = source.replace(bug.old, bug.new)
    end = next((i for i, c in enumerate(nb["cells"]) if i > index and c["cell_type"] == "markdown"
                and _src(c).lstrip().startswith(bug.until)), len(nb["cells"]))
    return nb, index, end


# ------------------------------------------------------------------------------------------------
# Which cells before the kernel cell the scope needs: the names each code cell binds at its top
# level, and the names it reads before binding them itself (a function body reads globals when it
# is called, so a global read there counts, whatever the cell binds later).
# ------------------------------------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _stored(nodes) -> set:
    """The names ``nodes`` bind in their own scope (not inside a nested function or comprehension)."""
    out, todo = set(), list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        if isinstance(node, _SCOPES):
            out.add(getattr(node, "name", None))
            todo.extend(getattr(node, "decorator_list", []))
        elif not isinstance(node, _COMPREHENSIONS):
            todo.extend(ast.iter_child_nodes(node))
    return out - {None}


def _free(node, local: set) -> set:
    """The names ``node`` reads that are not in ``local`` (nor local to a function or comprehension in it)."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) and node.id not in local else set()
    if isinstance(node, _SCOPES):
        out = set()
        for outer in [*getattr(node, "decorator_list", []), *getattr(node, "bases", [])]:
            out |= _free(outer, local)
        args, body = getattr(node, "args", None), node.body if isinstance(node.body, list) else [node.body]
        params = set()
        if args is not None:
            params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
            for default in [*args.defaults, *args.kw_defaults]:
                out |= _free(default, local) if default is not None else set()
        inner = local | params | _stored(body)
        for statement in body:
            out |= _free(statement, inner)
        return out
    if isinstance(node, _COMPREHENSIONS):
        inner = local | _stored([g.target for g in node.generators])
        return set().union(*(_free(child, inner) for child in ast.iter_child_nodes(node)))
    out = set().union(*(_free(child, local) for child in ast.iter_child_nodes(node)))
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id not in local:
        out.add(node.target.id)
    return out


def _mutated(statement) -> set:
    """``x[k] = v``, ``x.a = v``: the statement changes x, so it binds x too."""
    out = set()
    for node in ast.walk(statement):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
    return out


def _walk_cell(statements, bound: set, reads: set) -> None:
    """Top-level statements in order: what each reads before the cell has bound it, then what it binds."""
    for s in statements:
        if isinstance(s, (ast.For, ast.AsyncFor)):
            reads |= _free(s.iter, bound)
            bound |= _stored([s.target])
            _walk_cell(s.body + s.orelse, bound, reads)
        elif isinstance(s, (ast.If, ast.While)):
            reads |= _free(s.test, bound)
            _walk_cell(s.body + s.orelse, bound, reads)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                reads |= _free(item.context_expr, bound)
                bound |= _stored([item.optional_vars] if item.optional_vars else [])
            _walk_cell(s.body, bound, reads)
        elif isinstance(s, ast.Try):
            _walk_cell(s.body, bound, reads)
            for handler in s.handlers:
                reads |= _free(handler.type, bound) if handler.type else set()
                bound |= {handler.name} if handler.name else set()
                _walk_cell(handler.body, bound, reads)
            _walk_cell(s.orelse + s.finalbody, bound, reads)
        else:
            reads |= _free(s, bound)
            bound |= _stored([s]) | _mutated(s)


@lru_cache(maxsize=None)
def _names(source: str) -> tuple[frozenset, frozenset, bool]:
    """What a cell binds, what it reads before binding it, and whether it star-imports."""
    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    bound, reads = set(), set()
    _walk_cell(tree.body, bound, reads)
    star = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
    return frozenset(bound), frozenset(reads), star


def cells_to_run(nb: dict, index: int, end: int) -> list[int]:
    """The code cells a bug's run executes, in order: the scope ``[index, end)``, the set-up cell,
    and before the kernel cell the last cell binding each name that a cell already chosen reads."""
    code = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    names = {i: _names(_src(nb["cells"][i])) for i in code if i < end}
    chosen = {i for i in code if index <= i < end} | {code[0]}
    chosen |= {i for i in code if i < index and names[i][2]}          # a star import binds unknown names
    todo = sorted(chosen)
    while todo:
        user = todo.pop()
        for name in names[user][1]:
            definer = next((i for i in reversed(code) if i < min(user, index) and name in names[i][0]), None)
            if definer is not None and definer not in chosen:
                chosen.add(definer)
                todo.append(definer)
    return sorted(chosen)


def _id(bug) -> str:
    return f"{bug.cell}:{bug.what or bug.new[:30]}"


@pytest.fixture(scope="class")
def kernel():
    """``kernel(notebook)`` -> a NotebookClient on a running kernel whose namespace is empty.

    One kernel serves a notebook's bugs one after another: its imports stay loaded, ``%reset -f``
    empties the namespace before each bug. A run that fails shuts it down; the next starts another."""
    from tilelang_tutorial.notebook_runs import notebook_client

    live = {}

    def close():
        if live:
            live.pop("context").__exit__(None, None, None)
            live.clear()

    def get(notebook):
        if not live:
            client = notebook_client(notebook, timeout=1200, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
            context = client.setup_kernel()
            context.__enter__()
            live.update(client=client, context=context)
        client = live["client"]
        client.nb = notebook
        client.wait_for_reply(client.kc.execute("get_ipython().run_line_magic('reset', '-f')", store_history=False))
        return client

    get.close = close
    yield get
    close()


def check_flow(bug, kernel):
    import nbformat

    nb, index, end = inject(bug)
    run = cells_to_run(nb, index, end)
    notebook = nbformat.reads(json.dumps(nb), as_version=4)   # joins list-of-lines sources, as nbformat.read does
    client = kernel(notebook)
    try:
        for i in run:
            client.execute_cell(notebook.cells[i], i)
    except BaseException:
        kernel.close()
        raise
    if any(CUDA_ERROR.search(_text(notebook.cells[i])) for i in run):
        # a bug that faulted on the GPU leaves the process's CUDA context unusable: every later
        # CUDA call fails, so the next bug gets a fresh kernel (as a reader would restart theirs)
        kernel.close()
    errors = {i: [o["ename"] for o in notebook.cells[i].get("outputs", []) if o.get("output_type") == "error"] for i in run}
    broken = [f"cell {i}: {_text(notebook.cells[i]).strip()[-300:]}" for i in run if i < index and errors[i]]
    assert not broken, f"{bug.notebook}: a cell before the kernel cell fails, bug or no bug:\n" + "\n".join(broken)
    # a NameError is the bug's doing when the cell binding the name ran and failed; where that cell
    # was left out, the choice of cells is wrong
    code = [k for k, c in enumerate(notebook.cells) if c.cell_type == "code"]
    unbound = []
    for i in run:
        for out in notebook.cells[i].get("outputs", []):
            name = re.search(r"name '(\w+)' is not defined", out.get("evalue", "")) if out.get("ename") == "NameError" else None
            if name and any(k not in run and name.group(1) in _names(_src(notebook.cells[k]))[0] for k in code if k < i):
                unbound.append(f"cell {i}: {out['evalue']}")
    assert not unbound, (f"{bug.notebook}: the run left out a cell that binds a name a later cell reads "
                         f"(cells run: {run}):\n" + "\n".join(unbound))
    passed, reported = [], []
    for i in range(index + 1, end):
        cell = notebook.cells[i]
        if cell.cell_type != "code" or PACKAGE_COPY.match(_src(cell).lstrip()):
            continue
        text = _text(cell)
        if FAIL.search(text):          # a failing verdict, even beside the ✔ of the steps that passed
            reported.append(i)
        elif PASS.search(text):
            passed.append(f"cell {i}: {PASS.search(text).group(0)!r} in {text.strip()[:200]!r}")
    assert not passed, (f"{bug.notebook}: after {bug.what or bug.new!r} in the kernel cell ({index}), later cells "
                        "still pass (they do not use the reader's kernel, or do not say they use the package's copy):\n"
                        + "\n".join(passed))
    assert reported, f"{bug.notebook}: no cell after the kernel cell ({index}) reported {bug.what or bug.new!r}"


# One parametrised test, its bugs in one class per notebook: pytest-xdist (--dist loadscope) gives
# each class to one worker, which runs that notebook's bugs on one kernel.
for _notebook in sorted({bug.notebook for bug in ALL_BUGS}):
    _bugs = [pytest.param(bug, id=_id(bug), marks=() if any(bug is b for b in CI_BUGS) else full_only)
             for bug in ALL_BUGS if bug.notebook == _notebook]

    @pytest.mark.parametrize("bug", _bugs)
    def test_a_bug_in_the_kernel_cell_reaches_every_later_check(self, bug, kernel):
        check_flow(bug, kernel)

    _name = f"TestNotebook{_notebook.split('_')[0]}"
    globals()[_name] = type(_name, (), {"__doc__": f"The flow bugs of {_notebook}.",
                                        "test_a_bug_in_the_kernel_cell_reaches_every_later_check":
                                        test_a_bug_in_the_kernel_cell_reaches_every_later_check})
del test_a_bug_in_the_kernel_cell_reaches_every_later_check


def test_the_ci_sample_keeps_every_kernel_cell():
    assert {(b.notebook, b.cell) for b in ci_sample(ALL_BUGS)} == {(b.notebook, b.cell) for b in ALL_BUGS}


def test_every_notebook_has_a_flow_bug():
    covered = {bug.notebook for bug in ALL_BUGS}
    missing = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.name not in covered]
    assert not missing, f"no FlowBug (the lesson's flow_bugs()) for: {missing}"


def test_a_run_keeps_the_cells_its_scope_reads_and_leaves_out_the_rest():
    """The choice of cells: a name read in the scope brings the last cell before the kernel cell that
    binds it, and that cell's own reads; an unrelated cell, and an earlier binding overwritten by a
    later one, stay out; the set-up cell always runs."""
    cell = lambda kind, src: {"cell_type": kind, "source": src}   # noqa: E731
    nb = {"cells": [
        cell("code", "import os"),                               # 0 set-up
        cell("code", "import torch\nsize = 3"),                  # 1 bound again by 3
        cell("code", "plot = torch.zeros(10)\nprint(plot)"),     # 2 nobody reads `plot`
        cell("code", "size = 4\nshape = (size, size)"),          # 3
        cell("code", "def helper(x):\n    return torch.ones(shape) * x"),  # 4 reads torch, shape
        cell("code", "table = {}\ntable['k'] = 1"),              # 5 nobody reads `table`
        cell("code", "def kernel(x):\n    return helper(x)"),    # 6 the kernel cell
        cell("code", "%time y = kernel(2)\nprint(y)"),           # 7 a magic
        cell("markdown", "## Next"),
        cell("code", "print(table)"),                            # 9 out of scope
    ]}
    assert cells_to_run(nb, 6, 8) == [0, 1, 3, 4, 6, 7]
