"""Notebooks opened and run in JupyterLab in Chromium, checked as a reader sees it.

Only what a browser alone can show is checked here: that figures appear under the lab's inline
backend, that a KernelInspector renders and recompiles from its controls, and that the layout
picker redraws. ``./tutorial test`` (nbval) already executes every notebook; the widgets and the
figure plumbing are the package's, the same in every notebook. So the suite runs the first notebook
that shows an inspector and the first that shows the layout picker (both draw figures), not all.

For each notebook: open it (fresh workspace), wait for an idle kernel, Run > Run All Cells, wait by
polling until no cell shows [*] and the kernel is idle, then check

* no error output, no "Error displaying widget" / "model not found", no kernel error message
  (``NotebookPage.problems``, the same check ``test_detector.py`` proves is not blind);
* every code cell ran (an error stops "Run All" half-way);
* every cell that shows a figure unconditionally (a top-level ``plt.show()`` / ``L.show(...)`` /
  ``layouts.show(...)``) has an image in its output — e.g. notebook 03's layout plots;
* each KernelInspector: its five tabs render, the CUDA tab holds highlighted source (inline-styled
  spans inside ``.tl-source``), its latency panel shows the chart image (or, when there is no
  figure to draw, the text saying why), and picking another value in its first dropdown
  recompiles and re-renders it.

A full-page screenshot of each notebook is written to artifacts/browser/<notebook>.png (and one
of each inspector to artifacts/browser/<notebook>-inspector<i>.png), pass or fail.
"""
import json
import re

import pytest

from labdriver import ARTIFACTS, NOTEBOOK_DIR

TABS = ["CUDA", "Host code", "PTX", "Launch facts", "Layouts"]
FIGURE_CALL = re.compile(r"^(plt\.show\(|L\.show\(|layouts\.show\(|display\(Image\()", re.M)


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def notebook_facts(path) -> dict:
    """What the notebook says a reader should see (read from the .ipynb the server opened)."""
    cells = json.loads(path.read_text())["cells"]
    # A cell whose source JupyterLab hides (the set-up cell, collapsed) shows no input prompt to read
    # its execution count from: its run is checked by nbval instead.
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and _source(c).strip()
            and not c.get("metadata", {}).get("jupyter", {}).get("source_hidden")]
    return {
        "cells": len(cells),
        "code_cells": code,
        # top-level (unindented, so unconditional) figure display -> an <img> must be in that output
        "figure_cells": [i for i in code if FIGURE_CALL.search(_source(cells[i]))],
        "uses_inspector": any("inspect_kernel(" in _source(cells[i]) or "KernelInspector(" in _source(cells[i])
                              for i in code),
        # each call shows one inspector (the widget, or its static fallback, never both)
        "inspector_calls": sum(len(re.findall(r"^(?:\S.*)?\binspect_kernel\(", _source(cells[i]), re.M)) for i in code),
        "uses_picker": any("layout_picker(" in _source(cells[i]) for i in code),
    }


def browser_notebooks() -> list[str]:
    """The first notebook that shows an inspector and the first that shows the layout picker."""
    facts = {p.name: notebook_facts(p) for p in sorted(NOTEBOOK_DIR.glob("*.ipynb"))}
    chosen = [next(name for name, f in facts.items() if f[feature]) for feature in ("uses_inspector", "uses_picker")]
    return sorted(set(chosen))


NOTEBOOKS = browser_notebooks()


_JS_CELLS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  return [...panel.querySelectorAll('.jp-Notebook .jp-Cell')].map(c => ({code: c.classList.contains('jp-CodeCell'),
                prompt: ((c.querySelector('.jp-InputArea-prompt') || {}).textContent || '').trim(),
                images: [...c.querySelectorAll('.jp-OutputArea-output img')]
                          .filter(im => im.complete && im.naturalWidth > 0).length}));
}"""


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_in_jupyterlab(lab, open_notebook, name):
    facts = notebook_facts(lab.root / name)  # the server's copy (taken when it started)
    stem = name.removesuffix(".ipynb")
    nb = open_notebook(name)
    report = {"notebook": name}
    try:
        nb.run_all()
        report["run"] = nb.wait_until_done()

        problems = nb.problems()
        assert not problems, f"{name}: problems a reader would see:\n\n" + "\n\n".join(problems)

        cells = nb.page.evaluate(_JS_CELLS)
        assert len(cells) == facts["cells"], f"{name}: {len(cells)} cells on the page, {facts['cells']} in the file"
        not_run = [i + 1 for i in facts["code_cells"] if not re.fullmatch(r"\[\d+\]:", cells[i]["prompt"])]
        assert not not_run, f"{name}: code cells {not_run} did not run (prompts {[cells[i - 1]['prompt'] for i in not_run]})"
        no_figure = [i + 1 for i in facts["figure_cells"] if cells[i]["images"] == 0]
        assert not no_figure, f"{name}: cells {no_figure} call plt.show()/L.show() but show no image"
        report["figures"] = sum(c["images"] for c in cells)

        inspectors = nb.inspectors()
        if facts["uses_inspector"]:
            assert inspectors, f"{name}: the notebook calls inspect_kernel but no KernelInspector rendered"
            assert len(inspectors) == facts["inspector_calls"], (
                f"{name}: {facts['inspector_calls']} inspect_kernel calls but {len(inspectors)} inspectors on the page "
                "(a result shown twice: widget and static fallback together?)")
        if facts["uses_picker"]:
            report["picker"] = nb.check_layout_picker()
        report["inspectors"] = []
        for insp in inspectors:
            i = insp["index"]
            assert insp["tabs"][:5] == TABS, f"{name}: inspector {i} tabs: {insp['tabs']}"
            assert insp["cudaChars"] > 200 and insp["styledSpans"] > 20, \
                f"{name}: inspector {i}: CUDA tab not highlighted ({insp['cudaChars']} chars, {insp['styledSpans']} styled spans)"
            latency = insp["latencyText"].strip()
            assert latency.startswith("latency"), f"{name}: inspector {i}: no latency panel text"
            if latency.startswith("latency ("):  # there are bars to draw: the chart must be there
                assert insp["imagesLoaded"] >= 1, f"{name}: inspector {i}: latency chart image missing"
            nb.element_screenshot(f'[data-tl-inspector="{i}"]', ARTIFACTS / f"{stem}-inspector{i}.png")
            entry = {"tabs": insp["tabs"], "styled_spans": insp["styledSpans"],
                     "latency": latency.splitlines()[0], "chart": insp["imagesLoaded"] >= 1}
            if insp["selects"]:
                changed = nb.change_control(i)
                assert changed["cuda_changed"] or changed["status_compiled"], changed
                entry["control"] = changed
                nb.element_screenshot(f'[data-tl-inspector="{i}"]', ARTIFACTS / f"{stem}-inspector{i}-after.png")
            report["inspectors"].append(entry)

        problems = nb.problems()  # again: the recompiles ran widget callbacks in the kernel
        assert not problems, f"{name}: problems after using the controls:\n\n" + "\n\n".join(problems)
    finally:
        try:
            nb.screenshot(ARTIFACTS / f"{stem}.png")
        finally:
            (ARTIFACTS / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
            print(json.dumps(report, default=str))
