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
import re
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


#: the longest one wait for a kernel message sleeps before it looks at the socket again (s)
POLL_SLICE_S = 1.0


def polled_in_slices(get_msg):
    """A kernel channel's ``get_msg(timeout)`` that waits in slices of :data:`POLL_SLICE_S`.

    pyzmq's asyncio poll can miss the wake-up of a message that arrives while the client polls its
    other channel (jupyter/nbclient#312): a cell whose widgets send many messages then waits out its
    whole timeout for a reply that has already arrived. Each slice looks at the socket again, so a
    missed wake-up costs at most one slice."""
    from queue import Empty
    from time import monotonic

    async def get(timeout=None):
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - monotonic())
            try:
                return await get_msg(timeout=POLL_SLICE_S if left is None else min(POLL_SLICE_S, left))
            except Empty:
                if left is not None and left <= POLL_SLICE_S:
                    raise
    return get


def notebook_client(nb, **kwargs):
    """``nbclient.NotebookClient(nb, **kwargs)`` whose kernel client reads its shell and IOPub
    channels through :func:`polled_in_slices` (``setup_kernel`` and ``execute`` alike)."""
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient

    class SlicedPollClient(NotebookClient):
        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            for channel in (kc.shell_channel, kc.iopub_channel):
                channel.get_msg = polled_in_slices(channel.get_msg)
            return kc

        start_new_kernel_client = run_sync(async_start_new_kernel_client)

    return SlicedPollClient(nb, **kwargs)


def _run(path: Path, timeout: int = 1800):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    env_backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        notebook_client(nb, timeout=timeout, kernel_name="python3",
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
    path.write_text(_stamp(notebook) + body, encoding="utf-8")
    return path


def _stamp(notebook: Path) -> str:
    """A page's first line: the digest of the notebook's source cells it shows."""
    return f"<!-- {SOURCE_MARK} {source_digest(source_cells(notebook))} -->\n"


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


#: where a cell begins in a page of nbconvert's lab template: the cell's kind and the notebook's id
_CELL_START = re.compile(r'<div class="jp-Cell jp-(Markdown|Code|Raw)Cell[^"]*" id="cell-id=([^"]+)">')
#: a code cell's source as the page shows it (syntax-highlighted); the prompt and outputs excluded
_CODE_SOURCE = re.compile(r'<div class="highlight[^"]*"><pre>.*?</pre>', re.S)


def _code_source(cell_html: str) -> str | None:
    match = _CODE_SOURCE.search(cell_html)
    return match.group(0) if match else None


def _page_cells(page: str) -> tuple[str, list[tuple[str, str, str]], str]:
    """A page split at its cells: (what comes before the first, [(kind, cell id, the cell's HTML)],
    what comes after the last)."""
    starts = list(_CELL_START.finditer(page))
    end = page.rindex("</main>")
    cells = [(m.group(1), m.group(2), page[m.start():(starts[i + 1].start() if i + 1 < len(starts) else end)])
             for i, m in enumerate(starts)]
    return page[:starts[0].start()] if starts else page[:end], cells, page[end:]


def refresh_markdown(names=()) -> int:
    """Bring rendered pages up to date after an edit of their notebooks' markdown cells only,
    without executing anything: each page keeps the outputs of the run that rendered it (on the GPU
    runner, its measurements), and its markdown cells are replaced by the current ones, rendered by
    the same exporter. Refused for a page whose notebook changed anything else (a code cell, the
    cells' order or number): that needs ``render``. Returns the number of pages refused."""
    import nbformat
    from nbconvert import HTMLExporter

    refused = 0
    for path in notebooks(names):
        page_path = rendered_page(path)
        if not page_path.exists():
            print(f"[skip] {path.name}: no rendered page to refresh (run render)", flush=True)
            refused += 1
            continue
        old = page_path.read_text(encoding="utf-8")
        old_body = old.split("\n", 1)[1] if old.startswith("<!--") else old     # without its stamp
        nb = nbformat.read(path, as_version=4)
        # an executed notebook carries its kernel's language_info (code highlighted as ipython3)
        nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3",
                                         "codemirror_mode": {"name": "ipython", "version": 3}}
        fresh_body, _ = HTMLExporter().from_notebook_node(nb)
        head, old_cells, tail = _page_cells(old_body)
        _, new_cells, _ = _page_cells(fresh_body)
        why = None
        if [(k, i) for k, i, _ in old_cells] != [(k, i) for k, i, _ in new_cells]:
            why = "its cells were added, removed or reordered"
        else:
            for (kind, cell_id, seg_old), (_, _, seg_new) in zip(old_cells, new_cells):
                if kind == "Code" and _code_source(seg_old) != _code_source(seg_new):
                    why = f"code cell {cell_id} changed"
                    break
        if why:
            print(f"[FAIL] {path.name}: {why}; outputs would no longer match the code: run render", flush=True)
            refused += 1
            continue
        changed = sum(o[2] != n[2] for o, n in zip(old_cells, new_cells) if o[0] == "Markdown")
        body = head + "".join(n[2] if o[0] == "Markdown" else o[2] for o, n in zip(old_cells, new_cells)) + tail
        page_path.write_text(_stamp(path) + body, encoding="utf-8")
        print(f"[ok  ] {path.name}: {changed} markdown cell(s) refreshed, outputs kept", flush=True)
    return refused


def source_cells(path: Path) -> list[tuple[str, str]]:
    """(cell type, source) of every cell: what a rendered copy must share with its notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [[c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]]
            for c in nb["cells"]]


def prose(name: str) -> str:
    """A notebook's markdown, every run of whitespace one space: what a test finds a sentence in
    when it checks that the prose reads a record or a log."""
    return " ".join(" ".join(src.split()) for kind, src in source_cells(NOTEBOOK_DIR / name) if kind == "markdown")
