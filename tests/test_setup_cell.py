"""The set-up cell (the first code cell of every notebook) installs the tutorial only where it is
not importable, and makes it importable in the kernel that ran it.

The install is tested in a fresh virtual environment on a tiny stand-in checkout (a
``tilelang_tutorial`` package with no dependencies, ``pyproject.toml`` beside it): installing the
real package there would download torch and TileLang (gigabytes, minutes) and test pip rather
than the cell. What the cell decides -- whether to install, where the checkout is, that the
running interpreter imports it afterwards -- is the same for both.
"""
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tilelang_tutorial import setup_cell

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _stand_in_checkout(where: Path) -> Path:
    root = where / "tilelang-tutorial"
    (root / "tilelang_tutorial").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "tilelang_tutorial" / "__init__.py").write_text('WHAT = "the stand-in checkout"\n')
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "tilelang-tutorial"\nversion = "0.0.1"\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["tilelang_tutorial*"]\n')
    return root


#: the environment for interpreters of fresh virtual environments: without the parent's PYTHONPATH,
#: which would import the real package instead of the stand-in
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

# what a notebook's next cell does: import the package in the same interpreter
AFTER = '\nimport tilelang_tutorial\nprint("IMPORTED", tilelang_tutorial.WHAT, tilelang_tutorial.__file__)\n'


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    if os.environ.get("TUTORIAL_PYTHON"):   # ./tutorial's prepared-interpreter mode: the offline GPU runner
        pytest.skip("TUTORIAL_PYTHON is set: no package index to install the stand-in's build backend from")
    where = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(where / "env")
    return where / "env" / "bin" / "python"


def test_the_cell_installs_the_checkout_it_sits_in_and_imports_it_at_once(tmp_path, fresh_venv):
    root = _stand_in_checkout(tmp_path)
    py = str(fresh_venv)
    assert subprocess.run([py, "-c", "import tilelang_tutorial"], capture_output=True, env=CLEAN_ENV).returncode != 0
    # run from the notebooks/ folder, as Jupyter does for a notebook there
    first = subprocess.run([py, "-c", setup_cell.CELL_SOURCE + AFTER], cwd=root / "notebooks",
                           capture_output=True, text=True, timeout=600, env=CLEAN_ENV)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"installing the tutorial from {root.resolve()}" in first.stdout
    assert "IMPORTED the stand-in checkout" in first.stdout and str(root.resolve()) in first.stdout
    # a new kernel: installed for good, so the cell does nothing (no pip)
    second = subprocess.run([py, "-c", setup_cell.CELL_SOURCE + AFTER], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env=CLEAN_ENV)
    assert second.returncode == 0, second.stderr
    assert "installing" not in second.stdout and "IMPORTED the stand-in checkout" in second.stdout


def test_a_clone_beside_the_working_folder_is_found(tmp_path, fresh_venv):
    """Colab and Kaggle start kernels in /content and /kaggle/working: a clone named
    tilelang-tutorial there is found. (Its own venv: the first test installed another checkout.)"""
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    root = _stand_in_checkout(tmp_path)
    out = subprocess.run([str(env / "bin" / "python"), "-c", setup_cell.CELL_SOURCE + AFTER], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, env=CLEAN_ENV)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "IMPORTED the stand-in checkout" in out.stdout and str(root.resolve()) in out.stdout


def test_where_the_package_is_importable_the_cell_does_nothing(tmp_path):
    out = subprocess.run([sys.executable, "-c", setup_cell.CELL_SOURCE], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr


def test_without_a_checkout_it_says_so_in_one_line(tmp_path):
    venv.EnvBuilder(with_pip=False).create(tmp_path / "env")      # no pip needed: it stops before
    out = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-I", "-c", setup_cell.CELL_SOURCE], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: no checkout of the tutorial") and "clone it" in last


def test_insert_puts_it_first_once_and_check_agrees(tmp_path):
    nb = tmp_path / "lesson.ipynb"
    shutil.copy(NOTEBOOKS[0], nb)
    without = json.loads(nb.read_text())   # the committed notebooks carry the cell: take it out first
    without["cells"] = [c for c in without["cells"] if not setup_cell.is_setup_cell(c)]
    nb.write_text(json.dumps(without, indent=1))
    assert setup_cell.check([nb]) == [f"{nb.name}: the first code cell is not the set-up cell"]
    before = json.loads(nb.read_text())["cells"]
    assert setup_cell.insert([nb]) == [nb.name]
    assert setup_cell.check([nb]) == [] and setup_cell.insert([nb]) == []      # idempotent
    cells = json.loads(nb.read_text())["cells"]
    assert len(cells) == len(before) + 1
    first_code = next(c for c in cells if c["cell_type"] == "code")
    assert "".join(first_code["source"]) == setup_cell.CELL_SOURCE and first_code["outputs"] == []
    assert cells[0] == before[0] and cells[1] is first_code, "the title stays on top, the set-up cell right after it"
    assert first_code["metadata"]["jupyter"]["source_hidden"], "collapsed: the reader meets the lesson first"
    assert setup_cell.MARKER.startswith("#@title ") and "\n" not in setup_cell.MARKER, "one line shows"
    # an outdated copy (another first line, shown) is replaced, not duplicated
    first_code["source"] = ["# Set-up cell: an older version\nprint('old')\n"]
    first_code["metadata"] = {}
    nb.write_text(json.dumps({**json.loads(nb.read_text()), "cells": cells}, indent=1))
    assert "differs" in setup_cell.check([nb])[0]
    assert setup_cell.insert([nb]) == [nb.name] and setup_cell.check([nb]) == []
    assert sum(setup_cell.is_setup_cell(c) for c in json.loads(nb.read_text())["cells"]) == 1


def test_every_notebook_starts_with_the_set_up_cell():
    """Insert with: python -m tilelang_tutorial.setup_cell notebooks/*.ipynb"""
    assert NOTEBOOKS
    assert setup_cell.check(NOTEBOOKS) == []
