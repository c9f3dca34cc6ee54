"""An interactive layout explorer: pick a kernel, a buffer and the knobs; see its inferred layout.

    picker = layout_picker({"gemm accumulator": build_gemm, ...})

``catalogue`` maps a label to ``builder(threads, policy, dtype, arch) -> T.prim_func``; the
lesson that shows the picker passes its own kernels (this module knows none). Every change
recomputes layout inference (no nvcc) and *replaces* the previous drawing; the buffer dropdown
always names the buffer that is drawn.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .. import runtime
from .inference import LayoutInfo, infer_layouts
from .plots import plot_fragment, plot_shared_layout

POLICIES = ("Square", "FullRow", "FullCol")


def warp_policy(name):
    """``"FullCol"`` -> ``T.GemmWarpPolicy.FullCol`` (a policy object passes through)."""
    import tilelang.language as T

    if not isinstance(name, str):
        return name
    if name not in POLICIES:
        raise ValueError(f"unknown warp policy {name!r}; use 'Square', 'FullRow' or 'FullCol'")
    return getattr(T.GemmWarpPolicy, name)


class LayoutPicker:
    """The picker's state and drawing, usable without the widget (tests call :meth:`select`)."""

    def __init__(self, catalogue: dict[str, Callable[..., Any]], *, kernel: str | None = None,
                 threads: int = 256, policy: str = "FullCol", dtype: str = "float16",
                 arch: str | None = None, buffer: str | None = None, color_by: str = "warpgroup"):
        if not catalogue:
            raise ValueError("layout_picker needs at least one kernel in its catalogue")
        self.catalogue = dict(catalogue)
        self.state = dict(kernel=kernel or next(iter(self.catalogue)), threads=int(threads), policy=policy,
                          dtype=dtype, arch=arch or runtime.current_arch(), buffer=buffer, color_by=color_by)
        self._layouts = functools.lru_cache(maxsize=64)(self._infer)
        self.infos: dict[str, LayoutInfo] = {}
        self.select()

    def _infer(self, kernel, threads, policy, dtype, arch):
        if kernel not in self.catalogue:
            raise ValueError(f"unknown kernel {kernel!r}; choose one of {sorted(self.catalogue)}")
        return infer_layouts(self.catalogue[kernel](threads, policy, dtype, arch), arch=arch)

    def select(self, **changes) -> str | None:
        """Apply ``changes`` (kernel, threads, policy, dtype, arch, buffer, color_by); return the
        buffer that will be drawn: the requested one if this kernel has it, else its first fragment."""
        self.state.update(changes)
        s = self.state
        self.infos = self._layouts(s["kernel"], int(s["threads"]), s["policy"], s["dtype"], s["arch"])
        if s["buffer"] not in self.infos:
            fragments = [n for n, i in self.infos.items() if i.kind == "fragment"]
            s["buffer"] = (fragments or sorted(self.infos) or [None])[0]
        return s["buffer"]

    def figure(self):
        """(figure or None, one line saying what is drawn)."""
        name = self.state["buffer"]
        if name is None:
            return None, "layout inference chose no layouts for this kernel"
        info = self.infos[name]
        if info.kind == "fragment":
            if len(info.shape) != 2 or info.shape[0] * info.shape[1] > 256 * 1024:
                return None, f"{name}: {info.summary().splitlines()[0]} (not drawn: not a 2-D tile)"
            return plot_fragment(info, color_by=self.state["color_by"]), info.summary()
        return plot_shared_layout([info]), info.summary()


def layout_picker(catalogue: dict[str, Callable[..., Any]], **initial):
    """Show the picker (ipywidgets) for ``catalogue``; returns the :class:`LayoutPicker`.

    Without ipywidgets it draws the initial selection once, with its summary.
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    picker = LayoutPicker(catalogue, **initial)
    try:
        import ipywidgets as W
    except ImportError:
        fig, text = picker.figure()
        print(text)
        if fig is not None:
            display(fig)
            plt.close(fig)
        return picker

    s = picker.state
    controls = {
        "kernel": W.Dropdown(options=list(picker.catalogue), value=s["kernel"], description="kernel"),
        "buffer": W.Dropdown(options=sorted(picker.infos), value=s["buffer"], description="buffer"),
        "color_by": W.Dropdown(options=["thread", "warp", "warpgroup"], value=s["color_by"], description="colour"),
        "policy": W.Dropdown(options=list(POLICIES), value=s["policy"], description="policy"),
        "threads": W.Dropdown(options=[128, 256], value=s["threads"], description="threads"),
        "dtype": W.Dropdown(options=["float16", "bfloat16"], value=s["dtype"], description="dtype"),
        "arch": W.Dropdown(options=list(runtime.ACCEPTED_ARCHS), value=s["arch"], description="arch"),
    }
    out = W.Output()
    status = W.HTML()

    def draw():
        with out:
            out.clear_output(wait=True)       # one drawing at a time: the new one replaces the old
            fig, text = picker.figure()
            print(text)
            if fig is not None:
                display(fig)
                plt.close(fig)

    def on_change(change):
        owner = next(k for k, w in controls.items() if w is change["owner"])
        status.value = "<i>running layout inference…</i>"
        try:
            drawn = picker.select(**{owner: change["new"]})
        except Exception as exc:  # show why, keep the widget alive
            status.value = f"<span style='color:#b00'>{type(exc).__name__}: {exc}</span>"
            return
        buf = controls["buffer"]
        buf.unobserve(on_change, "value")       # the dropdown follows what is drawn
        buf.options = sorted(picker.infos)
        buf.value = drawn
        buf.observe(on_change, "value")
        status.value = ""
        draw()

    for w in controls.values():
        w.observe(on_change, "value")
    c = controls
    box = W.VBox([W.HBox([c["kernel"], c["buffer"], c["color_by"]]),
                  W.HBox([c["policy"], c["threads"], c["dtype"], c["arch"]]), status, out])
    box.add_class("tl-layout-picker")       # the browser tests find it by this class
    display(box)
    draw()
    picker.widgets = controls
    return picker
