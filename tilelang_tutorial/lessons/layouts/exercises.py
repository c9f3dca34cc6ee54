"""Notebook 03's checks: of section 6's transpose (:func:`check_transpose`, one function for the
notebook and the mutation tests) and of its exercises, on shared-memory bank conflicts, predicted
and then removed in a kernel.

1. **Predict the conflict table** of a 32×32 fp16 tile (64-byte rows: two rows per 128-byte line)::

                          ldmatrix 8x8   column reads
       row-major          [ ?          , ?            ]
       swizzled           [ ?          , ?            ]

   Each entry is the *worst* conflict degree over all requests of that access pattern (1 =
   conflict-free, 32 = the request takes 32 passes). "swizzled" is the layout
   ``tilelang.layout.make_swizzled_layout`` picks for this buffer; ``ldmatrix 8x8`` reads 8 rows ×
   16 bytes per request, ``column reads`` are 32 threads each reading one fp16 element down a
   column. Call ``check_conflict_table([[a, b], [c, d]])``; nothing is compiled.

2. **A conflict-free fp32 transpose.** Repair the notebook's ``transpose_program`` for float32
   data (4-byte elements, where section 6 used fp16) so that reading ``A_shared`` down its columns
   is conflict-free (padding or a layout annotation: the reader's choice), and the kernel still
   transposes. ``check_transpose_layout(factory)`` counts the bank
   conflicts of the kernel's own read (:func:`tilelang_tutorial.layouts.shared_reads`, layout
   inference only) and runs it against torch on both of
   :data:`tilelang_tutorial.checks.RAGGED_SHAPES` (the GPU, or the emulator).

Solutions: ``solutions/`` in this lesson's folder; :func:`answer_button` shows an answer only when
the reader clicks for it.
"""
import numpy as np

from ... import checks, layouts
from ...layouts.banks import _offset_fn
from ...layouts.inference import BANK_BYTES, NUM_BANKS
from ...exercise_kit import ExerciseResult, not_attempted

TABLE_SHAPE = (32, 32)
ELEM_BYTES = 2  # fp16


def _layouts(shape):
    return {"row-major": layouts.row_major_info(shape, dtype="float16"), "swizzled": layouts.swizzled_info(shape, dtype="float16")}


def _patterns(shape):
    return {"ldmatrix 8x8": layouts.ldmatrix_reads(shape, elem_bytes=ELEM_BYTES),
            "column reads": layouts.column_reads(shape, elem_bytes=ELEM_BYTES)}


def conflict_maps(shape=TABLE_SHAPE) -> dict:
    """{(layout, pattern): the conflict degree of every request} for the exercise's tile."""
    lays, pats = _layouts(shape), _patterns(shape)
    return {(ln, pn): layouts.bank_conflicts(lay, pat) for ln, lay in lays.items() for pn, pat in pats.items()}


def explain_phase(layout, pattern, phase: int = 0, elem_bytes: int = ELEM_BYTES) -> str:
    """Why one request (phase) has the degree it has: which elements land in the most loaded bank."""
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
        return (f"request {phase}: no bank has to deliver two different 4-byte words "
                f"(e.g. bank {bank} serves only the word holding {shown}) -> 1-way")
    return (f"request {phase}: bank {bank} must deliver {len(ws)} different 4-byte words, holding elements "
            f"{shown} -> {len(ws)}-way")


def _as_grid(value, shape):
    """An int (every request) or a nested list shaped like the map -> an int array, else None."""
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
                res.passed(f"{ln:9} / {pn}: {actual.max()}-way (degrees over its requests: {sorted(set(actual.ravel().tolist()))})")
                continue
            wrong += 1
            worst = int(np.argmax(actual.ravel()))
            res.failed(f"{ln:9} / {pn}: you said {rows[r][c]!r}, bank_conflicts says worst {actual.max()}-way "
                       f"(degrees over its requests: {sorted(set(actual.ravel().tolist()))}). Why: "
                       + explain_phase(lays[ln], pats[pn], worst))
            said = np.max(guess)
            if said > actual.max():
                res.hint("fewer conflicts than you predicted: a 64-byte row is 16 banks, so two rows share each "
                         "128-byte line and the rows of one request spread over more banks than on a 64-wide tile")
            else:
                res.hint("more conflicts than you predicted: in the request above, count the different 4-byte "
                         "words that land in its busiest bank (rows 64 bytes apart repeat their banks every 2 rows"
                         + (", and the swizzle only permutes 16-byte chunks" if ln == "swizzled" else "") + ")")
    if not wrong:
        res.passed("the whole table matches tilelang_tutorial.layouts.bank_conflicts; "
                   "the next cell draws every request when you ask")
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 2: a conflict-free transpose
# ------------------------------------------------------------------------------------------------

