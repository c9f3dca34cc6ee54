"""Notebooks and lessons: one lesson folder per notebook, committed without outputs, the kernels
they teach on the page and equal to the package, and rendered copies that match their sources."""
import json
import subprocess
from pathlib import Path

import pytest

from tilelang_tutorial import kernel_cells, lessons, notebook_runs

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def committed(path: Path) -> str:
    """The notebook as committed (what CI and a clean clone see), so a reader's saved outputs or
    edits in their working copy do not fail the tests; the file itself outside a git checkout."""
    rel = path.relative_to(ROOT).as_posix()
    proc = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else path.read_text()


def test_one_lesson_folder_per_notebook():
    by_lesson = sorted(name for lesson in lessons.all_lessons()
                       for name in (lesson.NOTEBOOK, *getattr(lesson, "EXTRA_NOTEBOOKS", ())))
    assert by_lesson == [p.name for p in NOTEBOOKS], "every notebook needs exactly one lesson folder naming it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(committed(path))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them (jupyter nbconvert --clear-output --inplace)"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebook_defines_the_kernels_it_teaches(path):
    cells = kernel_cells.kernel_cells(path, committed(path))
    assert cells, f"{path.name} has no kernel cell: the kernel being taught must be on the page"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kernel_cells_equal_the_package(path):
    problems = [d for c in kernel_cells.kernel_cells(path, committed(path)) if (d := kernel_cells.difference(c))]
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_source_slicing(path):
    for i, c in enumerate(json.loads(committed(path))["cells"]):
        src = "".join(c["source"])
        assert c["cell_type"] != "code" or "inspect.getsource" not in src, f"{path.name} cell {i} prints source instead of defining it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_rendered_copy_matches_its_notebook(path):
    page = notebook_runs.rendered_page(path)
    assert page.exists(), f"{page.relative_to(ROOT)} is missing: run `python -m tilelang_tutorial render`"
    assert notebook_runs.rendered_digest(page) == notebook_runs.source_digest(notebook_runs.source_cells(path)), (
        f"{page.relative_to(ROOT)} was rendered from another version of {path.name}: "
        "run `python -m tilelang_tutorial render` and commit docs/rendered/")
    html = page.read_text(encoding="utf-8")
    assert html.count("jp-OutputArea-output") >= 3, "a rendered copy shows the outputs of its run"


def test_a_markdown_edit_refreshes_the_page_and_keeps_its_outputs(tmp_path, monkeypatch):
    """``render --markdown-only``: the edited prose replaces the page's, the outputs of the run that
    rendered it stay, the page's stamp matches the notebook again; a code edit is refused (its
    outputs would belong to other code) and leaves the page as it was."""
    import nbformat

    nb_dir, page_dir = tmp_path / "notebooks", tmp_path / "rendered"
    nb_dir.mkdir()
    monkeypatch.setattr(notebook_runs, "NOTEBOOK_DIR", nb_dir)
    monkeypatch.setattr(notebook_runs, "RENDERED_DIR", page_dir)
    page_dir.mkdir()
    path = nb_dir / "99_demo.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("The kernel runs at **408 TFLOP/s**.", id="prose"),
                nbformat.v4.new_code_cell("print(6 * 7)", id="code")]
    nbformat.write(nb, path)
    executed = nbformat.read(path, as_version=4)
    executed.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="measured on the runner: 42\n")]
    executed.cells[1].execution_count = 1
    executed.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    page = notebook_runs.write_html(executed, notebook_runs.rendered_page(path), path)

    nb.cells[0].source = "The kernel runs at **394 TFLOP/s**."
    nbformat.write(nb, path)
    assert notebook_runs.rendered_digest(page) != notebook_runs.source_digest(notebook_runs.source_cells(path))
    assert notebook_runs.refresh_markdown(["99_demo"]) == 0
    html = page.read_text(encoding="utf-8")
    assert "394 TFLOP/s" in html and "408 TFLOP/s" not in html
    assert "measured on the runner: 42" in html, "the outputs of the run that rendered the page stay"
    assert notebook_runs.rendered_digest(page) == notebook_runs.source_digest(notebook_runs.source_cells(path))

    nb.cells[1].source = "print(6 * 9)"
    nbformat.write(nb, path)
    assert notebook_runs.refresh_markdown(["99_demo"]) == 1
    assert page.read_text(encoding="utf-8") == html, "a refused page is left as it was"


def test_a_kernel_message_whose_wake_up_was_missed_is_read_at_the_next_slice(monkeypatch):
    """The channel's poll answers nothing for a while though the message is there (a missed
    wake-up): the wait looks again each slice and returns it, and a wait with a deadline still
    ends with Empty once the deadline has passed."""
    import asyncio
    import time
    from queue import Empty

    monkeypatch.setattr(notebook_runs, "POLL_SLICE_S", 0.01)
    asked = []

    async def get_msg(timeout=None):
        asked.append(timeout)
        if len(asked) < 4:                   # the socket's wake-up was missed three times
            await asyncio.sleep(timeout)
            raise Empty
        return {"msg_type": "execute_reply"}

    got = asyncio.run(notebook_runs.polled_in_slices(get_msg)(timeout=None))
    assert got == {"msg_type": "execute_reply"} and asked == [0.01] * 4

    async def never(timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    t0 = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(notebook_runs.polled_in_slices(never)(timeout=0.05))
    assert 0.05 <= time.monotonic() - t0 < 1.0


def test_the_notebook_client_reads_its_kernel_through_sliced_polls():
    """A kernel started by setup_kernel (the flow tests) reads shell and IOPub in slices, and runs a cell."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = notebook_runs.notebook_client(nb, timeout=120, kernel_name="python3")
    with client.setup_kernel():
        assert client.kc.shell_channel.get_msg.__qualname__.startswith("polled_in_slices")
        assert client.kc.iopub_channel.get_msg.__qualname__.startswith("polled_in_slices")
        client.execute_cell(nb.cells[0], 0)
    assert nb.cells[0].outputs[0]["text"] == "42\n"
