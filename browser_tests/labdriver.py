"""Drive a real JupyterLab in Debian's Chromium, as a reader would, and check what it shows.

Used by the browser tests (``./tutorial browser``). Three parts:

* :class:`LabServer` — the real ``jupyter lab`` server from this interpreter, on 127.0.0.1 and a
  free port, with no token, throw-away workspace/settings/runtime/config directories and a
  throw-away copy of the notebooks as its root (the repository's notebooks never get outputs).
* :func:`launch_browser` — Chromium through Playwright's ``executable_path`` (no browser download).
* :class:`NotebookPage` — open a notebook, get past the kernel dialog, run all cells through the
  menu, wait by polling the page (never by awaiting the run-all promise, which can hang), and
  :meth:`NotebookPage.problems`: the one checking function that both the real notebooks and the
  deliberately broken ones (see ``test_detector.py``) go through.

``problems()`` looks at the page (error outputs, "Error displaying widget", a KernelInspector that
reports an error, a matplotlib figure that was silently not shown) *and* at the kernel's own
messages on the websocket: an exception in a widget callback is sent by the kernel but JupyterLab
shows it only in its log console, not under the cell.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = os.environ.get("TUTORIAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Generous: a cold TileLang cache means nvcc runs for every kernel a notebook compiles.
RUN_TIMEOUT_S = float(os.environ.get("BROWSER_TEST_RUN_TIMEOUT", "1500"))

# Text that must never appear in an output area (ipywidgets' and JupyterLab's failure messages).
WIDGET_ERROR_TEXT = [
    "Error displaying widget",
    "model not found",
    "Failed to load model class",
    "Failed to load view class",
    "Error creating widget",
    "Error rendering output item",
    "Could not render content for",
    "Click to show javascript error",
]
# Kernel output (stderr stream or error message) that means something broke.
KERNEL_ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|Exception in (message handler|comm_msg)"
    r"|FigureCanvasAgg is non-interactive",  # plt.show() drew nothing: the reader sees no figure
)


# ------------------------------------------------------------------------------------------------
# The server
# ------------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# JupyterLab user settings for the test profile (written to the temporary settings directory).
LAB_SETTINGS = {
    # Render every cell (no virtual scrolling), so every output can be checked and screenshotted.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # No news / update toasts over the notebook (and no network traffic for them).
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}


class LabServer:
    """``python -m jupyter lab`` on 127.0.0.1, started by :meth:`start`, always stopped by :meth:`stop`."""

    def __init__(self, notebooks: Path = NOTEBOOK_DIR, python: str = sys.executable):
        self.tmp = Path(tempfile.mkdtemp(prefix="tutorial-lab-"))
        self.root = self.tmp / "notebooks"
        shutil.copytree(notebooks, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.python = python
        self.log_path = self.tmp / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        dirs = {name: self.tmp / name for name in ("workspaces", "settings", "runtime", "config", "data")}
        for d in dirs.values():
            d.mkdir(exist_ok=True)
        for rel, value in LAB_SETTINGS.items():
            path = dirs["settings"] / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env.update(
            JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
            JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            JUPYTER_CONFIG_DIR=str(dirs["config"]),  # ignore a personal jupyter config (password ...)
            TILELANG_CACHE_DIR=os.environ.get("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang")),
            PYTHONUNBUFFERED="1",
        )
        # `./tutorial` exports MPLBACKEND=Agg for pytest; a JupyterLab kernel must pick its own
        # inline backend (as `./tutorial lab` does), otherwise plt.show() draws nothing.
        if env.get("MPLBACKEND", "").lower() == "agg":
            env.pop("MPLBACKEND")
        return env

    def start(self, timeout: float = 180) -> "LabServer":
        cmd = [
            self.python, "-m", "jupyter", "lab", "--no-browser",
            "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            "--IdentityProvider.token=", "--PasswordIdentityProvider.hashed_password=",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",  # no PyPI queries from the extension manager
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI and containers run as root
        self._log = open(self.log_path, "w")
        # Own process group: the kernels it starts can be cleaned up with it.
        self.proc = subprocess.Popen(cmd, cwd=self.tmp, env=self.env(), stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/api/status", timeout=5) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer on {self.url} within {timeout:.0f} s:\n{tail}")

    def _xsrf(self) -> str:
        """The server's XSRF cookie (non-GET API calls without a token must echo it back)."""
        if not getattr(self, "_xsrf_value", None):
            with urllib.request.urlopen(self.url + "/lab", timeout=30) as r:
                for header in r.headers.get_all("Set-Cookie") or []:
                    m = re.match(r"_xsrf=([^;]+)", header)
                    if m:
                        self._xsrf_value = m.group(1)
        return getattr(self, "_xsrf_value", "") or ""

    def api(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if method != "GET":
            token = self._xsrf()
            headers.update({"X-XSRFToken": token, "Cookie": f"_xsrf={token}"})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def shutdown_kernels(self) -> list[str]:
        """Shut down every kernel (between notebooks: each one holds torch + TileLang in memory)."""
        errors = []
        for k in self.api("GET", "/api/kernels"):
            try:
                self.api("DELETE", f"/api/kernels/{k['id']}")
            except Exception as exc:  # reported by the fixture, never hidden
                errors.append(f"{k['id']}: {exc}")
        return errors

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self.proc is not None:
            try:  # kernels left behind in the server's process group (only if it died hard)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if getattr(self, "_log", None):
            self._log.close()
        try:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log_path, ARTIFACTS / "jupyterlab.log")
        except OSError:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# The browser
