"""The first code cell of every notebook, right after its title: install the tutorial where it is
not importable.

On a machine set up with ``./tutorial setup`` (or conda, or ``pip install -e .``) the package is
importable and the cell does nothing. In a hosted notebook (Colab, Kaggle), or any kernel that
lacks it, the cell finds the checkout (the notebook's folder or one above it, or a clone named
``tilelang-tutorial`` in the working folder or the home folder), ``pip install -e`` s it, and makes
it importable in the kernel already running (an editable install is otherwise seen only by
kernels started after it).

The reader meets the lesson first: the cell is collapsed to its one-line title (:data:`MARKER`;
:data:`CELL_METADATA` hides its source in JupyterLab and shows it as a form in Colab).
The cell's text is :data:`CELL_SOURCE`; :func:`insert` puts it (or brings it up to date) as the
first code cell of notebooks, :func:`check` says which notebooks lack it::

    python -m tilelang_tutorial.setup_cell notebooks/*.ipynb          # insert / update
    python -m tilelang_tutorial.setup_cell --check notebooks/*.ipynb  # exit 1 if one lacks it

Nothing else is imported here: the module runs before the package's dependencies may exist.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

#: The first line of the cell: the one line a reader sees (Colab shows a ``#@title`` as the title of
#: a collapsed form; elsewhere it is a comment).
MARKER = "#@title Set-up: installs this tutorial on Colab or Kaggle; elsewhere it does nothing"

#: The cell, exactly as every notebook carries it.
CELL_SOURCE = MARKER + '''
import importlib, importlib.util, pathlib, subprocess, sys
if importlib.util.find_spec("tilelang_tutorial") is None:
    here = pathlib.Path.cwd().resolve()
    root = next((p for p in [here, *here.parents, here / "tilelang-tutorial", pathlib.Path.home() / "tilelang-tutorial"]
                 if (p / "pyproject.toml").is_file() and (p / "tilelang_tutorial").is_dir()), None)
    if root is None:
        raise RuntimeError(f"no checkout of the tutorial in or above {here}: clone it as tilelang-tutorial there")
    print(f"installing the tutorial from {root} (pip install -e; TileLang and its dependencies) ...")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(root)], check=True)
    sys.path.insert(0, str(root))  # this kernel started before the install: importable now
    importlib.invalidate_caches()'''

#: The cell's metadata: its source hidden in JupyterLab and Jupyter Notebook 7, a form showing
#: only :data:`MARKER` in Colab.
CELL_METADATA = {"jupyter": {"source_hidden": True}, "cellView": "form"}

CELL_ID = "setup-cell"


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_setup_cell(cell: dict) -> bool:
    """The set-up cell, this version or an older one (by its id or its first line)."""
    return cell.get("cell_type") == "code" and (cell.get("id") == CELL_ID or _source(cell).startswith(MARKER))


def _new_cell() -> dict:
    lines = CELL_SOURCE.splitlines(keepends=True)
    return {"cell_type": "code", "execution_count": None, "id": CELL_ID, "metadata": dict(CELL_METADATA),
            "outputs": [], "source": lines}


def _first_code_index(cells: list) -> int:
    return next((i for i, c in enumerate(cells) if c.get("cell_type") == "code"), len(cells))


def problem(path: Path) -> str | None:
    """``None`` where the notebook's first code cell is exactly the set-up cell, else why not."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    i = _first_code_index(cells)
    if i == len(cells):
        return f"{Path(path).name}: no code cell"
    if not is_setup_cell(cells[i]):
        return f"{Path(path).name}: the first code cell is not the set-up cell"
    if _source(cells[i]) != CELL_SOURCE:
        return f"{Path(path).name}: the set-up cell differs from tilelang_tutorial.setup_cell.CELL_SOURCE"
    if cells[i].get("metadata") != CELL_METADATA:
        return f"{Path(path).name}: the set-up cell's source is not hidden (metadata {CELL_METADATA})"
    if i != 1 or cells[0].get("cell_type") != "markdown":
        return f"{Path(path).name}: the set-up cell does not come right after the title cell"
    if cells[i].get("outputs") or cells[i].get("execution_count") is not None:
        return f"{Path(path).name}: the set-up cell carries outputs"
    if sum(is_setup_cell(c) for c in cells) != 1:
        return f"{Path(path).name}: more than one set-up cell"
    return None


def check(paths) -> list[str]:
    """One line per notebook that does not start (first code cell) with the set-up cell."""
    return [p for p in (problem(Path(path)) for path in paths) if p]


def insert(paths) -> list[str]:
    """Make the set-up cell the first code cell of each notebook, right after its title cell (an
    older copy anywhere is removed first). Returns the names changed; a notebook already right is
    not rewritten."""
    changed = []
    for path in map(Path, paths):
        if problem(path) is None:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = [c for c in nb["cells"] if not is_setup_cell(c)]
        ids = {c.get("id") for c in cells}
        cell = _new_cell()
        if cell["id"] in ids:  # pragma: no cover - an unrelated cell took the id
            cell["id"] = next(f"{CELL_ID}-{k}" for k in range(1, 1000) if f"{CELL_ID}-{k}" not in ids)
        title = 1 if cells and cells[0].get("cell_type") == "markdown" else 0
        cells.insert(title, cell)
        nb["cells"] = cells
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        changed.append(path.name)
    return changed


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    only_check = "--check" in args
    paths = [a for a in args if a != "--check"] or sorted(str(p) for p in Path("notebooks").glob("*.ipynb"))
    if only_check:
        problems = check(paths)
        print("\n".join(problems) if problems else f"every notebook ({len(paths)}) starts with the set-up cell")
        return 1 if problems else 0
    changed = insert(paths)
    print("set-up cell inserted/updated in: " + ", ".join(changed) if changed
          else f"every notebook ({len(paths)}) already starts with the set-up cell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
