"""Notebook 01's checks: of its kernel cells and of its exercises, one function each, used by the
notebook and by the mutation tests (``lessons/tiles/mutants.py``) alike.

Kernel cells: ``check_scale_copy(factory)`` (``Y = alpha * X`` with ``alpha`` drawn at random, on
both of :data:`tilelang_tutorial.checks.RAGGED_SHAPES`) and ``check_row_sum(factory)`` (fp32 row
sums on the same shapes).

1. **Row max** (the row-sum kernel's sibling). Write ``factory(N, dtype)`` returning a
   ``T.prim_func`` with two parameters::

       X:   T.Tensor((M, N), dtype)     # M = T.dynamic("M")
       Out: T.Tensor((M,), "float32")   # Out[i] = max_j X[i, j]

   then ``check_row_max(factory)``. The checker runs it with N = 1000 (a ragged last tile for
   every power-of-two block) on rows of which every third is entirely negative, with maxima from
   -2 down to -3e4 (:func:`tilelang_tutorial.checks.negative_rows`), so no start value above -inf
   (0, -1, -2, -1e4) and no fill value of the last tile's missing columns but -inf can pass. When
   values are wrong it names the symptom it measured: all-negative rows reported as one and the
   same value above their true max (then it also runs N = 1024, where no tile is partial, to tell
   a start value from the fill value of the last tile), results above the true max (tiles' maxima
   added), below it (a tile's max replaced the running max), or NaN written (the running max read
   before it was set).

2. **Tiled transpose.** Write ``factory(M, N, dtype)`` returning a ``T.prim_func`` with::

       A: T.Tensor((M, N), dtype)
       B: T.Tensor((N, M), dtype)       # B = A^T

   then ``check_transpose(factory)``. The checker reads the generated CUDA: A must be *loaded*
   with 16-byte vectors and B *stored* whole rows at a time (16-byte vectors, or the bulk copy of a
   shared tile that TileLang emits for ``T.copy(shared, global)`` on Hopper, notebook 02's TMA);
   then it runs the kernel on both of :data:`tilelang_tutorial.checks.RAGGED_SHAPES` (200 x 136
   and 72 x 264: multiples of no block, one tall, one wide), so a grid of ``N // block`` blocks or
   swapped block indices leave part of B unwritten.

Every factory may also be an eager ``@tilelang.jit`` function (``T.const`` sizes): the checker
builds its program for the checked sizes through :mod:`tilelang_tutorial.eager`.

Solutions: ``solutions/row_max.py`` and ``solutions/transpose.py`` in this lesson's folder.
"""
import re

from ... import checks, eager, runtime
from ...exercise_kit import ExerciseResult, call_factory, compile_or_fail, kernel_source, param_specs, run_and_compare

DEFAULT_N = 1000  # a partial last tile for every power-of-two block of 16 columns or more
EXACT_N = 1024    # a multiple of every power-of-two block up to 1024: no partial tile
TRANSPOSE_SHAPES = checks.RAGGED_SHAPES


# ------------------------------------------------------------------------------------------------
# The kernel cells: copy-and-scale, row sum
# ------------------------------------------------------------------------------------------------

