"""Fixtures for the browser tests: one real JupyterLab server and one headless Chromium per run.

Run with ``./tutorial browser`` (installs Playwright's Python package and Debian's chromium if
needed). These tests are not part of ``./tutorial test``: it names ``tests`` and ``notebooks``.
"""
import shutil
import tempfile

import pytest

from labdriver import ARTIFACTS, LabServer, NotebookPage, launch_browser


@pytest.fixture(scope="session")
def lab():
    """JupyterLab on 127.0.0.1 over a temporary copy of notebooks/; always stopped at the end."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = LabServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser_context():
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="tutorial-chromium-")  # an empty user-data-dir
    try:
        with sync_playwright() as pw:
            ctx = launch_browser(pw, profile)
            try:
                yield ctx
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def open_notebook(lab, browser_context):
    """``open_notebook(name)`` -> a :class:`NotebookPage` with its kernel idle. Pages are closed and
    kernels shut down after the test (each kernel holds torch + TileLang in memory)."""
    pages = []

    def _open(name: str) -> NotebookPage:
        nb = NotebookPage(browser_context.new_page(), lab, name)
        pages.append(nb)
        nb.open()
        return nb

    yield _open
    for nb in pages:
        try:
            nb.page.close()
        except Exception:
            pass
    errors = lab.shutdown_kernels()
    assert not errors, f"could not shut down kernels: {errors}"
