"""The browser check is not blind: deliberately broken notebooks must be reported.

Each case writes a tiny notebook into the server's temporary root, runs it in JupyterLab exactly
like the real notebooks, and asserts that ``NotebookPage.problems()`` — the same function
``test_notebooks_in_jupyterlab.py`` asserts is empty — reports the breakage.
"""
import time

import nbformat
import pytest

from labdriver import ARTIFACTS

CASES = {
    # ipywidgets 7's protocol (controls 1.5.0) against JupyterLab's ipywidgets 8 frontend (2.0.0):
    # what a reader gets with a mismatched ipywidgets/jupyterlab_widgets pair.
    "mismatched_widget_version": (
        "import ipywidgets as W\n"
        "from traitlets import Unicode\n"
        "class OldDropdown(W.Dropdown):\n"
        "    _model_module_version = Unicode('1.5.0').tag(sync=True)\n"
        "    _view_module_version = Unicode('1.5.0').tag(sync=True)\n"
        "OldDropdown(options=['a', 'b'], description='old')",
        None,
        ["a widget failed to render", "Error displaying widget", "Failed to load", "model not found"],
    ),
    # An exception inside a widget callback: JupyterLab shows it only in its log console, the
    # cell's output stays clean; the kernel's message on the websocket gives it away.
    "exception_in_widget_callback": (
        "import ipywidgets as W\n"
        "dd = W.Dropdown(options=['a', 'b'], value='a', description='broken')\n"
        "def on_change(change):\n"
        "    raise RuntimeError('deliberately broken widget callback')\n"
        "dd.observe(on_change, names='value')\n"
        "dd",
        "select",
        ["deliberately broken widget callback"],
    ),
    # A KernelInspector whose rebuild fails: the inspector catches it and says so in red.
    "inspector_rebuild_fails": (
        "from tilelang_tutorial.inspector import inspect_kernel\n"
        "from tilelang_tutorial.lessons.tiles import scale_copy\n"
        "kernel = scale_copy.build_scale_copy(4096, dtype='float16')\n"
        "def rebuild(**p):\n"
        "    raise ValueError('deliberately broken rebuild')\n"
        "inspect_kernel(kernel, controls={'block_M': [64, 32]}, initial={'block_M': 64}, rebuild=rebuild)",
        "select",
        ["deliberately broken rebuild"],
    ),
    # A plain cell error (the simplest thing the check must see).
    "cell_error": ("x = 1 / 0", None, ["ZeroDivisionError"]),
}


def write_notebook(root, name: str, source: str) -> str:
    doc = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    doc.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(doc, root / name)
    return name


@pytest.mark.parametrize("case", list(CASES))
def test_detector_reports_a_broken_notebook(lab, open_notebook, case):
    source, interact, expected = CASES[case]
    name = write_notebook(lab.root, f"_broken_{case}.ipynb", source)
    nb = open_notebook(name)
    nb.run_all()
    nb.wait_until_done(timeout=600)
    if interact == "select":
        select = nb.page.locator(".jp-OutputArea-output select").first
        select.wait_for(timeout=30_000)
        options = select.locator("option").all_text_contents()
        select.select_option(options[1])
    deadline = time.time() + 60
    problems = nb.problems()
    while not any(e in p for p in problems for e in expected) and time.time() < deadline:
        time.sleep(0.5)
        problems = nb.problems()
    nb.screenshot(ARTIFACTS / f"detector-{case}.png")
    assert problems, f"{case}: the check saw nothing wrong"
    assert any(e in p for p in problems for e in expected), \
        f"{case}: expected one of {expected} in the reported problems:\n" + "\n".join(problems)


def test_inspector_latency_chart_renders(lab, open_notebook):
    """The positive side: with bars to draw, the inspector's latency panel shows its chart image.

    (Without GPU records no tutorial notebook has a chart on a CPU machine, so this is checked on
    a generated notebook; the bars are a test fixture, labelled as such, not a measurement.)
    """
    source = (
        "from tilelang_tutorial.inspector import inspect_kernel\n"
        "from tilelang_tutorial.report import Bar, LatencyReport\n"
        "from tilelang_tutorial.lessons.tiles import scale_copy\n"
        "kernel = scale_copy.build_scale_copy(4096, dtype='float16')\n"
        "bars = [Bar('kernel', 0.010, 'kernel'), Bar('reference', 0.012, 'reference'), Bar('floor', 0.008, 'floor')]\n"
        "insp = inspect_kernel(kernel, latency=LatencyReport(bars=bars, source='recorded', note='test fixture, not a measurement'))"
    )
    nb = open_notebook(write_notebook(lab.root, "_inspector_chart.ipynb", source))
    nb.run_all()
    nb.wait_until_done(timeout=600)
    problems = nb.problems()
    (insp,) = nb.inspectors()
    nb.element_screenshot('[data-tl-inspector="0"]', ARTIFACTS / "detector-inspector-chart.png")
    assert not problems, "\n".join(problems)
    assert insp["latencyText"].startswith("latency (RECORDED"), insp["latencyText"]
    assert insp["imagesLoaded"] >= 1, insp