def check_scale_copy(factory, *, shapes=checks.RAGGED_SHAPES, alpha: float | None = None, dtype: str = "float16",
                     arch: str | None = None, verbose: bool = True) -> ExerciseResult:
    """Check ``factory(N)`` (or the eager kernel) for ``Y = alpha * X``: on every shape of ``shapes``
    (ragged in both dimensions), ``alpha`` drawn at random (:func:`checks.random_scalar`) so a
    kernel that ignores it cannot pass, outputs poisoned. Prints and returns the result."""
    import torch

    from .scale_copy import scale_copy_reference

    alpha = checks.random_scalar() if alpha is None else alpha
    arch = arch or runtime.current_arch()
    res = ExerciseResult()
    dev = runtime.mode().device
    for M, N in shapes:
        build = eager.factory(factory, ("N",), M=M, dtype=dtype) if eager.is_eager(factory) else \
            (lambda n: factory(n, dtype=dtype))
        program = call_factory(res, build, (N,), "a factory N -> T.prim_func(X: (M, N), Y: (M, N), alpha: float32)")
        if program is None:
            break
        kernel = compile_or_fail(res, program, arch)
        if kernel is None:
            break
        x = checks.random_tensor((M, N), getattr(torch, dtype), dev)
        y = checks.poisoned((M, N), getattr(torch, dtype), dev)
        run_and_compare(res, kernel, (x, y, alpha), scale_copy_reference(x, alpha), out=y,
                        tolerance=checks.TOLERANCE[dtype], what=f"alpha * x with alpha = {alpha} (drawn at random) on {M} x {N}",
                        hint_unwritten="some tiles were never written: the grid must cover the ragged edges "
                                       "(T.ceildiv(N, block_N) x T.ceildiv(M, block_M) blocks, bx walking columns, "
                                       "by rows)",
                        hint_wrong="compare the kernel's scale with the reference's: the kernel must multiply by its "
                                   "alpha argument (the check draws it at random), not a value typed in")
        if not res.ok:
            break
    if verbose:
        print(res)
    return res


def check_row_sum(factory, *, shapes=checks.RAGGED_SHAPES, dtype: str = "float16", arch: str | None = None,
                  verbose: bool = True) -> ExerciseResult:
    """Check ``factory(N)`` for fp32 row sums ``S[i] = sum_j X[i, j]`` on every shape of ``shapes``
    (ragged in both dimensions: a partial last tile of rows and of columns), outputs poisoned.
    Prints and returns the result."""
    import torch

    from .row_sum import row_sum_reference

    arch = arch or runtime.current_arch()
    res = ExerciseResult()
    dev = runtime.mode().device
    for M, N in shapes:
        program = call_factory(res, lambda n: factory(n, dtype=dtype), (N,),
                               "a factory N -> T.prim_func(X: (M, N), S: (M,) float32)")
        if program is None:
            break
        kernel = compile_or_fail(res, program, arch)
        if kernel is None:
            break
        x = checks.random_tensor((M, N), getattr(torch, dtype), dev)
        s = checks.poisoned((M,), torch.float32, dev)
        run_and_compare(res, kernel, (x, s), row_sum_reference(x), tolerance=1e-5, what=f"fp64 row sums on {M} x {N}",
                        hint_unwritten="some rows were never written: the grid needs T.ceildiv(M, block_M) blocks",
                        hint_wrong="every column tile must be added to the running total (total[i] += part[i]), "
                                   "which starts at 0 (T.clear)")
        if not res.ok:
            break
    if verbose:
        print(res)
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 1: row max
# ------------------------------------------------------------------------------------------------


def row_max_reference(x):
    return x.float().amax(dim=1)


def row_max_input(M: int, N: int, dtype: str, device: str):
    """Fresh random rows, every third one entirely negative with its max between -2 and -3e4
    (:func:`checks.negative_rows`): far below every start or fill value but -inf."""
    import torch

    x = checks.random_tensor((M, N), getattr(torch, dtype), device)
    x[::3] = checks.negative_rows(x[::3].shape, x.dtype, device)
    return x


