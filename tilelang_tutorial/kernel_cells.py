"""One source for every kernel a notebook teaches: the package module, copied into a notebook cell.

A notebook defines the kernels it teaches in code cells the reader can read, edit and re-run.
Tests, benchmarks and later notebooks import the same kernels from the package. A *kernel cell*
starts with a marker line naming the module and the top-level definitions it holds::

    # Kernel cell: tilelang_tutorial/lessons/<lesson>/<module>.py (<names>) — a test keeps them equal.

and the rest of the cell is exactly those definitions' source, in that order, separated by two
blank lines. :func:`check` compares every kernel cell of the committed notebooks with the package
and names both places when they differ; :func:`sync` copies the package's version into the cells
(``python -m tilelang_tutorial sync-kernels``). The package module is the source: edit it, then
sync. Nothing is imported: definitions are read from the files with ``ast``.
"""
from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO_ROOT / "notebooks"
MARKER = re.compile(r"^# Kernel cell: (?P<path>tilelang_tutorial/[\w/]+\.py) \((?P<names>[\w, ]+)\)")


@dataclass
class KernelCell:
    notebook: Path
    index: int               # cell index in the notebook
    module: str              # repo-relative path of the package module
    names: list[str]         # top-level definitions, in order
    marker: str              # the marker line as written
    body: str                # the cell's code after the marker line

    @property
    def where(self) -> str:
        return f"{self.notebook.relative_to(REPO_ROOT)} cell {self.index}"


def definitions(module: str, names: list[str]) -> str:
    """The source of the top-level definitions ``names`` of ``module`` (decorators included),
    separated by two blank lines."""
    path = REPO_ROOT / module
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    found = {}
    for node in ast.parse(src).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            targets = [node.name]
        elif isinstance(node, ast.Assign):   # NAME = ... and A, B = ...
            targets = [n.id for t in node.targets for n in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", []))
                       if isinstance(n, ast.Name)]
        else:
            targets = []
        for name in targets:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
            found[name] = "\n".join(lines[start:node.end_lineno])
    missing = [n for n in names if n not in found]
    if missing:
        raise LookupError(f"{module} has no top-level definition named {', '.join(missing)}")
    segments = list(dict.fromkeys(found[n] for n in names))   # A, B = ... named twice: once
    # consecutive constants stay together; anything else is separated by two blank lines
    out = segments[:1]
    for prev, seg in zip(segments, segments[1:]):
        one_line = "\n" not in prev.strip() and "\n" not in seg.strip() and not seg.startswith(("def ", "@", "class "))
        out.append(("\n" if one_line else "\n\n\n") + seg)
    return "".join(out)


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def kernel_cells(notebook: Path, text: str | None = None) -> list[KernelCell]:
    """The kernel cells of a notebook (``text``: its JSON, e.g. as committed; default: the file)."""
    nb = json.loads(text if text is not None else notebook.read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = _source(cell)
        first, _, body = src.partition("\n")
        m = MARKER.match(first)
        if m:
            out.append(KernelCell(notebook, i, m["path"], [n.strip() for n in m["names"].split(",")],
                                  first, body))
    return out


def difference(cell: KernelCell) -> str | None:
    """None when the cell equals the package; otherwise a message naming both places, with a diff."""
    want = definitions(cell.module, cell.names)
    have = cell.body.strip("\n")
    if have.rstrip() == want.rstrip():
        return None
    diff = "\n".join(difflib.unified_diff(want.splitlines(), have.splitlines(), fromfile=cell.module,
                                          tofile=cell.where, lineterm="", n=1))
    return (f"the kernel cell {cell.where} differs from {cell.module} ({', '.join(cell.names)}).\n"
            f"The package module is the source: edit it, then run `python -m tilelang_tutorial sync-kernels`.\n"
            + diff)


def sync(notebooks=None) -> list[str]:
    """Copy the package's definitions into every kernel cell; returns the cells that changed."""
    changed = []
    for path in notebooks or sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        dirty = False
        for cell in kernel_cells(path):
            if difference(cell) is None:
                continue
            text = cell.marker + "\n" + definitions(cell.module, cell.names)
            nb["cells"][cell.index]["source"] = text.splitlines(keepends=True)
            dirty = True
            changed.append(cell.where)
        if dirty:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed
