"""The reader's kernel flows: a bug typed into a notebook's kernel cell is reported by every later
check of that kernel, never hidden by a cell that quietly uses the package's copy.

For each :class:`~tilelang_tutorial.lessons.FlowBug` a lesson declares, a copy of its notebook is
edited, executed (in this machine's mode: the emulator without a GPU) up to the bug's ``until``
heading, and every code cell after the edited kernel cell is read: no passing verdict, and at least
one failing one.

This module is the machinery; each notebook has a ``test_reader_flow_<number>.py`` that runs its
bugs, so pytest-xdist (``--dist loadfile``) spreads the notebooks' flow tests over its workers.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tilelang_tutorial import kernel_cells, lessons

ROOT = Path(__file__).resolve().parent.parent
PASS = re.compile(r"✔|\bOK\b|\bPASSED\b")
FAIL = re.compile(r"✘|\bFAIL(ED)?\b|Error\b")
PACKAGE_COPY = re.compile(r"^#.*package's copy", re.IGNORECASE)

BUGS = [(lesson.__name__.rsplit(".", 1)[-1], bug) for lesson in lessons.all_lessons()
        for bug in (lesson.flow_bugs() if hasattr(lesson, "flow_bugs") else ())]


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


def bugs_of(notebook: str) -> list:
    return [bug for _, bug in BUGS if bug.notebook == notebook]


def flow_test(notebook: str):
    """The flow test of one notebook: every FlowBug its lesson declares for it."""
    bugs = bugs_of(notebook)

    @pytest.mark.parametrize("bug", bugs, ids=[f"{b.cell}:{b.what or b.new[:30]}" for b in bugs])
    def test_a_bug_in_the_kernel_cell_reaches_every_later_check(bug, tmp_path):
        check_flow(bug)

    return test_a_bug_in_the_kernel_cell_reaches_every_later_check


def check_flow(bug):
    import nbformat
    from nbclient import NotebookClient

    nb, index, end = inject(bug)
    nb["cells"] = nb["cells"][:end]
    notebook = nbformat.reads(json.dumps(nb), as_version=4)   # joins list-of-lines sources, as nbformat.read does
    NotebookClient(notebook, timeout=1200, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    passed, reported = [], []
    for i, cell in enumerate(notebook.cells[index + 1:], start=index + 1):
        if cell.cell_type != "code" or PACKAGE_COPY.match(_src(cell).lstrip()):
            continue
        text = _text(cell)
        if PASS.search(text):
            passed.append(f"cell {i}: {PASS.search(text).group(0)!r} in {text.strip()[:200]!r}")
        if FAIL.search(text):
            reported.append(i)
    assert not passed, (f"{bug.notebook}: after {bug.what or bug.new!r} in the kernel cell ({index}), later cells "
                        "still pass (they do not use the reader's kernel, or do not say they use the package's copy):\n"
                        + "\n".join(passed))
    assert reported, f"{bug.notebook}: no cell after the kernel cell ({index}) reported {bug.what or bug.new!r}"


def flow_test_file(notebook: str) -> Path:
    return ROOT / "tests" / f"test_reader_flow_{notebook.split('_')[0]}.py"