# ------------------------------------------------------------------------------------------------

def launch_browser(playwright, profile_dir: str):
    """Debian's Chromium through Playwright, with an empty profile. Never downloads a browser."""
    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"{CHROMIUM} is missing: `apt-get install chromium` (or set TUTORIAL_CHROMIUM)")
    return playwright.chromium.launch_persistent_context(
        user_data_dir=profile_dir, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
        viewport={"width": 1400, "height": 1000}, device_scale_factor=1,
    )


# ------------------------------------------------------------------------------------------------
# Kernel messages, read off the websocket
# ------------------------------------------------------------------------------------------------

def _decode_frame(payload) -> dict | None:
    """A kernel websocket frame -> {"channel", "header", "parent_header", "content"} (or None).

    JupyterLab 4 talks the ``v1.kernel.websocket.jupyter.org`` binary protocol (a table of offsets,
    then channel, header, parent header, metadata, content, buffers); older servers send JSON.
    """
    try:
        if isinstance(payload, str):
            msg = json.loads(payload)
            return {k: msg.get(k) for k in ("channel", "header", "parent_header", "content")}
        n = struct.unpack_from("<Q", payload, 0)[0]
        offsets = list(struct.unpack_from(f"<{n}Q", payload, 8))
        if n < 6:
            return None
        parts = [payload[offsets[i]:offsets[i + 1]] for i in range(5)]
        return {"channel": parts[0].decode(), "header": json.loads(parts[1]),
                "parent_header": json.loads(parts[2]), "content": json.loads(parts[4])}
    except Exception:
        return None


@dataclass
class KernelLog:
    """Every iopub error / stderr message a page's kernels sent, with what caused it."""

    messages: list[dict] = field(default_factory=list)

    def attach(self, page) -> None:
        def on_ws(ws):
            if "/api/kernels/" not in ws.url:
                return
            ws.on("framereceived", self._on_frame)

        page.on("websocket", on_ws)

    def _on_frame(self, payload) -> None:
        msg = _decode_frame(payload)
        if not msg or msg.get("channel") != "iopub":
            return
        kind = (msg.get("header") or {}).get("msg_type")
        content = msg.get("content") or {}
        parent = (msg.get("parent_header") or {}).get("msg_type", "?")
        if kind == "error":
            text = "\n".join(content.get("traceback") or []) or f"{content.get('ename')}: {content.get('evalue')}"
            self.messages.append({"kind": "error", "parent": parent, "text": _strip_ansi(text)})
        elif kind == "stream" and content.get("name") == "stderr":
            self.messages.append({"kind": "stderr", "parent": parent, "text": content.get("text", "")})

    def problems(self) -> list[str]:
        out = []
        for m in self.messages:
            if m["kind"] == "error" or KERNEL_ERROR_RE.search(m["text"]):
                where = "a cell" if m["parent"] == "execute_request" else f"a {m['parent']} (widget callback)"
                out.append(f"kernel {m['kind']} from {where}:\n{_tail(m['text'])}")
        return out


