import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

from tilelang_tutorial import runtime  # noqa: E402

HAS_GPU = runtime.gpu_available()
requires_gpu = pytest.mark.gpu   # skipped below without a GPU; `pytest -m gpu` selects it


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("gpu") and not HAS_GPU:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
    # Longest first for pytest-xdist (`./tutorial test`: --dist loadscope --no-loadscope-reorder):
    # a scope is a test module, a test class or a notebook, and one worker runs it whole, so a long
    # one started last would keep one worker busy while the others idle. The notebooks' own runs
    # (nbval) and their flow tests (a notebook executed once per bug) go first, then the other
    # scopes by their number of tests.
    scope = {item: item.nodeid.rsplit("::", 1)[0] for item in items}
    size = {}
    for name in scope.values():
        size[name] = size.get(name, 0) + 1
    executes_notebooks = lambda name: name.endswith(".ipynb") or "test_reader_flow.py::" in name  # noqa: E731
    items.sort(key=lambda item: (not executes_notebooks(scope[item]), -size[scope[item]]))


@pytest.fixture(autouse=True)
def _restore_arch():
    """Tests that change the architecture must not leak it into the next test."""
    yield
    runtime.set_arch(None)
