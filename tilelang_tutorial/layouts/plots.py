"""Pictures of layouts: fragment ownership, shared-memory placement, bank conflicts."""
from __future__ import annotations

import contextlib
from typing import Sequence

import numpy as np

from .banks import AccessPattern, bank_conflicts, bank_map
from .inference import BANK_BYTES, NUM_BANKS, WARP_SIZE, WARPGROUP_SIZE, LayoutInfo, fragment_info, shared_info

def _plt():
    import matplotlib.pyplot as plt

    return plt


def _as_fragment_info(obj, name: str | None = None) -> LayoutInfo:
    if isinstance(obj, LayoutInfo):
        return obj
    return fragment_info(obj, name=name or "fragment")


def plot_fragment(
    info,
    ax=None,
    color_by: str = "thread",
    annotate: bool | None = None,
    title: str | None = None,
    max_cells: int = 4096,
):
    """Who owns each element of a fragment.

    Colour = the owning thread (``color_by="thread"``), its warp (``"warp"``) or its warpgroup
    (``"warpgroup"``); text = ``T<thread>`` over ``r<register>`` when the tile is small enough
    to read (``annotate=None`` decides).  Replicated fragments show replica 0's owner and list
    every owner in the text.  Returns the matplotlib figure.
    """
    plt = _plt()
    info = _as_fragment_info(info)
    info._require_fragment()
    own = info.owner
    reg = info.register
    if own.ndim == 2:
        own, reg = own[:, None, :], reg[:, None, :]
    rows, cols = own.shape[1], own.shape[2]
    rel = own[0] - info.thread_offset
    if color_by == "thread":
        values, cmap, label = rel, "nipy_spectral", "thread (relative to the fragment's first)"
    elif color_by == "warp":
        values, cmap, label = rel // WARP_SIZE, "tab20", "warp"
    elif color_by == "warpgroup":
        values, cmap, label = rel // WARPGROUP_SIZE, "Set2", "warpgroup"
    else:
        raise ValueError("color_by must be 'thread', 'warp' or 'warpgroup'")
    norm = None
    if color_by != "thread":
        from matplotlib.colors import BoundaryNorm, ListedColormap

        n = int(values.max()) + 1
        base = plt.get_cmap(cmap)
        cmap = ListedColormap([base(k % base.N) for k in range(n)])
        norm = BoundaryNorm(np.arange(-0.5, n + 0.5), n)
    if annotate is None:
        annotate = rows * cols <= 256
    created = ax is None
    if created:
        w = min(16.0, max(4.0, cols * (0.55 if annotate else 0.08) + 1.5))
        h = min(12.0, max(2.5, rows * (0.45 if annotate else 0.08) + 1.2))
        fig, ax = plt.subplots(figsize=(w, h))
    else:
        fig = ax.figure
    if rows * cols > max_cells * 64:
        raise ValueError(f"{info.name} has {rows * cols} elements; too many to draw")
    im = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto" if cols > 4 * rows else "equal")
    if annotate:
        fs = 7 if cols <= 16 else 5
        for i in range(rows):
            for j in range(cols):
                t = "/".join(str(int(x)) for x in own[:, i, j])
                ax.text(j, i, f"T{t}\nr{int(reg[0, i, j])}", ha="center", va="center", fontsize=fs, color="black",
                        bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.55))
    ax.set_xlabel("column j")
    ax.set_ylabel("row i")
    ax.set_title(title or f"{info.name}: {info.threads} threads, {info.registers_per_thread} elements/thread"
                 + (f", replicate {info.replicate}" if info.replicate > 1 else ""), fontsize=10)
    cb = fig.colorbar(im, ax=ax, label=label, fraction=0.046, pad=0.02)
    if norm is not None:
        n = int(values.max()) + 1
        cb.set_ticks(list(range(0, n, max(1, n // 16))))
    if created:
        fig.tight_layout()
    return fig


def plot_with_tilelang(fragment, name: str = "fragment", directory: str = "figures/layouts") -> str:
    """Draw a (small) fragment with TileLang's own ``tilelang.tools.plot_layout``; returns the PNG path.

    TileLang's plot draws one inch per element, so it suits mma-sized fragments (16x16), not
    whole accumulators; use :func:`plot_fragment` for those.
    """
    import os

    from tilelang.tools import plot_layout

    if isinstance(fragment, LayoutInfo):
        fragment = fragment.layout
    shape = [int(s) for s in fragment.get_input_shape()]
    if len(shape) != 2 or shape[0] * shape[1] > 32 * 32:
        raise ValueError(f"plot_with_tilelang is for small 2-D fragments; {name} is {shape}")
    os.makedirs(directory, exist_ok=True)
    with contextlib.redirect_stdout(None):
        plot_layout(fragment, save_directory=directory, name=name, formats="png")
    return os.path.join(directory, f"{name}.png")


def _shared_pair(layouts) -> list[LayoutInfo]:
    if isinstance(layouts, (LayoutInfo,)):
        return [layouts]
    out = []
    for item in layouts:
        out.append(item if isinstance(item, LayoutInfo) else shared_info(item))
    return out


def plot_shared_layout(layouts, granularity: str = "chunk", annotate: bool | None = None, max_rows: int | None = 16):
    """Shared tiles side by side, showing where each piece of the logical tile physically lives.

    ``granularity="chunk"`` (default): one cell per logical 16-byte chunk (8 fp16 elements, the
    unit of a vector load and of an ``ldmatrix`` row); colour and number = the chunk's physical
    slot (0..7) inside its 128-byte line, i.e. which group of 4 banks serves it.  A plain tile
    shows 0..7 in every row; a swizzled one permutes the slots from row to row.
    ``granularity="element"``: one cell per element, colour = bank, number = physical offset.
    ``layouts``: one or several :class:`LayoutInfo` / ``Layout`` objects (e.g. plain and
    swizzled).  Only the first ``max_rows`` rows are drawn (the pattern repeats).
    """
    plt = _plt()
    infos = _shared_pair(layouts)
    fig, axes = plt.subplots(1, len(infos), figsize=(min(18, 6.5 * len(infos)), 4.8), squeeze=False)
    for ax, info in zip(axes[0], infos):
        off = info.offset_2d()
        if max_rows:
            off = off[:max_rows]
        eb = info.elem_bytes
        if granularity == "chunk":
            vec = max(1, 16 // eb)
            chunk_off = off[:, ::vec]
            values = (chunk_off * eb // 16) % 8
            text = values
            cmap, label, xlabel = "tab10", "physical 16-byte slot in its 128-byte line (banks 4s..4s+3)", "logical 16-byte chunk"
            norm = None
            from matplotlib.colors import BoundaryNorm, ListedColormap

            base = plt.get_cmap("tab10")
            cmap = ListedColormap([base(k) for k in range(8)])
            norm = BoundaryNorm(np.arange(-0.5, 8.5), 8)
        elif granularity == "element":
            values = (off * eb // BANK_BYTES) % NUM_BANKS
            text = off
            cmap, label, xlabel, norm = "hsv", "bank", "column j", None
        else:
            raise ValueError("granularity must be 'chunk' or 'element'")
        im = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
        rows, cols = values.shape
        annotate_here = (rows * cols <= 1100) if annotate is None else annotate
        if annotate_here:
            fs = 5 if cols > 32 else 8
            for i in range(rows):
                for j in range(cols):
                    ax.text(j, i, str(int(text[i, j])), ha="center", va="center", fontsize=fs,
                            rotation=90 if cols > 32 else 0)
        ax.set_title(f"{info.name}: {list(info.shape[-2:])} {info.dtype} (first {rows} rows)", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("row i")
        fig.colorbar(im, ax=ax, label=label, fraction=0.046, pad=0.02)
    fig.tight_layout()
    return fig


def plot_bank_conflicts(layouts, patterns: Sequence[AccessPattern], elem_bytes: int | None = None):
    """Heatmaps of the conflict degree of every phase, one row of panels per access pattern and
    one column per layout, with the degree printed in each cell.  Returns the figure."""
    plt = _plt()
    infos = _shared_pair(layouts)
    fig, axes = plt.subplots(len(patterns), len(infos), figsize=(min(18, 6 * len(infos)), 3.2 * len(patterns)), squeeze=False)
    vmax = 1
    results = [[bank_conflicts(info, p, elem_bytes) for info in infos] for p in patterns]
    for row in results:
        for d in row:
            vmax = max(vmax, int(d.max()))
    for r, (pattern, row) in enumerate(zip(patterns, results)):
        for c, (info, deg) in enumerate(zip(infos, row)):
            ax = axes[r][c]
            im = ax.imshow(deg, cmap="Reds", vmin=0, vmax=vmax, interpolation="nearest", aspect="auto")
            if deg.size <= 512:
                for (i, j), v in np.ndenumerate(deg):
                    ax.text(j, i, str(int(v)), ha="center", va="center", fontsize=8,
                            color="white" if v > vmax / 2 else "black")
            ax.set_title(f"{info.name}\n{pattern.name}: worst {int(deg.max())}-way", fontsize=10)
            ax.set_xlabel(pattern.col_label)
            ax.set_ylabel(pattern.row_label)
            from matplotlib.ticker import MaxNLocator

            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            fig.colorbar(im, ax=ax, label="passes per request (1 = conflict-free)", fraction=0.046, pad=0.02)
    fig.tight_layout()
    return fig


def plot_request_banks(reads: dict, request: int = 0, elem_bytes: int | None = None):
    """One warp request under several layouts: the bank each thread's element sits in.

    ``reads`` maps a label to a :class:`~.reads.SharedRead` (or any object with ``layout`` and
    ``pattern``); every panel shows request ``request`` of its pattern, one dot per element read,
    x = the element's position in the request (the thread, for one element per thread), y = its
    bank. Dots stacked in one bank at different words are the conflict. Returns the figure.
    """
    from .banks import _offset_fn, phase_conflict

    plt = _plt()
    fig, axes = plt.subplots(1, len(reads), figsize=(4.2 * len(reads), 3.4), sharey=True, squeeze=False)
    for ax, (label, read) in zip(axes[0], reads.items()):
        size = elem_bytes or read.layout.elem_bytes
        coords = read.pattern.phases[request]
        byte = np.asarray(_offset_fn(read.layout)(coords[:, 0], coords[:, 1]), dtype=np.int64) * size
        banks = byte // BANK_BYTES % NUM_BANKS
        ax.scatter(np.arange(len(banks)), banks, s=18, color="tab:red")
        distinct = len(np.unique(banks))
        ax.set_title(f"{label}: {phase_conflict(byte)}-way\n{distinct} different bank{'s' if distinct > 1 else ''}", fontsize=10)
        ax.set_xlabel("thread of the warp (one element each)")
        ax.set_ylim(-1, NUM_BANKS)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bank of the element it reads")
    fig.suptitle(f"one warp request ({reads[next(iter(reads))].pattern.name}, request {request}): "
                 "elements in one bank are served one pass each", fontsize=10)
    fig.tight_layout()
    return fig
