"""Notebook 03's exercises: reason about shared-memory bank conflicts before you measure them.

Both run entirely on the CPU (nothing is compiled or launched): the checker computes the answer
with :func:`tilelang_tutorial.layouts.bank_conflicts`, the same function behind the notebook's
plots, and when you are wrong it shows *which rows collide in which bank* for one phase.

1. **Predict the conflict table** of a 32×32 fp16 tile (64-byte rows: two rows per 128-byte line)::

                          ldmatrix 8x8   column reads
       row-major          [ ?          , ?            ]
       swizzled           [ ?          , ?            ]

   Each entry is the *worst* conflict degree over all phases of that access pattern
   (1 = conflict-free, 32 = every thread waits for every other). "swizzled" is the layout
   ``tilelang.layout.make_swizzled_layout`` picks for this buffer; ``ldmatrix 8x8`` reads 8 rows ×
   16 bytes per phase, ``column reads`` are 32 threads each reading one fp16 element down a
   column. Call ``check_conflict_table([[a, b], [c, d]])``; a nested list of the full per-phase
   maps (shaped like ``bank_conflicts`` returns them) is accepted too.

2. **Choose the padding.** The 64×64 fp16 tile of the notebook, row-major, with ``pad`` extra
   elements at the end of each row. Find (a) the smallest ``pad`` that makes *column reads*
   conflict-free, and (b) the smallest ``pad`` that makes ``ldmatrix`` reads conflict-free while
   every row still starts on a 16-byte boundary (``ldmatrix`` and 16-byte vector copies need
   that). Call ``check_padding(column_pad=..., ldmatrix_pad=...)``.

Solutions: ``solutions/conflict_table.py`` and ``solutions/padding.py`` in this lesson's folder.
:func:`answer_button` keeps an answer (a plot) hidden until the reader clicks for it.
"""
import numpy as np

from ... import layouts
from ...layouts.banks import _offset_fn
from ...layouts.inference import BANK_BYTES, NUM_BANKS
from ...exercise_kit import ExerciseResult, not_attempted

TABLE_SHAPE = (32, 32)
PAD_SHAPE = (64, 64)
ELEM_BYTES = 2  # fp16
MAX_PAD = 64


def _layouts(shape):
    return {"row-major": layouts.row_major_info(shape, dtype="float16"), "swizzled": layouts.swizzled_info(shape, dtype="float16")}


def _patterns(shape):
    return {"ldmatrix 8x8": layouts.ldmatrix_reads(shape, elem_bytes=ELEM_BYTES),
            "column reads": layouts.column_reads(shape, elem_bytes=ELEM_BYTES)}


def conflict_maps(shape=TABLE_SHAPE) -> dict:
    """{(layout, pattern): per-phase conflict degrees} for the exercise's tile."""
    lays, pats = _layouts(shape), _patterns(shape)
    return {(ln, pn): layouts.bank_conflicts(lay, pat) for ln, lay in lays.items() for pn, pat in pats.items()}


def explain_phase(layout, pattern, phase: int = 0, elem_bytes: int = ELEM_BYTES) -> str:
    """Why one phase has the degree it has: which elements land in the most loaded bank."""
    coords = pattern.phases[phase]
    f = _offset_fn(layout)
    byte = np.asarray(f(coords[:, 0], coords[:, 1]), dtype=np.int64) * elem_bytes
    words = byte // BANK_BYTES
    banks = words % NUM_BANKS
    per_bank = {}
    for (i, j), w, b in zip(coords.tolist(), words.tolist(), banks.tolist()):
        per_bank.setdefault(b, {}).setdefault(w, []).append((i, j))
    bank, ws = max(per_bank.items(), key=lambda kv: len(kv[1]))
    firsts = [els[0] for _, els in sorted(ws.items())]
    shown = ", ".join(f"({i},{j})" for i, j in firsts[:8]) + (" ..." if len(firsts) > 8 else "")
    if len(ws) == 1:
        return (f"phase {phase}: no bank has to deliver two different 4-byte words "
                f"(e.g. bank {bank} serves only the word holding {shown}) -> 1-way")
    return (f"phase {phase}: bank {bank} must deliver {len(ws)} different 4-byte words, holding elements "
            f"{shown} -> {len(ws)}-way")


