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


@pytest.fixture(autouse=True)
def _restore_arch():
    """Tests that change the architecture must not leak it into the next test."""
    yield
    runtime.set_arch(None)
