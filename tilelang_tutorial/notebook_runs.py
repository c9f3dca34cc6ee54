"""Running the notebooks headless: for ``warm-cache`` (compile what they compile) and ``render``
(executed copies with their outputs, committed as HTML pages under ``docs/rendered/`` for readers
browsing the repository; HTML because committed notebooks carry no outputs).

A rendered copy keeps every source cell of its notebook unchanged and adds the outputs of one run
(on the GPU runner: real measurements). Widget views are replaced by their static fallback (the
HTML/text every widget here also provides), since a static page cannot run them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
RENDERED_DIR = REPO_ROOT / "docs" / "rendered"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def notebooks(names=()) -> list[Path]:
    paths = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    if names:
        paths = [p for p in paths if any(p.name.startswith(n) or p.stem == n for n in names)]
    return paths


def _run(path: Path, timeout: int = 1800):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env_backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if env_backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = env_backend
    return nb


def execute(path: Path) -> str | None:
    """Run a notebook top to bottom; None on success, else the first error in one line."""
    try:
        _run(path)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
    return None


def static_outputs(nb) -> None:
    """Replace widget views by their HTML/text fallback and drop widget state (in place)."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data and WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
    nb.metadata.pop("widgets", None)


#: The line a rendered page carries to say which notebook source it was rendered from.
SOURCE_MARK = "tilelang-tutorial rendered from source cells sha256:"


def source_digest(cells) -> str:
    """sha256 of a notebook's (cell type, source) list: what a rendered page must share with it."""
    import hashlib

    return hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()


def write_html(nb, path: Path, notebook: Path) -> Path:
    """The executed notebook as one static HTML page (outputs, figures inline), stamped with the
    digest of its notebook's source cells. HTML, not .ipynb: committed notebooks carry no outputs."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nb)
    stamp = f"<!-- {SOURCE_MARK} {source_digest(source_cells(notebook))} -->\n"
    path.write_text(stamp + body, encoding="utf-8")
    return path


def rendered_digest(page: Path) -> str | None:
    """The source digest a rendered page was stamped with (None when it has none)."""
    first = page.read_text(encoding="utf-8").split("\n", 1)[0]
    return first.split(SOURCE_MARK, 1)[1].strip(" ->") if SOURCE_MARK in first else None


def rendered_page(notebook: Path) -> Path:
    return RENDERED_DIR / (notebook.stem + ".html")


def render(names=()) -> int:
    """Execute notebooks and write each executed copy as ``docs/rendered/<name>.html``."""
    import time

    RENDERED_DIR.mkdir(parents=True, exist_ok=True)
    failures = 0
    for path in notebooks(names):
        t0 = time.time()
        try:
            nb = _run(path)
        except Exception as exc:
            failures += 1
            print(f"[FAIL] {path.name}: {type(exc).__name__}: {str(exc)[-400:]}", flush=True)
            continue
        static_outputs(nb)
        out = write_html(nb, rendered_page(path), path)
        print(f"[ok  ] {path.name} -> {out.relative_to(REPO_ROOT)} in {time.time() - t0:.0f} s "
              f"({out.stat().st_size // 1024} KiB)", flush=True)
    return 1 if failures else 0


def source_cells(path: Path) -> list[tuple[str, str]]:
    """(cell type, source) of every cell: what a rendered copy must share with its notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [[c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]]
            for c in nb["cells"]]