#: the checked shapes: ragged in both dimensions for every block size (200 x 136 and 72 x 264), so a
#: block written to the wrong place, a grid that misses a partial tile or a missing bounds check shows up
TRANSPOSE_SHAPES = checks.RAGGED_SHAPES


def _starter_transpose(M, N, block=64, threads=128, dtype="float32"):
    raise NotImplementedError


def _row_stride(layout) -> int | None:
    """The row stride in elements if ``layout`` is row-major (padded or not), else None."""
    table = layout.offset_2d()
    stride = int(table[1, 0] - table[0, 0]) if table.shape[0] > 1 else table.shape[1]
    rows, cols = np.meshgrid(np.arange(table.shape[0]), np.arange(table.shape[1]), indexing="ij")
    return stride if np.array_equal(table, rows * stride + cols) else None


def _conflict_hint(read, allocated_shape) -> str:
    """Why this layout conflicts, from the measured degree and the layout itself."""
    elem = read.layout.elem_bytes
    stride = _row_stride(read.layout)
    tile_rows = max((int(ph[:, 0].max()) + 1 for ph in read.pattern.phases if len(ph)), default=0)
    if stride is not None:
        stride_bytes = stride * elem
        if allocated_shape and allocated_shape[0] > tile_rows >= 1 and stride_bytes % 128 == 0:
            return (f"A_shared is allocated {list(allocated_shape)}: the padding went on the first dimension "
                    f"(more rows), which leaves rows {stride_bytes} B apart; pad the second dimension (the row length)")
        if stride_bytes % 128 == 0:
            return (f"rows of A_shared are {stride_bytes} B apart, a multiple of 128 B (32 banks x 4 B), so element j "
                    f"of every row sits in the same bank and a warp reading 32 rows of one column needs "
                    f"{read.worst} passes; pad each row so that consecutive rows start in different banks")
        if stride_bytes % BANK_BYTES:
            return (f"rows are {stride_bytes} B apart, not a whole number of 4-byte words: pairs of rows still share "
                    f"banks ({read.worst}-way); make the stride a whole, odd number of words")
        words = stride_bytes // BANK_BYTES
        common = int(np.gcd(words, NUM_BANKS))
        return (f"rows are {words} words apart and {words} shares the factor {common} with 32, so rows r and "
                f"r + {NUM_BANKS // common} start in the same bank ({read.worst}-way); a stride that is an odd "
                f"number of words spreads 32 rows over all 32 banks")
    table = read.layout.offset_2d()
    if np.array_equal(table, layouts.swizzled_info(table.shape, dtype=read.layout.dtype).offset_2d()):
        return ("make_swizzled_layout's XOR swizzle moves each 16-byte chunk by row % 8: it is built for 8 "
                "consecutive rows (ldmatrix), but your warp reads 32 rows of one column, and rows r and r + 8 get "
                f"the same permutation ({read.worst}-way). Padding the rows is the fix for this access pattern")
    return f"the layout still sends {read.worst} different words of one request to one bank"


def _misplaced_blocks(out, a, block=64) -> str | None:
    """Name the transpose mistake the output shows, if it is a recognisable one."""
    import torch

    expected = a.T
    first = out[:block, :block]
    if torch.equal(first.to(a.dtype), a[:block, :block]) and not torch.equal(a[:block, :block], expected[:block, :block]):
        return "block (0, 0) of B holds A's block untransposed: read A_shared[j, i], not A_shared[i, j]"
    m, n = a.shape
    if out.shape == expected.shape:
        placed = torch.isnan(out.float()).any(dim=1)
        if placed.any() and torch.equal(out[:block, :block].to(a.dtype), expected[:block, :block]):
            return ("block (0, 0) is right but other blocks are unwritten or wrong: block (by, bx) of A must go to "
                    "block (bx, by) of B (swap the block offsets of the output copy)")
    return None


def _run_transposes(res: ExerciseResult, factory, dtype: str, first_kernel=None) -> ExerciseResult:
    """Compile ``factory(M, N)`` and check ``B == A.T`` exactly on every shape of
    :data:`TRANSPOSE_SHAPES` (``first_kernel``: the first shape's, already compiled)."""
    import torch

    from ... import runtime
    from ...exercise_kit import call_factory, compile_or_fail, run_and_compare
    from ..tiles.exercises import unwritten_transpose_hint

    device = runtime.mode().device
    for k, (M, N) in enumerate(TRANSPOSE_SHAPES):
        kernel = first_kernel if k == 0 and first_kernel is not None else None
        if kernel is None:
            program = call_factory(res, factory, (M, N), "a factory (M, N) -> T.prim_func: the transpose")
            kernel = None if program is None else compile_or_fail(res, program, runtime.current_arch())
            if kernel is None:
                return res
        a = checks.random_tensor((M, N), getattr(torch, dtype), device)
        b = checks.poisoned((N, M), getattr(torch, dtype), device)
        run_and_compare(res, kernel, (a, b), a.float().T, tolerance=0.0,
                        what=f"torch's A.T on a {M} x {N} {dtype} matrix (a multiple of no block size)",
                        hint_unwritten=unwritten_transpose_hint, extra_check=lambda out, a=a: _misplaced_blocks(out, a))
        if not res.ok:
            break
    return res