def _as_grid(value, shape):
    """An int (every phase) or a nested list shaped like the map -> an int array, else None."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return np.full(shape, int(value), dtype=np.int64)
    try:
        arr = np.asarray(value, dtype=np.int64)
    except (TypeError, ValueError):
        return None
    return arr if arr.shape == tuple(shape) else None


def check_conflict_table(prediction, *, verbose: bool = True) -> ExerciseResult:
    """Check ``[[row-major ldmatrix, row-major column], [swizzled ldmatrix, swizzled column]]``."""
    res = _check_table(prediction)
    if verbose:
        print(res)
    return res


def _check_table(prediction) -> ExerciseResult:
    res = ExerciseResult(cpu_only=True)
    what = ("fill [[row-major ldmatrix, row-major column reads], [swizzled ldmatrix, swizzled column reads]] "
            "with the worst conflict degree of each (1 = conflict-free)")
    if prediction is None:
        return not_attempted(res, what)
    try:
        rows = [list(r) for r in prediction]
    except TypeError:
        return res.failed(f"expected a 2x2 nested list, got {type(prediction).__name__}; {what}")
    if len(rows) != 2 or any(len(r) != 2 for r in rows):
        return res.failed(f"expected 2 rows of 2 entries (layouts x access patterns), got {prediction!r}")
    if any(v is None or v is ... for r in rows for v in r):
        return not_attempted(res, what)
    maps = conflict_maps()
    lays, pats = _layouts(TABLE_SHAPE), _patterns(TABLE_SHAPE)
    wrong = 0
    for r, ln in enumerate(lays):
        for c, pn in enumerate(pats):
            actual = maps[(ln, pn)]
            guess = _as_grid(rows[r][c], actual.shape)
            if guess is None:
                res.failed(f"{ln:9} / {pn}: give one number (the worst degree) or a {actual.shape} grid; got {rows[r][c]!r}")
                wrong += 1
                continue
            if (guess == actual).all() or (np.ndim(rows[r][c]) == 0 and int(rows[r][c]) == actual.max()):
                res.passed(f"{ln:9} / {pn}: {actual.max()}-way (every phase: {sorted(set(actual.ravel().tolist()))})")
                continue
            wrong += 1
            worst = int(np.argmax(actual.ravel()))
            res.failed(f"{ln:9} / {pn}: you said {rows[r][c]!r}, bank_conflicts says worst {actual.max()}-way "
                       f"(phase degrees {sorted(set(actual.ravel().tolist()))}). Why: "
                       + explain_phase(lays[ln], pats[pn], worst))
    if not wrong:
        res.passed("the whole table matches tilelang_tutorial.layouts.bank_conflicts; "
                   "the next cell draws every phase when you ask")
    else:
        res.lines.append("   hint: a row is 64 bytes = 16 banks, so rows i and i + 2 start in the same bank; "
                         "the swizzle XORs each 16-byte chunk's position with bits of the row index")
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 2: padding
# ------------------------------------------------------------------------------------------------

def worst_with_pad(pad: int, pattern: str, shape=PAD_SHAPE) -> int:
    lay = layouts.row_major_info(shape, dtype="float16", pad=pad)
    pat = _patterns(shape)[pattern]
    return int(layouts.bank_conflicts(lay, pat).max())


def smallest_pad(pattern: str, aligned: bool, shape=PAD_SHAPE) -> int:
    step = 16 // ELEM_BYTES if aligned else 1
    for pad in range(0, MAX_PAD + 1, step):
        if worst_with_pad(pad, pattern, shape) == 1:
            return pad
    raise RuntimeError("no padding up to MAX_PAD is conflict-free")


def check_padding(column_pad=None, ldmatrix_pad=None, *, verbose: bool = True) -> ExerciseResult:
    """Check the smallest paddings (in fp16 elements per row of a 64x64 tile); prints and returns."""
    res = _check_padding(column_pad, ldmatrix_pad)
    if verbose:
        print(res)
    return res


def _check_one(res, pad, pattern, aligned, label):
    if pad is None:
        return not_attempted(res, f"give {label} (an int: extra fp16 elements per row)")
    if not isinstance(pad, (int, np.integer)) or isinstance(pad, bool) or pad < 0:
        return res.failed(f"{label} must be a non-negative int, got {pad!r}")
    rows, cols = PAD_SHAPE
    stride_bytes = (cols + pad) * ELEM_BYTES
    cost = f"{pad * rows * ELEM_BYTES} B more shared memory ({pad / cols:.1%})"
    if aligned and stride_bytes % 16:
        return res.failed(f"{label} = {pad}: rows would be {stride_bytes} B apart, not a multiple of 16, so row "
                          f"starts are not 16-byte aligned: ldmatrix and 16-byte copies need aligned rows")
    worst = worst_with_pad(pad, pattern)
    best = smallest_pad(pattern, aligned)
    lay = layouts.row_major_info(PAD_SHAPE, dtype="float16", pad=pad)
    pat = _patterns(PAD_SHAPE)[pattern]
    if worst != 1:
        deg = layouts.bank_conflicts(lay, pat).ravel()
        return res.failed(f"{label} = {pad}: rows {stride_bytes} B apart, {pattern} still {worst}-way. Why: "
                          + explain_phase(lay, pat, int(np.argmax(deg))))
    if pad != best:
        return res.failed(f"{label} = {pad} is conflict-free ({cost}) but not the smallest: a smaller padding "
                          f"also works. Think in 4-byte words: which row stride (in words) spreads 32 rows "
                          f"over 32 banks?" if not aligned else
                          f"{label} = {pad} is conflict-free ({cost}) but not the smallest aligned one")
    res.passed(f"{label} = {pad}: rows {stride_bytes} B apart = {stride_bytes // 4} words, {pattern} conflict-free; "
               f"costs {cost}")
    return res


def _check_padding(column_pad, ldmatrix_pad) -> ExerciseResult:
    res = ExerciseResult(cpu_only=True)
    _check_one(res, column_pad, "column reads", False, "column_pad")
    _check_one(res, ldmatrix_pad, "ldmatrix 8x8", True, "ldmatrix_pad")
    if res.ok:
        res.lines.append("   note: padding breaks the dense layout TMA and wgmma expect; that is why TileLang swizzles instead")
    return res


# ------------------------------------------------------------------------------------------------
# Answers on request
# ------------------------------------------------------------------------------------------------

def answer_button(draw, label: str = "Show the answer"):
    """A button that calls ``draw()`` (which draws or prints the answer) into an output area only
    when clicked, so "Run All" and a static render never show the answer. Without ipywidgets it
    draws nothing and says to call ``draw()`` by hand. Returns the button (or None)."""
    try:
        import ipywidgets as widgets
        from IPython.display import display
    except ImportError:
        name = getattr(draw, "__name__", "the drawing function")
        print(f"(ipywidgets is not installed: call {name}() yourself once you have predicted)")
        return None
    button = widgets.Button(description=label, button_style="info")
    out = widgets.Output()

    def on_click(_):
        with out:
            out.clear_output(wait=True)
            draw()

    button.on_click(on_click)
    display(widgets.VBox([button, out]))
    return button
