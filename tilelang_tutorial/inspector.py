"""KernelInspector: look inside a compiled TileLang kernel from a notebook.

    from tilelang_tutorial.inspector import inspect_kernel
    inspect_kernel(kernel, latency=lambda kernel, params: report.latency("gemm", where={...}))

Tabs: generated CUDA (highlighted), host code, PTX (compiled on demand), launch facts (grid,
threads, shared memory, registers/spills from ptxas) and the layouts TileLang inferred. A latency
panel draws the kernel's latency beside the torch reference and the roofline floor: measured when
the notebook runs on a GPU, recorded (with provenance) otherwise. Optional controls (block sizes,
stages, threads ...) recompile and refresh everything.

The inspector is displayed once: as the widget where widgets render (JupyterLab), and as its
plain-text summary and chart image where they cannot (a static render on GitHub or nbconvert),
from the same display output.
"""
from __future__ import annotations

import functools
import html
import io
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import runtime
from .report import LatencyReport


class NotAKernelError(TypeError):
    """The inspector was given something that is not a compiled TileLang kernel."""


def _require_kernel(kernel: Any) -> None:
    from tilelang.jit.kernel import JITKernel

    if not isinstance(kernel, JITKernel):
        hint = ""
        if callable(kernel) and not hasattr(kernel, "get_kernel_source"):
            hint = " (did you pass the kernel factory or the T.prim_func? compile it first, e.g. with tilelang_tutorial.compile_kernel)"
        raise NotAKernelError(
            f"KernelInspector needs a compiled TileLang kernel (tilelang JITKernel), got {type(kernel).__name__}{hint}"
        )


# --------------------------------------------------------------------------------------------
# Facts about a compiled kernel (all available without a GPU)
# --------------------------------------------------------------------------------------------

def kernel_source(kernel) -> str:
    """The generated CUDA, without TileLang's include preamble."""
    src = kernel.get_kernel_source()
    start = src.find('extern "C" __global__')
    return src[start:] if start >= 0 else src