def check_transpose(factory, *, verbose: bool = True) -> ExerciseResult:
    """Check section 6's ``factory(M, N) -> T.prim_func`` (fp16, its default): ``B == A.T`` exactly,
    on both ragged shapes, outputs poisoned. Prints and returns the result."""
    res = _run_transposes(ExerciseResult(), factory, "float16")
    if verbose:
        print(res)
    return res


def check_transpose_layout(factory, *, verbose: bool = True) -> ExerciseResult:
    """Check ``factory(M, N) -> T.prim_func``: conflict-free column reads of its shared tile, and
    ``B == A.T`` on a ragged shape. Prints and returns the result."""
    res = _check_transpose(factory)
    if verbose:
        print(res)
    return res


def _check_transpose(factory) -> ExerciseResult:
    from ... import runtime
    from ...exercise_kit import call_factory, compile_or_fail, quiet_tilelang

    res = ExerciseResult()
    M, N = TRANSPOSE_SHAPES[0]
    program = call_factory(res, factory, (M, N), "a factory (M, N) -> T.prim_func: the transpose, with "
                           "A_shared laid out so that reading it down its columns is conflict-free")
    if program is None:
        return res
    from ...exercise_kit import param_specs

    dtypes = [dtype for _, dtype in param_specs(program)]
    if dtypes[:1] != ["float32"]:
        return res.failed(f"A is {dtypes[0] if dtypes else '?'}: this exercise is the float32 transpose (4-byte "
                          "elements); make float32 the factory's default dtype")
    try:
        with quiet_tilelang():
            reads = layouts.shared_reads(program)
    except Exception as exc:  # the reader's kernel: report, never crash the notebook
        return res.failed(f"layout inference rejected the kernel: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}")
    if not reads:
        return res.failed("found no element-wise read of a shared buffer into a fragment (like B_tile[i, j] = "
                          "A_shared[j, i] in a T.Parallel loop): keep the transpose's read loop")
    allocated = {}
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    post_order_visit(program.body, lambda node: allocated.update({b.name: [int(x) for x in b.shape] for b in node.alloc_buffers})
                     if isinstance(node, tirx.SBlock) else None)
    for read in reads:
        shape = allocated.get(read.shared)
        size = int(np.prod(shape)) * read.layout.elem_bytes if shape else 0
        if read.worst == 1:
            res.passed(f"{read.expression}: all {read.degrees.size} warp requests conflict-free (1 pass each); "
                       f"{read.shared} {shape} takes {size:,} B of shared memory")
        else:
            worst = int(np.argmax(read.degrees.ravel()))
            res.failed(f"{read.expression}: worst {read.worst}-way bank conflict ({read.worst} passes per warp request). "
                       + explain_phase(read.layout, read.pattern, worst, read.layout.elem_bytes))
            res.hint(_conflict_hint(read, shape))
    arch = runtime.current_arch()
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    _run_transposes(res, factory, "float32", first_kernel=kernel)
    if res.ok and not runtime.mode().can_run:
        res.skipped("NOT CHECKED here: the emulator runs your program's logic, not its shared-memory addressing "
                    "(padding and swizzles are invisible to it); on a GPU this check runs the compiled kernel")
    res.skipped("NOT CHECKED: the time the conflicts cost needs a GPU: the notebook's timing cell times the "
                "transpose with and without your layout (or read Nsight Compute's shared-memory bank-conflict counter)")
    return res


# ------------------------------------------------------------------------------------------------
# Answers on request
# ------------------------------------------------------------------------------------------------

def show_answer(exercise: str) -> None:
    """Print the reference answer of ``exercise`` ("conflict_table" or "transpose_layout"): the
    solution file of this lesson's folder (for :func:`answer_button`; never call it before trying)."""
    from pathlib import Path

    path = Path(__file__).with_name("solutions") / f"{exercise}.py"
    if not path.exists():
        raise ValueError(f"no answer named {exercise!r}; use 'conflict_table' or 'transpose_layout'")
    print(path.read_text())


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