def _strip_ansi(s: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", s)


def _tail(s: str, n: int = 25) -> str:
    lines = s.rstrip().splitlines()
    return "\n".join(lines[-n:])


# ------------------------------------------------------------------------------------------------
# A notebook in the page
# ------------------------------------------------------------------------------------------------

# JavaScript run in the page. Kept small; every wait is a poll from Python.
_JS_STATE = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return {panel: false};
  const prompts = [...panel.querySelectorAll('.jp-Cell .jp-InputArea-prompt')].map(p => p.textContent.trim());
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  // the status bar's kernel item: "Python 3 (ipykernel) | Idle" ("No Kernel | Initializing" before)
  const kernel = [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')]
      .map(e => e.textContent.trim()).find(t => / \| \w+/.test(t)) || '';
  return {
    panel: true,
    cells: panel.querySelectorAll('.jp-CodeCell').length,
    running: prompts.filter(t => t.includes('*')).length,
    executed: prompts.filter(t => /\\[\\d+\\]/.test(t)).length,
    indicator: ind ? (ind.getAttribute('data-status') || '') : '',
    kernel,
    dialog: !!document.querySelector('.jp-Dialog'),
  };
}"""

_JS_OUTPUT_PROBLEMS = """(needles) => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const found = [];
  const cells = [...panel.querySelectorAll('.jp-CodeCell')];
  cells.forEach((cell, i) => {
    const prompt = (cell.querySelector('.jp-InputArea-prompt') || {}).textContent || '';
    for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
      const text = out.textContent || '';
      const mime = out.getAttribute('data-mime-type') || '';
      const where = `cell ${i + 1} ${prompt.trim()}`;
      if (mime === 'application/vnd.jupyter.stderr' && /Traceback|^\\w*(Error|Exception)\\b|Error: /m.test(text))
        found.push(`${where}: error output: ${text.slice(-1500)}`);
      for (const n of needles)
        if (text.includes(n)) found.push(`${where}: "${n}": ${text.slice(0, 500)}`);
      if (mime === 'application/vnd.jupyter.stderr' && text.includes('FigureCanvasAgg is non-interactive'))
        found.push(`${where}: a figure was not shown (matplotlib backend Agg): ${text.slice(0, 300)}`);
    }
    // ipywidgets 8 draws a broken widget as an icon with "Click to show javascript error."
    for (const w of cell.querySelectorAll('.jupyter-widgets-error-widget'))
      found.push(`cell ${i + 1} ${prompt.trim()}: a widget failed to render: ${w.textContent.trim().slice(0, 300)}`);
  });
  // A KernelInspector reports rebuild errors in red in its status line.
  for (const root of document.querySelectorAll('.jp-OutputArea-output')) {
    if (!root.querySelector('.tl-source')) continue;
    for (const span of root.querySelectorAll('span[style*="color:red"], span[style*="color: red"]'))
      if (!span.closest('.tl-source')) found.push(`KernelInspector status: ${span.textContent.slice(0, 400)}`);
  }
  return found;
}"""

# Describe each KernelInspector on the page (an output holding a .tl-source block).
_JS_INSPECTORS = """() => {
  const out = [];
  const roots = [...document.querySelectorAll('.jp-OutputArea-output')].filter(o => o.querySelector('.tl-source'));
  roots.forEach((root, i) => {
    root.setAttribute('data-tl-inspector', String(i));
    const tabs = [...root.querySelectorAll('.lm-TabBar-tabLabel, .p-TabBar-tabLabel')].map(t => t.textContent.trim());
    const cuda = root.querySelector('.tl-source');
    const styled = cuda ? [...cuda.querySelectorAll('span[style*="color"]')].length : 0;
    const imgs = [...root.querySelectorAll('img')].filter(im => getComputedStyle(im).display !== 'none');
    const loaded = imgs.filter(im => im.complete && im.naturalWidth > 0).length;
    const pres = [...root.querySelectorAll('pre')].map(p => p.textContent);
    const latencyText = pres.find(t => t.trim().startsWith('latency')) || '';
    const selects = [...root.querySelectorAll('select')].map(s => ({
      label: ((s.closest('.widget-dropdown') || s.parentElement).querySelector('label') || {}).textContent || '',
      value: s.value, options: [...s.options].map(o => o.value), disabled: s.disabled}));
    out.push({index: i, tabs, cudaChars: cuda ? cuda.textContent.length : 0, styledSpans: styled,
              images: imgs.length, imagesLoaded: loaded, latencyText, selects,
              text: root.textContent.slice(0, 200)});
  });
  return out;
}"""


class NotebookPage:
    def __init__(self, page, server: LabServer, name: str):
        self.page = page
        self.server = server
        self.name = name
        self.kernel_log = KernelLog()
        self.kernel_log.attach(page)
        self.console: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))

    # -- opening --------------------------------------------------------------------------------
    def open(self, timeout: float = 180) -> None:
        # ?reset: start from an empty workspace, so no tab from an earlier session is reopened.
        self.page.goto(f"{self.server.url}/lab/tree/{self.name}?reset", wait_until="domcontentloaded",
                       timeout=timeout * 1000)
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=timeout * 1000)
        self.wait_for_kernel_idle(timeout)

    def _accept_kernel_dialog(self) -> bool:
        dialog = self.page.query_selector(".jp-Dialog")
        if not dialog:
            return False
        text = dialog.text_content() or ""
        if "Kernel" in text or "kernel" in text:
            # "Select Kernel": keep the preselected kernel (the notebook's python3) and accept.
            dialog.query_selector(".jp-Dialog-button.jp-mod-accept").click()
            return True
        return False

    def state(self) -> dict:
        return self.page.evaluate(_JS_STATE)

    def wait_for_kernel_idle(self, timeout: float = 180) -> None:
        deadline = time.time() + timeout
        st = {}
        while time.time() < deadline:
            self._accept_kernel_dialog()
            st = self.state()
            if st.get("panel") and _kernel_idle(st):
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: kernel not idle after {timeout:.0f} s: {st}")

    # -- running --------------------------------------------------------------------------------
    def run_all(self) -> None:
        """Run > Run All Cells, through the menu bar as a reader would."""
        self.page.click(".jp-NotebookPanel .jp-Notebook")  # focus the notebook
        self.page.click(".lm-MenuBar-item:has-text('Run')")
        self.page.click(".lm-Menu-item:has-text('Run All Cells')")

    def wait_until_done(self, timeout: float = RUN_TIMEOUT_S) -> dict:
        """Poll: every code cell has run ([n] prompt, or was never reached), none shows [*], kernel idle.

        The run-all command's promise is deliberately not awaited (it can hang); a stable idle
        state seen twice, 1 s apart, ends the wait.
        """
        deadline = time.time() + timeout
        start = time.time()
        idle_seen = 0
        st: dict = {}
        while time.time() < deadline:
            self._accept_kernel_dialog()
            st = self.state()
            started = st.get("executed", 0) > 0 or time.time() - start > 30
            if st.get("panel") and started and st["running"] == 0 and _kernel_idle(st):
                idle_seen += 1
                if idle_seen >= 2:
                    st["seconds"] = round(time.time() - start, 1)
                    return st
            else:
                idle_seen = 0
            time.sleep(1.0)
        raise TimeoutError(f"{self.name}: cells still running after {timeout:.0f} s: {st}")

    # -- checking -------------------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Everything a reader would see as broken. Empty list = fine. (Same check for every notebook.)"""
        found = list(self.page.evaluate(_JS_OUTPUT_PROBLEMS, WIDGET_ERROR_TEXT))
        found += self.kernel_log.problems()
        found += [f"browser console: {c}" for c in self.console
                  if re.search(r"widget|model not found|Failed to load|Could not", c, re.I)]
        # dedupe, keep order
        return list(dict.fromkeys(found))

    def inspectors(self) -> list[dict]:
        return self.page.evaluate(_JS_INSPECTORS)

    def check_layout_picker(self, timeout: float = 300) -> dict:
        """Notebook 03's layout picker: the buffer dropdown and the drawing agree, and picking another
        buffer replaces the drawing (one image, naming the new buffer) instead of adding one."""
        root = ".tl-layout-picker"
        self.page.locator(root).first.wait_for(timeout=60_000)

        def state():
            return self.page.evaluate(
                """(sel) => { const r = document.querySelector(sel);
                     const selects = [...r.querySelectorAll('select')];
                     const out = r.querySelector('.jp-OutputArea, .widget-output') || r;
                     return {buffer: selects[1].value, options: [...selects[1].options].map(o => o.value),
                             images: [...out.querySelectorAll('img')].filter(im => im.complete && im.naturalWidth > 0).length,
                             text: out.textContent}; }""", root)

        first = state()
        assert first["images"] == 1, f"the picker shows {first['images']} drawings at first"
        assert first["buffer"] in first["text"], f"the picker's drawing does not name its buffer {first['buffer']!r}"
        new = next(o for o in first["options"] if o != first["buffer"])
        self.page.select_option(f"{root} select >> nth=1", new)
        deadline = time.time() + timeout
        now = state()
        while time.time() < deadline and not (new in now["text"] and now["images"] == 1):
            time.sleep(0.5)
            now = state()
        assert new in now["text"], f"after picking {new!r} the drawing still describes another buffer"
        assert now["images"] == 1, f"after picking {new!r} the picker shows {now['images']} drawings (it must replace)"
        return {"first": first["buffer"], "then": new, "images": now["images"]}

    def cuda_text(self, index: int) -> str:
        return self.page.evaluate(
            "(i) => document.querySelector(`[data-tl-inspector=\"${i}\"] .tl-source`).textContent", index)

    def inspector_text(self, index: int) -> str:
        return self.page.evaluate(
            "(i) => document.querySelector(`[data-tl-inspector=\"${i}\"]`).textContent", index)

    def change_control(self, index: int, timeout: float = 600) -> dict:
        """Pick another value in the inspector's first dropdown; wait until it has recompiled.

        Re-rendered = the CUDA tab's text changed, or the status line went through "compiling …"
        to "compiled"; and the dropdowns are enabled again.
        """
        info = self.inspectors()[index]
        sel = info["selects"][0]
        new = next(o for o in sel["options"] if o != sel["value"])
        before = self.cuda_text(index)
        root = f'[data-tl-inspector="{index}"]'
        self.page.evaluate(
            """(sel) => { const r = document.querySelector(sel); window.__tlSeen = [];
                 new MutationObserver(() => window.__tlSeen.push(r.textContent.includes('compiling') ? 'compiling' :
                   (r.textContent.includes('compiled') ? 'compiled' : '')))
                 .observe(r, {subtree: true, childList: true, characterData: true}); }""", root)
        self.page.select_option(f"{root} select >> nth=0", new)
        deadline = time.time() + timeout
        while time.time() < deadline:
            now = self.cuda_text(index)
            seen = self.page.evaluate("() => window.__tlSeen")
            text = self.inspector_text(index)
            enabled = not self.page.evaluate(
                "(sel) => [...document.querySelectorAll(sel + ' select')].some(s => s.disabled)", root)
            if enabled and "compiling" not in text and (now != before or ("compiling" in seen and "compiled" in text)):
                return {"control": sel["label"], "from": sel["value"], "to": new,
                        "cuda_changed": now != before, "status_compiled": "compiled" in text}
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: inspector {index} did not re-render after {sel['label']} -> {new}")

    def output_images(self) -> int:
        """Images drawn in cell outputs (matplotlib figures, charts), loaded and non-empty."""
        return self.page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img')]
            .filter(im => im.complete && im.naturalWidth > 0).length""")

    # -- screenshots ----------------------------------------------------------------------------
    def screenshot(self, path: Path, max_height: int = 16000) -> Path:
        """The whole notebook, top to bottom, in one PNG: the left sidebar is collapsed and the
        viewport grown to the notebook's height (JupyterLab scrolls inside a panel, so a plain
        full-page shot would show one screen). Capped at ``max_height`` pixels."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.evaluate("() => document.activeElement && document.activeElement.blur()")
        if self.page.is_visible("#jp-left-stack"):  # collapse the file browser: more room for the notebook
            self.page.click(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        scroller = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer"
        height = self.page.evaluate("""(sel) => {
            const p = document.querySelector(sel);
            if (!p) return document.body.scrollHeight;
            const cells = p.querySelectorAll('.jp-Cell');
            if (!cells.length) return p.scrollHeight;
            // up to the last cell's bottom (the notebook pads its end with a screen of white)
            const last = cells[cells.length - 1].getBoundingClientRect().bottom;
            return last - p.getBoundingClientRect().top + p.scrollTop + 40; }""", scroller)
        vp = self.page.viewport_size
        self.page.set_viewport_size({"width": vp["width"], "height": int(min(max_height, height + 120))})
        self.page.evaluate("(sel) => { const p = document.querySelector(sel); if (p) p.scrollTop = 0; }", scroller)
        time.sleep(1.5)  # let the re-layout settle
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size(vp)
        return path

    def element_screenshot(self, selector: str, path: Path) -> Path | None:
        el = self.page.query_selector(selector)
        if el is None:
            return None
        el.scroll_into_view_if_needed()
        el.screenshot(path=str(path))
        return path


def _kernel_idle(st: dict) -> bool:
    """A kernel is attached and idle: the status bar says "<kernel name> | Idle" and the
    toolbar's execution indicator agrees (it also reads "idle" before any kernel exists)."""
    kernel = st.get("kernel", "")
    return (kernel.endswith("| Idle") and not kernel.startswith("No Kernel")
            and st.get("indicator", "idle") == "idle")
