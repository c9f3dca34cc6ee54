"""Notebooks are committed without outputs, and every one is executed by the test command."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_the_five_notebooks_exist():
    prefixes = [p.name[:2] for p in NOTEBOOKS]
    assert prefixes == ["01", "02", "03", "04", "05"], [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them (jupyter nbconvert --clear-output --inplace)"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_kernel_code_copied_into_notebooks(path):
    """Kernel code lives in the package; notebooks may define only the exercise starters."""
    nb = json.loads(path.read_text())
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if c["cell_type"] == "code" and "@T.prim_func" in src:
            assert "TODO" in src or "exercise" in src.lower(), f"{path.name}: a kernel is defined in a notebook cell:\n{src[:300]}"
