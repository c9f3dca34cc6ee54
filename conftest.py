import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

from tilelang_tutorial import runtime  # noqa: E402

HAS_GPU = runtime.gpu_available()
requires_gpu = pytest.mark.gpu   # skipped below without a GPU; `pytest -m gpu` selects it
#: What CI (``CI=true``: two cores, a budget of minutes) leaves out and ``--full``
#: (``./tutorial test --full``) and every run outside CI keep: a check that repeats, on more cases,
#: one that CI runs.
full_only = pytest.mark.full


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run the checks CI leaves out (marked full) even where CI=true")


def pytest_configure(config):
    config.addinivalue_line("markers", "full: left out where CI=true unless --full is given")


def pytest_collection_modifyitems(config, items):
    ci_sample = os.environ.get("CI") == "true" and not config.getoption("--full")
    for item in items:
        if item.get_closest_marker("gpu") and not HAS_GPU:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        elif ci_sample and item.get_closest_marker("full"):
            item.add_marker(pytest.mark.skip(reason="CI leaves it out: ./tutorial test --full runs it"))
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


@pytest.fixture
def without_nvcc():
    """Without a GPU, run the test as on a machine without nvcc: the emulator runs a kernel's
    program (its TIR before lowering), compiled or not, so a check of numbers gets the same answer
    without lowering and nvcc (seconds of CPU per kernel). With a GPU, nothing changes: the kernels
    are compiled and launched. The lessons' remembered builds are forgotten afterwards, so no
    uncompiled kernel reaches a test that reads generated code."""
    if HAS_GPU:
        yield
        return
    import sys

    def forget_builds():
        for name, module in list(sys.modules.items()):
            if name.startswith("tilelang_tutorial.lessons.") and module is not None:
                for thing in list(vars(module).values()):
                    if callable(getattr(thing, "cache_clear", None)) and getattr(thing, "__module__", None) == name:
                        thing.cache_clear()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "_nvcc_lookup", lambda *args: None)
        runtime.invalidate_mode()
        try:
            yield
        finally:
            patch.undo()
            runtime.invalidate_mode()
            forget_builds()


@pytest.fixture(autouse=True)
def _restore_arch():
    """Tests that change the architecture must not leak it into the next test."""
    yield
    runtime.set_arch(None)
