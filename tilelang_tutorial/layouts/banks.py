"""Shared-memory bank conflicts, computed from a layout and an access pattern.

Shared memory has 32 banks of 4-byte words; a request is served in one pass only if no bank has
to deliver two different words. :func:`bank_conflicts` gives the conflict degree of every phase of
an :class:`AccessPattern` (:func:`row_reads`, :func:`ldmatrix_reads`, :func:`column_reads`) on a
layout (a :class:`~.inference.LayoutInfo` or a TileLang layout).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from .inference import BANK_BYTES, NUM_BANKS, WARP_SIZE, LayoutInfo, shared_info


@dataclass
class AccessPattern:
    """Simultaneous shared-memory reads, grouped as the hardware serves them.

    ``phases[k]`` is an ``(n, 2)`` array of the element coordinates ``(i, j)`` read by one
    memory transaction phase (at most 128 bytes: 8 threads x 16 bytes for vector loads, one
    8x8 matrix for ``ldmatrix``); ``grid`` arranges the phases for a heatmap.
    """

    name: str
    phases: list[np.ndarray]
    grid: tuple[int, int]
    description: str = ""
    row_label: str = ""
    col_label: str = ""


def row_reads(shape: Sequence[int], elem_bytes: int = 2, bytes_per_thread: int = 16) -> AccessPattern:
    """Each thread reads ``bytes_per_thread`` contiguous bytes along a row; threads cover the
    tile row by row; 8 consecutive threads (128 bytes) form one phase."""
    rows, cols = int(shape[-2]), int(shape[-1])
    vec = max(1, bytes_per_thread // elem_bytes)
    if cols % vec:
        raise ValueError(f"row width {cols} is not a multiple of the {vec}-element vector")
    per_phase = max(1, 128 // bytes_per_thread)
    chunks = [(i, c * vec) for i in range(rows) for c in range(cols // vec)]
    phases = []
    for k in range(0, len(chunks), per_phase):
        coords = [(i, j0 + v) for (i, j0) in chunks[k:k + per_phase] for v in range(vec)]
        phases.append(np.array(coords, dtype=np.int64))
    per_row = len(phases) // rows if len(phases) % rows == 0 else 0
    if per_row == 1 and rows % 8 == 0:
        grid, row_label, col_label = (rows // 8, 8), "8-row block", "row within the block (one request each)"
    elif per_row:
        grid, row_label, col_label = (rows, per_row), "row", "128-byte segment of the row"
    else:
        grid, row_label, col_label = (len(phases), 1), "phase", ""
    return AccessPattern(
        name="row reads",
        phases=phases,
        grid=grid,
        description=f"8 threads x {bytes_per_thread} B along a row per phase",
        row_label=row_label,
        col_label=col_label,
    )


def ldmatrix_reads(shape: Sequence[int], elem_bytes: int = 2) -> AccessPattern:
    """``ldmatrix``-style reads: one phase = one 8x8 matrix = 8 rows x 16 bytes, each of 8
    threads supplying one row address."""
    rows, cols = int(shape[-2]), int(shape[-1])
    vec = max(1, 16 // elem_bytes)
    if rows % 8 or cols % vec:
        raise ValueError(f"tile {rows}x{cols} is not a whole number of 8 x {vec} matrices")
    phases = []
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, vec):
            coords = [(r0 + r, c0 + v) for r in range(8) for v in range(vec)]
            phases.append(np.array(coords, dtype=np.int64))
    return AccessPattern(
        name="ldmatrix 8x8",
        phases=phases,
        grid=(rows // 8, cols // vec),
        description="8 rows x 16 B per phase (one 8x8 matrix of ldmatrix)",
        row_label="8-row block",
        col_label="16-byte column chunk",
    )


def column_reads(shape: Sequence[int], elem_bytes: int = 4) -> AccessPattern:
    """32 threads each read one element down a column (a transpose-style read)."""
    rows, cols = int(shape[-2]), int(shape[-1])
    phases = []
    for j in range(cols):
        for r0 in range(0, rows, WARP_SIZE):
            phases.append(np.array([(r0 + r, j) for r in range(min(WARP_SIZE, rows - r0))], dtype=np.int64))
    return AccessPattern(
        name="column reads",
        phases=phases,
        grid=(max(1, rows // WARP_SIZE), cols),
        description="32 threads x 1 element down a column",
        row_label="32-row block",
        col_label="column",
    )


def _offset_fn(layout) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Normalise what :func:`bank_conflicts` accepts into ``f(i, j) -> element offset``."""
    from tilelang.layout import Layout

    if isinstance(layout, LayoutInfo):
        table = layout.offset_2d()
        return lambda i, j: table[i, j]
    if isinstance(layout, np.ndarray):
        return lambda i, j: layout[i, j]
    if isinstance(layout, Layout):
        return _offset_fn(shared_info(layout))
    if callable(layout):
        return lambda i, j: np.asarray(layout(i, j), dtype=np.int64)
    raise TypeError(f"cannot use {type(layout).__name__} as a layout (give a LayoutInfo, Layout, array or f(i, j))")


def phase_conflict(byte_addresses: Iterable[int]) -> int:
    """The conflict degree of one phase: how many passes the 32 banks need to serve it (a pass: each bank delivers at most one 4-byte word).

    Each 4-byte word lives in bank ``(address // 4) % 32``.  Threads reading the *same* word are
    served together (broadcast); *different* words in one bank are served one after another, so
    the degree is the largest number of distinct words any bank must deliver (1 = conflict-free).
    """
    words = np.unique(np.asarray(list(byte_addresses), dtype=np.int64) // BANK_BYTES)
    if words.size == 0:
        return 0
    return int(np.bincount(words % NUM_BANKS, minlength=NUM_BANKS).max())


def bank_conflicts(layout, access_pattern: AccessPattern, elem_bytes: int | None = None) -> np.ndarray:
    """Conflict degree of every phase of ``access_pattern`` on a shared tile stored as ``layout``.

    ``layout`` is a :class:`LayoutInfo`, a TileLang ``Layout``, an offset table or a function
    ``f(i, j) -> element offset``; ``elem_bytes`` defaults to the layout's dtype (2 for fp16).
    Returns an integer array shaped ``access_pattern.grid`` (1 = conflict-free, 8 = 8-way).
    The buffer is assumed to start on a 128-byte boundary, as TileLang aligns shared buffers.
    """
    if elem_bytes is None:
        elem_bytes = layout.elem_bytes if isinstance(layout, LayoutInfo) else 2
    f = _offset_fn(layout)
    degrees = [phase_conflict(f(p[:, 0], p[:, 1]) * elem_bytes) for p in access_pattern.phases]
    return np.array(degrees, dtype=np.int64).reshape(access_pattern.grid)


def bank_map(layout, elem_bytes: int | None = None) -> np.ndarray:
    """The bank (0..31) of the first byte of every element of a 2-D shared tile."""
    if elem_bytes is None:
        elem_bytes = layout.elem_bytes if isinstance(layout, LayoutInfo) else 2
    if isinstance(layout, LayoutInfo):
        off = layout.offset_2d()
    elif isinstance(layout, np.ndarray):
        off = layout
    else:
        raise TypeError("bank_map needs a LayoutInfo or an offset table")
    return (off * elem_bytes // BANK_BYTES) % NUM_BANKS