def _kernel_names(kernel) -> list[str]:
    names = re.findall(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(', kernel.get_kernel_source())
    return list(dict.fromkeys(names))  # each kernel is declared, then defined


def launch_facts(kernel) -> dict[str, Any]:
    """Grid, threads, shared memory and launch bounds of a compiled kernel.

    ``threads_written`` is what the program asked for in ``T.Kernel(..., threads=)``;
    ``launch_bounds`` is what the generated kernel is launched with: on Hopper, warp
    specialization adds a producer warpgroup, so it can be larger.
    """
    from tvm.tirx import ForKind, stmt_functor

    grid: dict[str, str] = {}
    threads_written = None

    def visit(node):
        nonlocal threads_written
        if getattr(node, "kind", None) == ForKind.THREAD_BINDING and node.thread_binding is not None:
            tag = node.thread_binding.thread_tag
            if tag.startswith("blockIdx"):
                grid[tag] = str(node.extent)
        annotations = getattr(node, "annotations", None)
        if annotations is not None and "tl.launch_threads" in annotations:
            threads_written = [int(t) for t in annotations["tl.launch_threads"]]

    stmt_functor.post_order_visit(kernel.prim_func.body, visit)
    src = kernel.get_kernel_source()
    bounds = [int(b) for b in re.findall(r"__launch_bounds__\((\d+)", src)]
    facts: dict[str, Any] = {
        "kernels": _kernel_names(kernel),
        "arch": str(kernel.target.attrs.get("arch", "")),
        "grid": grid,
        "threads_written": threads_written,
        "launch_bounds": bounds,
        "dynamic_shared_bytes": dynamic_shared_bytes(kernel),
        "static_shared": re.findall(r"__shared__ __align__\(\d+\) (\w+ \w+\[\d+\])", src),
        "params": [f"{p.dtype}{list(p.shape)}" for p in kernel.params],
    }
    return facts


def dynamic_shared_bytes(kernel) -> list[str]:
    """Dynamic shared memory per kernel launch, read off the host code's launch arguments."""
    host = kernel.get_host_source()
    out = []
    for name in _kernel_names(kernel):
        m = re.search(rf"TVMFFIFunctionCall\({name}_packed, \(TVMFFIAny\*\) stack_ffi_any, (\d+),", host)
        if not m:
            continue
        nargs = int(m.group(1))
        prefix = host[: m.start()]
        values = re.findall(rf"\[{nargs - 1}\]\.v_int64\) = \(?(.+?)\)?;\n", prefix)
        if values and "extern __shared__" in kernel.get_kernel_source():
            out.append(values[-1].replace("(int64_t)", ""))
    return out


@functools.lru_cache(maxsize=64)
def _ptxas_usage(ptx: str, arch: str) -> dict[str, dict]:
    ptxas = shutil.which("ptxas") or (runtime.nvcc_path() or "").replace("nvcc", "ptxas")
    if not ptxas or not os.path.exists(ptxas):
        return {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", path, "-o", os.path.join(d, "k.cubin")],
                              capture_output=True, text=True, timeout=600)
    usage: dict[str, dict[str, int]] = {}
    current = None
    for line in proc.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = usage.setdefault(m.group(1), {})
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current is not None:
            current["spill_stores"], current["spill_loads"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
        # ptxas waits after every wgmma of a function it cannot pipeline (a C751x "Potential
        # Performance Loss"): one line, naming the function and why
        m = re.search(r"wgmma\.mma_async instructions are serialized due to (.*?)\s+in the function '(\w+)'", line)
        if m:
            usage.setdefault(m.group(2), {})["wgmma_serialized"] = re.sub(r"\s+", " ", m.group(1))
    return usage


def kernel_ptx(kernel) -> str:
    import logging

    logger = logging.getLogger("tilelang")
    level = logger.level
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        logger.setLevel(logging.WARNING)  # export_ptx logs the temporary path at INFO
        try:
            kernel.export_ptx(path)
        finally:
            logger.setLevel(level)
        with open(path) as f:
            return f.read()


def resource_usage(kernel) -> dict[str, dict]:
    """Registers per thread and spill bytes per kernel, from ``ptxas -v`` (no GPU needed); where
    ptxas serialized the kernel's ``wgmma`` (a wait after each), ``wgmma_serialized``: its reason.

    Note: on Hopper, ``setmaxnreg`` re-balances registers between warpgroups at run time; ptxas
    reports the per-thread allocation the kernel is launched with.
    """
    arch = str(kernel.target.attrs.get("arch", "sm_90a"))
    return _ptxas_usage(kernel_ptx(kernel), arch)


def inferred_layouts_text(kernel_or_program) -> str:
    """The fragment/shared layouts TileLang inferred, as text (see ``tilelang_tutorial.layouts``)."""
    try:
        from . import layouts
    except ImportError:
        return "(layout extraction is not available: tilelang_tutorial.layouts is missing)"
    program = getattr(kernel_or_program, "prim_func", kernel_or_program)
    arch = None
    target = getattr(kernel_or_program, "target", None)
    if target is not None:
        arch = str(target.attrs.get("arch", "")) or None
    try:
        return layouts.layouts_text(program, arch=arch)
    except Exception as exc:  # shown in the tab rather than breaking the notebook
        return f"(layout inference failed: {type(exc).__name__}: {exc})"


# --------------------------------------------------------------------------------------------
# The widget
# --------------------------------------------------------------------------------------------

def highlight_cuda(source: str) -> str:
    """CUDA as inline-styled HTML (works without CSS classes, so it survives static renders)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import CudaLexer

    body = highlight(source, CudaLexer(), HtmlFormatter(noclasses=True, nowrap=False))
    return f'<div class="tl-source" style="max-height:420px;overflow:auto;font-size:11px">{body}</div>'


class KernelInspector:
    """An ipywidgets view of a compiled kernel. ``.summary()`` is the plain-text fallback.

    Parameters
    ----------
    kernel: a compiled TileLang kernel (``tilelang.jit.kernel.JITKernel``).
    title: a heading.
    latency: a :class:`LatencyReport`, or a callable ``(kernel, params) -> LatencyReport`` that
        is called again after every recompile (measures on a GPU, looks up records otherwise).
    controls: ``{"block_M": [64, 128], "num_stages": [2, 3, 4], ...}``: dropdowns whose values
        are passed to ``rebuild(**values)`` to recompile.
    rebuild: ``(**values) -> kernel``; needed with ``controls``.
    initial: the control values the given kernel was built with.
    """

    def __init__(self, kernel, *, title: str | None = None,
                 latency: LatencyReport | Callable[[Any, dict], LatencyReport] | None = None,
                 controls: dict[str, Sequence[Any]] | None = None,
                 rebuild: Callable[..., Any] | None = None,
                 initial: dict[str, Any] | None = None):
        _require_kernel(kernel)
        if controls and rebuild is None:
            raise ValueError("controls need a rebuild(**values) function that recompiles the kernel")
        self.kernel = kernel
        self.title = title or ", ".join(_kernel_names(kernel)) or "kernel"
        self._latency_source = latency
        self.controls = dict(controls or {})
        self.rebuild = rebuild
        self.params = dict(initial or {k: v[0] for k, v in self.controls.items()})
        self.latency = self._resolve_latency()
        self._widget = None

    # -- data --------------------------------------------------------------------------------
    def _resolve_latency(self) -> LatencyReport:
        src = self._latency_source
        if src is None:
            return LatencyReport.unavailable("no latency given for this kernel")
        if callable(src) and not isinstance(src, LatencyReport):
            try:
                return src(self.kernel, dict(self.params))
            except Exception as exc:
                return LatencyReport.unavailable(f"could not get a latency: {type(exc).__name__}: {exc}")
        return src

    def facts(self) -> dict[str, Any]:
        facts = launch_facts(self.kernel)
        facts["registers"] = resource_usage(self.kernel)
        return facts

    def summary(self) -> str:
        """Plain-text summary: what a static render shows in place of the widget."""
        f = self.facts()
        lines = [f"== {self.title} ==", runtime.describe_mode()]
        lines.append(f"arch {f['arch']}; kernels: {', '.join(f['kernels'])}")
        lines.append(f"grid {f['grid']}; threads written {f['threads_written']}; "
                     f"launched with {f['launch_bounds']} threads")
        lines.append(f"dynamic shared memory {f['dynamic_shared_bytes'] or 'none'} bytes; "
                     f"static shared {f['static_shared'] or 'none'}")
        for name, use in f["registers"].items():
            lines.append(f"{name}: {use.get('registers')} registers/thread, "
                         f"spills {use.get('spill_stores', 0)} B stored / {use.get('spill_loads', 0)} B loaded"
                         + (f"; wgmma serialized by ptxas ({use['wgmma_serialized']})" if "wgmma_serialized" in use else ""))
        if self.params:
            lines.append("config " + ", ".join(f"{k}={v}" for k, v in self.params.items()))
        lines.append(self.latency.text())
        return "\n".join(lines)

    # -- widget ------------------------------------------------------------------------------
    def _facts_html(self) -> str:
        return "<pre style='font-size:11px'>" + html.escape(self.summary()) + "</pre>"

    def widget(self):
        import ipywidgets as W

        self._cuda = W.HTML(highlight_cuda(kernel_source(self.kernel)))
        self._host = W.HTML(highlight_cuda(self.kernel.get_host_source()))
        self._ptx = W.HTML("<i>PTX is produced on demand.</i>")
        ptx_button = W.Button(description="Show PTX", icon="file-code-o")
        ptx_button.on_click(lambda _b: self._show_ptx())
        self._facts = W.HTML(self._facts_html())
        self._layouts = W.HTML("<i>Inferred layouts are computed on demand.</i>")
        layout_button = W.Button(description="Infer layouts")
        layout_button.on_click(lambda _b: self._show_layouts())
        tabs = W.Tab(children=[self._cuda, self._host, W.VBox([ptx_button, self._ptx]), self._facts,
                               W.VBox([layout_button, self._layouts])])
        for i, name in enumerate(["CUDA", "Host code", "PTX", "Launch facts", "Layouts"]):
            tabs.set_title(i, name)
        self._tabs = tabs
        self._chart = W.Image(format="png", layout=W.Layout(max_width="560px"))
        self._latency_text = W.HTML()
        self._refresh_latency()
        self._status = W.HTML("")
        rows = []
        self._dropdowns = {}
        for name, options in self.controls.items():
            dd = W.Dropdown(options=list(options), value=self.params.get(name, list(options)[0]),
                            description=name, style={"description_width": "initial"},
                            layout=W.Layout(width="180px"))
            dd.observe(self._on_control, names="value")
            self._dropdowns[name] = dd
            rows.append(dd)
        self._progress = W.IntProgress(value=0, min=0, max=1, bar_style="info",
                                       layout=W.Layout(width="160px", visibility="hidden"))
        header = W.HTML(f"<b>{html.escape(self.title)}</b> &nbsp; <small>{html.escape(runtime.describe_mode())}</small>")
        controls_box = W.HBox(rows + [self._progress, self._status]) if rows else W.HBox([self._status])
        self._widget = W.VBox([header, controls_box, tabs,
                               W.HBox([self._chart, self._latency_text])])
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The widget where widgets render; its summary and chart as HTML and text elsewhere."""
        import base64

        bundle = {}
        try:
            widget = self._widget or self.widget()
            data = widget._repr_mimebundle_(include=include, exclude=exclude)
            bundle.update(data[0] if isinstance(data, tuple) else data)
        except ImportError:
            pass
        chart = ""
        if self.latency.bars:
            chart = f'<img src="data:image/png;base64,{base64.b64encode(self.latency.png()).decode()}"/>'
        bundle["text/html"] = f"<pre style='font-size:11px'>{html.escape(self.summary())}</pre>{chart}"
        bundle["text/plain"] = self.summary()
        return bundle

    def _refresh_latency(self):
        if self.latency.bars:
            self._chart.value = self.latency.png()
            self._chart.layout.display = None
        else:
            self._chart.layout.display = "none"
        self._latency_text.value = "<pre style='font-size:11px'>" + html.escape(self.latency.text()) + "</pre>"

    def _show_ptx(self):
        self._ptx.value = "<i>exporting PTX…</i>"
        ptx = kernel_ptx(self.kernel)
        self._ptx.value = ("<pre style='max-height:420px;overflow:auto;font-size:11px'>"
                           + html.escape(ptx) + "</pre>")

    def _show_layouts(self):
        self._layouts.value = "<i>running layout inference…</i>"
        text = inferred_layouts_text(self.kernel)
        self._layouts.value = "<pre style='max-height:420px;overflow:auto;font-size:11px'>" + html.escape(text) + "</pre>"

    def _on_control(self, change):
        self.params = {name: dd.value for name, dd in self._dropdowns.items()}
        self.recompile()

    def recompile(self, **values):
        """Rebuild with new control values (also callable without the widget)."""
        self.params.update(values)
        if self._widget is not None:
            for dd in self._dropdowns.values():
                dd.disabled = True
            self._progress.layout.visibility = "visible"
            self._progress.bar_style, self._progress.value = "info", 0
            self._status.value = "<i>compiling " + ", ".join(f"{k}={v}" for k, v in self.params.items()) + " …</i>"
        try:
            kernel = self.rebuild(**self.params)
            _require_kernel(kernel)
            self.kernel = kernel
            self.latency = self._resolve_latency()
            if self._widget is not None:
                self._cuda.value = highlight_cuda(kernel_source(kernel))
                self._host.value = highlight_cuda(kernel.get_host_source())
                self._ptx.value = "<i>PTX is produced on demand.</i>"
                self._layouts.value = "<i>Inferred layouts are computed on demand.</i>"
                self._facts.value = self._facts_html()
                self._refresh_latency()
                self._status.value = "<span style='color:green'>compiled</span>"
                self._progress.value, self._progress.bar_style = 1, "success"
        except Exception as exc:
            if self._widget is None:
                raise
            self._status.value = f"<span style='color:red'>{html.escape(type(exc).__name__ + ': ' + str(exc))[:400]}</span>"
            self._progress.bar_style = "danger"
        finally:
            if self._widget is not None:
                for dd in self._dropdowns.values():
                    dd.disabled = False
        return self.kernel



def inspect_kernel(kernel, **kwargs) -> KernelInspector:
    """Build a :class:`KernelInspector`, display it once, and return it."""
    from IPython.display import display

    inspector = KernelInspector(kernel, **kwargs)
    display(inspector)
    return inspector