def check_row_max(factory, *, N: int = DEFAULT_N, M: int = 777, dtype: str = "float16",
                  arch: str | None = None, verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(N, dtype)`` for ``Out[i] = max_j X[i, j]``; prints and returns the result."""
    if eager.is_eager(factory):
        factory = eager.factory(factory, ("N", "dtype"), M=M)
    res = _check_row_max(factory, N, M, dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _run_row_max(kernel, M, N, dtype):
    """Out of ``kernel`` on fresh :func:`row_max_input` rows, and the reference."""
    import torch

    dev = runtime.mode().device
    x = row_max_input(M, N, dtype, dev)
    out = checks.poisoned((M,), torch.float32, dev)
    runtime.run(kernel, x, out)
    return out, row_max_reference(x)


def _row_max_symptom(got, ref, factory, M, dtype, arch) -> str | None:
    """What the wrong values look like, and the mistake that gives that look."""
    import torch

    got, ref = got.float().cpu(), ref.float().cpu()
    nan = int(torch.isnan(got).sum())
    if nan:
        return (f"the kernel wrote NaN in {nan} of {got.numel()} rows: the running max was read before it was set "
                f"(start it with T.fill(best, -T.infinity(\"float32\")) before the loop)")
    negative = ref < 0
    tol = 1e-6 * ref.abs().clamp(min=1)
    above = int(((got > ref + tol) & ~negative).sum())
    below = int(((got < ref - tol) & ~negative).sum())
    if above:
        return (f"Out is larger than the true row max in {above} of {int((~negative).sum())} rows whose max is positive: "
                f"the tiles' maxima were added (+=) instead of combined with T.max(best[i], part[i])")
    if below:
        return (f"Out is smaller than the true row max in {below} rows whose max is positive: some columns never "
                f"counted -- each tile's max replaced the running max (best[i] = part[i]) instead of "
                f"best[i] = T.max(best[i], part[i]), or the loop stops before the last tile")
    wrong = got != ref
    stuck = got[wrong].unique()
    if len(stuck) == 1 and bool((wrong <= negative).all()) and bool((got[wrong] > ref[wrong]).all()):
        # every wrong row is an all-negative row reported as one value above its true max: the
        # running max's start value, or the fill value of a partial last tile's missing columns.
        # At N = 1024 there is no partial tile.
        value, count = float(stuck[0]), int(wrong.sum())
        exact, exact_value = _exact_n_result(factory, M, dtype, arch)
        if exact == "right":
            return (f"the {count} rows whose true max is below {value:g} came out as exactly {value:g} at N = {DEFAULT_N}, "
                    f"but every row is right at N = {EXACT_N}, where no tile is partial: the last, partial tile's "
                    f"out-of-bounds columns were read as {value:g} and won the max. Mask them with a value below "
                    f"every value as you load: T.if_then_else(k * block_N + j < N, value, -T.infinity(\"float32\"))")
        if exact == "stuck" and exact_value == value:
            return (f"the {count} rows whose true max is below {value:g} came out as exactly {value:g}, also at "
                    f"N = {EXACT_N} where no tile is partial: the running max's start value is {value:g}, above "
                    f"the max of those rows. Start below every value: T.fill(best, -T.infinity(\"float32\"))")
        return (f"the {count} rows whose true max is below {value:g} came out as exactly {value:g}: either the running "
                f"max starts at {value:g} or the last tile's out-of-bounds columns hold {value:g}; both must be -inf")
    rows = wrong.nonzero().flatten()[:5].tolist()
    return f"first wrong rows: {rows} (got {[round(float(got[i]), 4) for i in rows]}, want {[round(float(ref[i]), 4) for i in rows]})"


def _exact_n_result(factory, M, dtype, arch) -> tuple[str, float | None]:
    """("right", None), ("stuck", v) (every wrong row an all-negative row reported as v, above its
    max) or ("other", None), for the factory at N = 1024."""
    from ...exercise_kit import quiet_tilelang

    try:
        with quiet_tilelang():
            kernel = runtime.compile_kernel(factory(EXACT_N, dtype), arch=arch)
            got, ref = _run_row_max(kernel, M, EXACT_N, dtype)
    except Exception:
        return "other", None
    got, ref = got.float().cpu(), ref.float().cpu()
    if checks.compare(got, ref, tolerance=1e-6).ok:
        return "right", None
    wrong = got != ref
    stuck = got[wrong].unique()
    if len(stuck) == 1 and bool((ref[wrong] < 0).all()) and bool((got[wrong] > ref[wrong]).all()):
        return "stuck", float(stuck[0])
    return "other", None


def _check_row_max(factory, N, M, dtype, arch) -> ExerciseResult:
    res = ExerciseResult()
    program = call_factory(res, factory, (N, dtype),
                           "write factory(N, dtype) returning a T.prim_func(X: (M, N), Out: (M,) float32)")
    if program is None:
        return res
    specs = param_specs(program)
    if len(specs) != 2:
        return res.failed(f"the kernel must take 2 parameters (X, Out); yours takes {len(specs)}: {specs}")
    (xs, xd), (os_, od) = specs
    if xs is None or len(xs) != 2 or xs[1] != N or xd != dtype:
        return res.failed(f"X must be a (M, {N}) {dtype} tensor; got shape {xs} dtype {xd}")
    if os_ is None or len(os_) != 1 or od != "float32":
        return res.failed(f"Out must be a 1-D float32 tensor of length M; got shape {os_} dtype {od}")
    if isinstance(xs[0], int) and xs[0] != M:
        return res.failed(f"X has {xs[0]} rows fixed at compile time; the checker runs {M} rows: use M = T.dynamic('M')")
    res.passed(f"signature: X {xs} {xd}, Out {os_} {od}")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    if src and "MaxOp" not in src:
        return res.failed("the generated CUDA has no max reduction (tl::MaxOp): reduce each tile with T.reduce_max")
    if src:
        res.passed("the generated CUDA reduces with tl::MaxOp (a block-level max reduction)")
    import torch

    dev = runtime.mode().device
    x = row_max_input(M, N, dtype, dev)
    out = checks.poisoned((M,), torch.float32, dev)
    return run_and_compare(res, kernel, (x, out), row_max_reference(x), tolerance=1e-6,
                           what=f"torch.amax on {M} x {N} (a ragged last tile; every third row all negative, maxima "
                                f"from -2 down to -3e4)",
                           hint_unwritten="NaN is still there: either no block wrote those rows (does the grid have "
                                          "T.ceildiv(M, block_M) blocks?) or a NaN reached them from the running max, "
                                          "read before it was set (the emulator starts on-chip buffers as NaN): "
                                          "T.fill(best, -T.infinity(\"float32\")) before the loop",
                           extra_check=lambda got: _row_max_symptom(got, row_max_reference(x), factory, M, dtype, arch))


# ------------------------------------------------------------------------------------------------
# Exercise 2: tiled transpose
# ------------------------------------------------------------------------------------------------

def _vector_accesses(src: str, name: str) -> tuple[bool, bool]:
    """(16-byte vector loads from ``name``, 16-byte vector stores to ``name``) in the CUDA source."""
    vec = rf"\*\((?:uint4|int4|float4)\*\)\({re.escape(name)} \+"
    loads = stores = False
    for line in src.splitlines():
        if not re.search(vec, line):
            continue
        lhs, _, rhs = line.partition(" = ")
        if re.search(vec, lhs):
            stores = True
        if re.search(vec, rhs):
            loads = True
    return loads, stores


def check_transpose(factory, *, shapes=TRANSPOSE_SHAPES, dtype: str = "float16", arch: str | None = None,
                    verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, dtype)`` for ``B = A^T`` on every (M, N) of ``shapes``;
    prints and returns the result."""
    if eager.is_eager(factory):
        factory = eager.factory(factory, ("M", "N", "dtype"))
    res = _check_transpose(factory, [tuple(shape) for shape in shapes], dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


#: Why a fragment filled by reading shared memory down its columns is stored one element at a time
#: (read off the generated CUDA of ``wrong_answers.transpose_scattered``).
SCATTERED_WHY = (
    "A fragment's layout follows the loop that fills it: a T.Parallel loop that reads a shared tile "
    "down its columns (b[i, j] = a_shared[j, i]) hands each thread elements of one column, so the T.copy "
    "of that fragment to B stores 2 bytes per thread per instruction (and those shared-memory reads are a "
    "whole row apart: bank conflicts). Let T.copy(A[...], fragment) fill the fragment (each thread gets a "
    "run of a row), write it transposed into a T.alloc_shared tile, then T.copy the shared tile to B")


def _transpose_symptom(got, a) -> str:
    """What the wrong B looks like: tiles in place but not transposed inside, or which rows differ."""
    got, want = got.float().cpu(), a.t().float().cpu()
    M, N = a.shape
    for block in (128, 64, 32, 16):
        full_m, full_n = M // block * block, N // block * block
        if not full_m or not full_n:
            continue
        # the whole tiles of B: tile (r, c) holding A's tile (c, r) as it is, not transposed
        tiles = a.float().cpu()[:full_m, :full_n].reshape(full_m // block, block, full_n // block, block)
        if _equal(got[:full_n, :full_m], tiles.permute(2, 1, 0, 3).reshape(full_n, full_m)):
            return (f"every whole {block} x {block} tile of B is in the right place but not transposed inside: "
                    f"write the tile transposed on chip (b_tile[j, i] = a_tile[i, j])")
    rows = (got != want).any(dim=1).nonzero().flatten()
    return f"B != A.T in {len(rows)} of {N} rows of B (first: {rows[:4].tolist()})"


def unwritten_transpose_hint(b) -> str:
    """Which part of B was never written, as the grid mistake that leaves it so."""
    unwritten = checks.poison_mask(b).cpu()
    rows, cols = unwritten.shape
    for block in (256, 128, 64, 32, 16):
        full_rows, full_cols = rows // block * block, cols // block * block
        edges = rows * cols - full_rows * full_cols        # the elements of the partial tiles
        if full_rows and full_cols and edges and not unwritten[:full_rows, :full_cols].any() \
                and int(unwritten.sum()) == edges:
            return (f"exactly the partial tiles at B's ragged edges (rows {full_rows}.. or columns {full_cols}..) "
                    f"were never written: a grid of n // {block} blocks drops the last, partial tile; "
                    f"T.ceildiv(n, {block}) blocks cover it (and T.copy handles its bounds)")
    return ("check which block index walks which dimension (A's tile (by, bx) goes to B's tile (bx, by), bx "
            "walking A's columns) and that the grid covers every tile, the ragged ones too")


def _equal(x, y) -> bool:
    import torch

    return bool(torch.equal(x, y))


def _check_transpose(factory, shapes, dtype, arch) -> ExerciseResult:
    M, N = shapes[0]
    res = ExerciseResult()
    program = call_factory(res, factory, (M, N, dtype),
                           "write factory(M, N, dtype) returning a T.prim_func(A: (M, N), B: (N, M))")
    if program is None:
        return res
    specs = param_specs(program)
    if len(specs) != 2:
        return res.failed(f"the kernel must take 2 tensors (A, B); yours takes {len(specs)}: {specs}")
    want = [((M, N), dtype), ((N, M), dtype)]
    for nm, w, h in zip("AB", want, specs):
        if h != w:
            return res.failed(f"{nm} must be T.Tensor({w[0]}, {dtype!r}); got shape {h[0]}, dtype {h[1]}")
    res.passed(f"signature: A {want[0][0]}, B {want[1][0]}, {dtype}")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    names = [program.buffer_map[p].name for p in program.params]
    if src:
        a_loads, _ = _vector_accesses(src, names[0])
        _, b_stores = _vector_accesses(src, names[1])
        b_tma = re.search(rf"tma_store\({re.escape(names[1])}_desc", src) is not None
        if not a_loads:
            return res.failed(f"{names[0]} is not loaded with 16-byte vectors (uint4) in the generated CUDA: copy "
                              f"whole row-tiles of A with T.copy(A[...], tile) so each thread reads 8 consecutive elements")
        res.passed(f"{names[0]} is loaded with 16-byte vectors")
        if b_stores:
            res.passed(f"{names[1]} is stored with 16-byte vectors")
        elif b_tma:
            res.passed(f"{names[1]} is stored by one bulk copy of the shared tile (Hopper's TMA: no per-thread stores)")
        else:
            return res.failed(f"{names[1]} is written one element at a time (no 16-byte stores, no bulk copy of a "
                              "shared tile). "
                              + SCATTERED_WHY)
    import torch

    dev = runtime.mode().device
    for k, (M, N) in enumerate(shapes):
        if k:
            program = call_factory(res, factory, (M, N, dtype), "the same factory, for another shape")
            kernel = None if program is None else compile_or_fail(res, program, arch)
            if kernel is None:
                return res
        a = checks.random_tensor((M, N), getattr(torch, dtype), dev)
        b = checks.poisoned((N, M), getattr(torch, dtype), dev)
        run_and_compare(res, kernel, (a, b), a.t().float(), tolerance=0.0,
                        what=f"A.T on a {M} x {N} matrix (a multiple of no block size)",
                        hint_unwritten=unwritten_transpose_hint,
                        extra_check=lambda got, a=a: _transpose_symptom(got, a))
        if not res.ok:
            break
    return res
