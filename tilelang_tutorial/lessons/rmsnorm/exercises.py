"""Notebook 05's checks: of its kernel cells (and 05b's), :func:`check_rmsnorm_silu`, and of its
exercises (1, 2); notebook 05b's exercises (3, 4: below, after exercise 1's checker).

1. **Choose the layout configuration** for C = 640 (fp16) by notebook 05's rule (section 3):
   how many threads share a row (``group``) and how many threads a block has (``threads``). Give
   ``RMSNormSiLUConfig(group=..., threads=...)`` (from the lesson's ``kernel`` module) to
   ``check_rmsnorm_config(config)``. The checker grades the choice by the rule, naming the part
   it breaks (more than ``MAX_VECTORS_PER_LANE`` vectors a lane, a larger group than the smallest
   within that cap, a block of other than 256 threads), then builds
   ``rmsnorm_silu_program(640, config=...)``, compiles it (either mode) and reads what compilation
   can tell: 16-byte (``uint4``) loads of X and stores of Y, the size of the reduction
   (``AllReduce`` over ``group`` lanes), and ptxas's registers and spills
   (``inspector.resource_usage``, no GPU needed), then runs the kernel through the kernel cells'
   check (:func:`check_kernel_rows`).

2. **A residual input**: ``y = silu(rms_norm(x + r) * gamma)`` over the last dim, ``x + r``
   formed in fp32. Write ``factory(C, dtype)`` returning a ``T.prim_func`` with five parameters,
   in this order::

       X:     T.Tensor((m, C), dtype)       # m = T.dynamic("m")
       R:     T.Tensor((m, C), dtype)       # the residual, same shape as X
       Gamma: T.Tensor((C,), dtype)
       Y:     T.Tensor((m, C), dtype)
       eps:   T.float32                     # a runtime scalar, like the kernel's

   then ``check_residual_rmsnorm_silu(factory)``. Every ``(block_m, width)`` fragment is given its
   layout with ``T.annotate_layout`` (``row_group_layout``, as the kernel does). The checker calls
   your factory for C = 96 (a width where layout inference alone goes wrong), checks the
   parameters (names do not matter; shapes and dtypes do), reads the program's layout annotations,
   compiles it, reads the generated CUDA (X and R must be loaded and Y stored with 16-byte
   vectors), and runs :data:`RUN_WIDTHS` (C = 96, a width the rule's group divides and one it
   pads) with a ragged number of rows, a poisoned (NaN) output and eps drawn at random
   (:func:`drawn_eps`) against the fp32 reference, on the GPU or in the tile emulator. The inputs
   hold ordinary rows and three kinds that catch shortcuts (:data:`ROW_KINDS`): rows where x + r
   exceeds fp16's range (a 16-bit sum overflows), rows whose mean square is below eps, and rows
   with x + r = 0 (both need eps); a failure names the kinds of row that went wrong.

3. **The statistics pass, chunked** (05b): ``check_rms_stats(factory)``.
4. **The output pass in bf16, from a saved Rstd** (05b): ``check_apply_rstd(factory)``.

Solutions: ``solutions/config.py``, ``solutions/residual.py``, ``solutions/rms_stats.py`` and
``solutions/apply_rstd.py`` in this lesson's folder.
"""
import re

from ... import checks, runtime
from ...exercise_kit import (ExerciseResult, call_factory, compile_or_fail, kernel_source, not_attempted, param_specs,
                             quiet_tilelang, run_kernel)

CPU_WIDTH = 96
#: the residual checker's widths: 96 (where layout inference alone goes wrong), then a width whose
#: row the rule's group divides and one it pads (a mean over the padded tile is wrong only there)
RUN_WIDTHS = (CPU_WIDTH,) + checks.padded_and_unpadded_widths(32, 128, near=640)
RAGGED_M = 1001
#: the default eps, the value a kernel that ignores its eps argument has typed in
EPS = 1e-5


def drawn_eps() -> float:
    """The eps a check passes: drawn at random from [2.5e-5, 4e-4) (:func:`checks.random_scalar`
    times 1e-4), so a kernel that ignores its eps argument and uses the default 1e-5 cannot match,
    while rows whose mean square is near zero still depend on it."""
    return checks.random_scalar() * 1e-4


# ------------------------------------------------------------------------------------------------
# The kernel cells' check (notebooks 05 and 05b), also the numbers of exercise 1
# ------------------------------------------------------------------------------------------------

#: rows of the kernel check: a ragged last block for blocks of 8, 16 and 64 rows
KERNEL_ROWS = 333
#: the kinds of row of the kernel check: ``large`` (:func:`checks.large_rows`: squares beyond fp16's
#: 65504 in every row, so a square or a sum of squares kept in 16 bits is inf and the row's scale 0),
#: ``near zero`` (:func:`checks.near_zero_rows`: a row of zeros, then mean squares from 1e-4 down
#: to 1e-8, where the drawn eps decides the scale), the rest ordinary N(0, 1) rows.
KERNEL_ROW_KINDS = {"large": slice(0, 16), "near zero": slice(16, 32), "ordinary": slice(32, None)}


def kernel_inputs(C: int, dtype: str = "float16", device: str = "cpu", M: int = KERNEL_ROWS):
    """(x, gamma) for the kernel check: fresh random, with the rows of :data:`KERNEL_ROW_KINDS`."""
    import torch

    tdt = getattr(torch, dtype)
    x = checks.random_tensor((M, C), tdt, device)
    for kind, rows in (("large", checks.large_rows), ("near zero", checks.near_zero_rows)):
        where = KERNEL_ROW_KINDS[kind]
        x[where] = rows((where.stop - where.start, C), tdt, device)
    return x, checks.random_tensor((C,), tdt, device)


def check_rmsnorm_silu(kernel, C: int, dtype: str = "float16", *, rows: int = KERNEL_ROWS, eps: float | None = None,
                       verbose: bool = True) -> ExerciseResult:
    """The check of a compiled RMSNorm + SiLU kernel ``kernel(X, Gamma, Y, eps)`` of width C:
    :func:`kernel_inputs` (ordinary rows, rows whose squares overflow fp16, rows at and near zero),
    eps drawn at random (:func:`drawn_eps`), the output poisoned, against the fp32 reference on the
    GPU or in the emulator; a failure names the kinds of row that went wrong and the mistake the
    output points to. Prints and returns the result."""
    res = ExerciseResult()
    check_kernel_rows(res, kernel, C, dtype, rows=rows, eps=eps)
    if verbose:
        print(res)
    return res


def check_kernel_rows(res: ExerciseResult, kernel, C: int, dtype: str = "float16", *, rows: int = KERNEL_ROWS,
                      eps: float | None = None) -> bool:
    """:func:`check_rmsnorm_silu`'s run and verdict, on ``res``: True when every kind of row matched."""
    import torch

    from .kernel import rmsnorm_silu_reference

    m = runtime.mode()
    where = "the GPU" if m.can_run else "the emulator (CPU)"
    eps = drawn_eps() if eps is None else eps
    x, gamma = kernel_inputs(C, dtype, m.device, rows)
    y = checks.poisoned(x.shape, x.dtype, m.device)
    if not run_kernel(res, kernel, x, gamma, y, eps, label=f"C = {C}, {dtype}"):
        return False
    tolerance = checks.TOLERANCE[dtype]
    reference = rmsnorm_silu_reference(x, gamma, eps)
    whole = checks.compare(y, reference, tolerance=tolerance)
    what = f"C = {C}, {dtype}, M = {rows}, eps = {eps:.4g} drawn at random, ran in {where}"
    if whole.unwritten:
        res.failed(f"{whole.unwritten} of {y.numel()} outputs were never written (still NaN), {what}")
        res.hint("does the grid cover the last, partial block of rows (T.ceildiv(m, block_m)), and does every "
                 "store reach the row's last channel?")
        return False
    by_kind = {kind: checks.compare(y[part], reference[part], tolerance=tolerance) for kind, part in KERNEL_ROW_KINDS.items()}
    wrong = [kind for kind, cmp in by_kind.items() if not cmp.ok]
    if not wrong and whole.ok:
        res.numerics_checked = True
        res.passed(f"matches silu(rms_norm(x) * gamma) in fp32 ({what}): ordinary rows, rows whose squares exceed "
                   f"fp16's 65504 and rows at and near zero; {whole}")
        return True
    res.failed(f"wrong values ({what}) in the {', '.join(wrong)} rows: {whole}")
    for kind in wrong:
        res.hint(f"{kind} rows: {by_kind[kind]}")
    large = y[KERNEL_ROW_KINDS["large"]]
    matched = [advice for mistake, advice in _kernel_mistakes(C, eps) if _same(y, mistake(x, gamma), tolerance)]
    if matched:
        res.hint(matched[0])
    elif "large" in wrong and bool(((large == 0) | ~torch.isfinite(large)).any()):
        res.hint("rows whose squares exceed 65504 (fp16's largest value) come out as 0 (1/sqrt(inf)) or not at all: "
                 "a square or the sum of squares is kept in 16 bits. Widen each element to float32 before squaring, "
                 "T.Cast('float32', x[i, j]), and keep the squares and their sum in float32 fragments (section 4)")
    elif "ordinary" not in wrong:
        res.hint("ordinary rows are right, rows at and near zero are not: there the mean square is comparable to "
                 "eps, so anything added to the sum besides the squares (a sum not started at 0) or eps used "
                 "elsewhere than inside the square root, T.rsqrt(sum_of_squares / C + eps), shows")
    else:
        res.hint("even ordinary N(0, 1) rows are wrong: compare your loops with the reference one step at a time "
                 "(the sum of squares in fp32, rsqrt(sum / C + eps), x * rstd * gamma, silu)")
    return False


def _kernel_mistakes(C, eps):
    """(what a plausible mistake computes from (x, gamma), the advice when the output matches it)."""
    import torch

    def scaled(rstd_of):
        def output(x, gamma):
            x32 = x.float()
            return _silu(x32 * rstd_of(x32.pow(2).sum(-1, keepdim=True)) * gamma.float())
        return output

    return (
        (scaled(lambda total: torch.rsqrt(total / C + EPS)),
         f"the output equals the formula with eps = {EPS:g}, not the eps passed ({eps:.4g}): the kernel must use its "
         f"eps argument, not a value typed in"),
        (scaled(lambda total: torch.rsqrt(total / C)),
         "the output equals the formula without eps: a row of zeros gives 1/sqrt(0) = inf, times 0 = NaN, and rows "
         "whose mean square is below eps are scaled too much. eps belongs inside the square root, "
         "T.rsqrt(sum_of_squares / C + eps)"),
        (scaled(lambda total: torch.rsqrt(total / C) + eps),
         "the output equals 1/sqrt(mean(x^2)) + eps, eps added after the root: eps belongs inside the square root, "
         "T.rsqrt(sum_of_squares / C + eps)"),
        (scaled(lambda total: torch.rsqrt(total + eps)),
         "the output equals the formula with the sum of squares in place of their mean: the 1/C is missing"),
    )


def residual_rmsnorm_silu_reference(x, r, gamma, eps: float = EPS):
    """fp32: silu(rms_norm(x + r) * gamma) over the last dim."""
    import torch

    h = x.float() + r.float()
    v = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()
    return v * torch.sigmoid(v)


def _buffer_names(program):
    return [program.buffer_map[p].name if p in program.buffer_map else None for p in program.params]


def check_residual_rmsnorm_silu(factory, *, dtype: str = "float16", arch: str | None = None,
                                verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(C, dtype)`` (see the module docstring); prints and returns the result."""
    res = _check(factory, dtype, arch)
    if verbose:
        print(res)
    return res


def _signature(program, C, dtype, res):
    if not hasattr(program, "buffer_map"):
        res.failed(f"factory({C}, {dtype!r}) returned {type(program).__name__}, not a T.prim_func")
        return False
    specs = param_specs(program)
    if len(specs) != 5:
        res.failed(f"the kernel must take 5 parameters (X, R, Gamma, Y, eps); yours takes {len(specs)}: {specs}")
        return False
    for name, (shape, dt), want in zip(("X", "R", "Gamma", "Y"), specs[:4], (2, 2, 1, 2)):
        if shape is None or len(shape) != want or shape[-1] != C or dt != dtype:
            want_s = f"(m, {C})" if want == 2 else f"({C},)"
            res.failed(f"{name} must be a {want_s} {dtype} tensor; got shape {shape}, dtype {dt}")
            return False
    if specs[4] != (None, "float32"):
        res.failed(f"the 5th parameter must be the scalar eps: T.float32; got {specs[4]}")
        return False
    if isinstance(specs[0][0][0], int):
        res.hint("m is a compile-time constant; T.dynamic('m') lets one build serve every row count")
    res.passed(f"signature: X, R, Y ({specs[0][0][0]}, {C}), Gamma ({C},), {dtype}; eps float32")
    return True


#: Rows of the residual checker's inputs, chosen so that each plausible shortcut changes numbers:
#: ``large`` rows hold |x|, |r| in [30000, 50000] with one sign per row, so x + r reaches 1e5,
#: beyond fp16's largest value (65504): a sum formed in fp16 is inf there, in fp32 it is exact;
#: ``tiny`` rows hold |x|, |r| about 1e-3, a mean square of about 2e-6, below any eps the check
#: draws (:func:`drawn_eps`), so eps decides their scale; ``zero`` rows hold r = -x exactly, where
#: 1/sqrt(0) without eps is inf and inf * 0 is NaN; the rest are ordinary N(0, 1) rows.
ROW_KINDS = {"large": slice(0, 64), "tiny": slice(64, 128), "zero": slice(128, 136), "ordinary": slice(136, RAGGED_M)}


def residual_inputs(C: int, dtype: str = "float16", device: str = "cpu", M: int = RAGGED_M):
    """(x, r, gamma) for the residual checker: fresh random, with the rows of :data:`ROW_KINDS`."""
    import torch

    tdt = getattr(torch, dtype)
    x = checks.random_tensor((M, C), torch.float32, device)
    r = checks.random_tensor((M, C), torch.float32, device)
    large, tiny, zero = ROW_KINDS["large"], ROW_KINDS["tiny"], ROW_KINDS["zero"]
    n_large = large.stop - large.start
    sign = torch.where(torch.rand(n_large, 1, device=device) < 0.5, -1.0, 1.0)
    x[large] = sign * (3e4 + 2e4 * torch.rand(n_large, C, device=device))
    r[large] = sign * (3e4 + 2e4 * torch.rand(n_large, C, device=device))
    x[tiny] *= 1e-3
    r[tiny] *= 1e-3
    x, r = x.to(tdt), r.to(tdt)
    r[zero] = -x[zero]
    return x, r, checks.random_tensor((C,), tdt, device)


def _fragments(program):
    """(every 2-D fragment the kernel allocates, the names T.annotate_layout gave a layout)."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    fragments, annotated = [], set()

    def visit(node):
        if isinstance(node, tirx.SBlock):
            fragments.extend(b.name for b in node.alloc_buffers if b.scope() == "local.fragment" and len(b.shape) == 2)
            if "layout_map" in node.annotations:
                annotated.update(b.name for b in node.annotations["layout_map"].keys())

    post_order_visit(program.body, visit)
    return fragments, annotated


def _check(factory, dtype, arch) -> ExerciseResult:
    res = ExerciseResult()
    arch = arch or runtime.current_arch()
    C = CPU_WIDTH
    program = call_factory(res, factory, (C, dtype),
                           "write the kernel first: factory(C, dtype) returning a T.prim_func(X, R, Gamma, Y, eps)")
    if program is None:
        return res
    if not _signature(program, C, dtype, res):
        return res
    # The spec names the layout: every (block_m, width) fragment carries one chosen with
    # T.annotate_layout. Read from the program itself: where inference copies x's layout onto r
    # through the loop that adds them, the generated code cannot tell an unannotated r apart.
    fragments, annotated = _fragments(program)
    loose = [name for name in fragments if name not in annotated]
    if loose:
        res.failed(f"fragment(s) {', '.join(loose)} not annotated: the spec asks for every (block_m, width) fragment "
                   f"in T.annotate_layout with row_group_layout(...), as the kernel does for x, sq and y")
        res.hint("without it the layout of each is left to inference: it may copy x's layout through a loop that "
                 "uses both, or give each thread a whole row (section 2)")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res

    # The generated CUDA: 16-byte vector accesses of X, R (loads) and Y (store) at C = 96.
    src = kernel_source(kernel)
    names = _buffer_names(program)
    missing = [role for role, name in zip(("X", "R", None, "Y"), names[:4])
               if role and not re.search(rf"\*\(uint4\*\)\({re.escape(name)} \+", src)]
    if not src:
        pass
    elif missing:
        return res.failed(
            f"at C = {C} the generated CUDA does not access {', '.join(missing)} with 16-byte vectors (uint4): "
            f"layout inference probably gave each thread a whole row. Annotate every (block_m, width) fragment "
            f"with row_group_layout(...) (the lesson's kernel module) as the kernel does.")
    else:
        res.passed(f"X and R are loaded and Y stored with 16-byte vectors at C = {C}")
    if not res.ok:
        return res

    eps = drawn_eps()
    for width in RUN_WIDTHS:
        try:
            with quiet_tilelang():
                k = kernel if width == C else runtime.compile_kernel(factory(width, dtype), arch=arch)
        except Exception as exc:
            return res.failed(f"C = {width}: factory/compile failed: {type(exc).__name__}: {str(exc)[:300]}")
        if not _run_residual(res, k, width, dtype, eps):
            return res
    return res


def _run_residual(res: ExerciseResult, kernel, C: int, dtype: str, eps: float) -> bool:
    """Run the reader's kernel on :func:`residual_inputs` with ``eps``, compare each kind of row with
    the fp32 reference and name the mistake the failing kinds point to. True when everything matched."""
    import torch

    from .kernel import default_config, vectors_per_thread

    m = runtime.mode()
    where = "the GPU" if m.can_run else "the emulator (CPU)"
    x, r, gamma = residual_inputs(C, dtype, m.device)
    y = checks.poisoned(x.shape, getattr(torch, dtype), m.device)
    if not run_kernel(res, kernel, x, r, gamma, y, eps):
        return False
    tolerance = checks.TOLERANCE[dtype]
    reference = residual_rmsnorm_silu_reference(x, r, gamma, eps)
    whole = checks.compare(y, reference, tolerance=tolerance)
    group = default_config(C, dtype).group
    padded_width = vectors_per_thread(C, group) * group * 8
    shape = (f"the rule's {group} lanes pad the row to {padded_width} columns" if padded_width != C
             else f"the rule's {group} lanes divide the row")
    what = f"C = {C} ({shape}), M = {x.shape[0]}, eps = {eps:.4g} drawn at random, ran in {where}"
    if whole.unwritten:
        res.failed(f"{whole.unwritten} of {y.numel()} outputs were never written (still NaN), {what}")
        res.hint("does the grid cover the last, partial block of rows (T.ceildiv(m, block_m)), and does T.copy(y, "
                 "Y[...]) store the whole tile?")
        return False
    by_kind = {kind: checks.compare(y[rows], reference[rows], tolerance=tolerance) for kind, rows in ROW_KINDS.items()}
    wrong = [kind for kind, cmp in by_kind.items() if not cmp.ok]
    if not wrong and whole.ok:
        res.numerics_checked = True
        res.passed(f"matches silu(rms_norm(x + r) * gamma) in fp32 ({what}): ordinary rows, rows where x + r reaches "
                   f"1e5 (beyond fp16's 65504), rows with a mean square below eps and rows with x + r = 0; {whole}")
        return True
    res.failed(f"wrong values ({what}) in the {', '.join(wrong)} rows: {whole}")
    for kind in wrong:
        res.hint(f"{kind} rows: {by_kind[kind]}")
    # Which plausible mistake the output matches, computed in torch on the same inputs.
    matched = [advice for mistake, advice in _residual_mistakes(eps, padded_width)
               if _same(y, mistake(x, r, gamma), tolerance)]
    if matched:
        res.hint(matched[0])
    elif "ordinary" in wrong and padded_width != C and res.numerics_checked:
        res.hint(f"right where the row is not padded, wrong here, where it is: the padding adds zeros to the sum of "
                 f"squares, and the mean is over the C = {C} channels that exist, not the tile's {padded_width} columns")
    elif "ordinary" in wrong:
        res.hint("even ordinary N(0, 1) rows are wrong: compare your loops with the kernel's, one step at a time "
                 "(h = x + r, the sum of squares of h, rsqrt(mean + eps), h * rstd * gamma, silu)")
    elif wrong == ["large"]:
        res.hint("only the rows where x + r exceeds 65504 (fp16's largest value) are wrong: is every step from the "
                 "sum on in fp32?")
    else:
        res.hint("ordinary rows are right, rows with a mean square near or at zero are not: look at eps, which "
                 "belongs inside the square root, T.rsqrt(sum_of_squares / C + eps)")
    return False


def _rows(h, rstd, gamma):
    """silu(h * rstd * gamma) in fp32."""
    return _silu(h * rstd * gamma.float())


def _mean_square(h):
    return h.pow(2).mean(-1, keepdim=True)


def _residual_mistakes(eps, padded_width):
    """(what a plausible mistake computes from (x, r, gamma), the advice when the reader's output
    matches it), for the check's ``eps`` and the rule's padded tile width."""
    import torch

    def h_of(x, r):
        return x.float() + r.float()

    return (
        (lambda x, r, g: _silu(x.float() * _rstd(x.float(), eps) * g.float() + r.float()),
         "the output equals silu(rms_norm(x) * gamma + r): r is added after the norm; add it first, h = x + r, and "
         "normalise h"),
        (lambda x, r, g: _rows(x.float(), _rstd(x.float(), eps), g),
         "the output equals silu(rms_norm(x) * gamma): R is never added"),
        (lambda x, r, g: _rows((x + r).float(), _rstd((x + r).float(), eps), g),
         "the output equals the formula with x + r added in 16 bits: where the sum exceeds 65504 (fp16's largest "
         "value) it is inf, and its row is lost. Cast each input to float32 before adding: "
         "T.Cast('float32', x[i, j]) + T.Cast('float32', r[i, j])"),
        (lambda x, r, g: _rows(h_of(x, r), _rstd(h_of(x, r), EPS), g),
         f"the output equals the formula with eps = {EPS:g}, not the eps passed ({eps:.4g}): the kernel must use its "
         f"eps argument, not a value typed in"),
        (lambda x, r, g: _rows(h_of(x, r), _mean_square(h_of(x, r)).rsqrt(), g),
         "the output equals the formula without eps: rows whose mean square is below eps are scaled too much, "
         "and x + r = 0 gives 1/sqrt(0) = inf, times 0 = NaN. eps belongs inside the square root, "
         "T.rsqrt(sum_of_squares / C + eps)"),
        (lambda x, r, g: _rows(h_of(x, r), _mean_square(h_of(x, r)).rsqrt() + eps, g),
         "the output equals 1/sqrt(mean(h^2)) + eps, eps added after the root (TileLang's examples/norm/rms_norm.py "
         "writes it so, with 1e-12): wrong wherever 1/rms is not much larger than eps. eps belongs inside the square "
         "root, T.rsqrt(sum_of_squares / C + eps)"),
        (lambda x, r, g: _rows(h_of(x, r), torch.rsqrt(h_of(x, r).pow(2).sum(-1, keepdim=True) / padded_width + eps), g),
         f"the output equals the formula with the sum of squares divided by the padded tile's {padded_width} columns: "
         f"the padding adds zeros to the sum, and the mean is over the C channels that exist (inv_c = 1.0 / C)"),
    )


def _same(y, candidate, tolerance) -> bool:
    """y equals candidate: NaN (or inf) at the same places, and within tolerance elsewhere."""
    import torch

    y64, c64 = y.double(), candidate.double()
    bad_y, bad_c = ~torch.isfinite(y64), ~torch.isfinite(c64)
    if not torch.equal(bad_y, bad_c):
        return False
    keep = ~bad_y
    if not keep.any():
        return True
    return checks.compare(y64[keep], c64[keep], tolerance=tolerance).ok


def _rstd(h, eps):
    import torch

    return torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


def _silu(v):
    import torch

    return v * torch.sigmoid(v)


# ------------------------------------------------------------------------------------------------
# Exercise 1: the layout configuration for C = 640
# ------------------------------------------------------------------------------------------------

CONFIG_WIDTH = 640


def check_rmsnorm_config(config, *, C: int = CONFIG_WIDTH, dtype: str = "float16", arch: str | None = None,
                         verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``RMSNormSiLUConfig(group=..., threads=...)`` for width C; prints and returns."""
    res = _check_config(config, C, dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_config(config, C, dtype, arch) -> ExerciseResult:
    from ...inspector import resource_usage
    from . import kernel as rs

    res = ExerciseResult()
    what = "give RMSNormSiLUConfig(group=..., threads=...) (the class is in the lesson's kernel module)"
    if config is None:
        return not_attempted(res, what)
    if isinstance(config, dict):
        try:
            config = rs.RMSNormSiLUConfig(**config)
        except TypeError as exc:
            return res.failed(f"{exc}; {what}")
    if not isinstance(config, rs.RMSNormSiLUConfig):
        # The notebook defines its own copy of the class (its kernel cell): accept any object with
        # the same fields, and rebuild the lesson's config from them.
        if not all(hasattr(config, f) for f in ("group", "threads")):
            return res.failed(f"expected an RMSNormSiLUConfig, got {type(config).__name__}; {what}")
        if config.group is None or config.threads is None:
            return not_attempted(res, what)
        config = rs.RMSNormSiLUConfig(group=config.group, threads=config.threads,
                                      rows_per_thread=getattr(config, "rows_per_thread", 1))
    g, t = config.group, config.threads
    if g is None or t is None:
        return not_attempted(res, what)
    n_vec = C // rs.VEC
    valid = rs.valid_groups(C)
    if g not in valid:
        why = ("a power of two (the sum of squares is a butterfly that pairs lanes by halves)" if g < 1 or g & (g - 1)
               else f"at most {valid[-1]}: a row of {C} is {n_vec} 16-byte vectors, more lanes would hold nothing")
        return res.failed(f"group = {g}: the group must be {why}; for C = {C} that leaves {valid}")
    if t % 32 or t % g or not 32 <= t <= 1024:
        return res.failed(f"threads = {t}: a block is whole warps (a multiple of 32, at most 1024) and whole groups "
                          f"(a multiple of {g})")
    v = rs.vectors_per_thread(C, g)
    res.passed(f"group = {g} lanes per row -> {v} vectors ({v * rs.VEC} elements) of the row per thread; "
               f"{t // g * config.rows_per_thread} rows per block")
    if not _follows_the_rule(res, C, dtype, g, t, v):
        return res
    try:
        program = rs.rmsnorm_silu_program(C, dtype, config)
    except Exception as exc:
        return res.failed(f"rmsnorm_silu_program rejected it: {type(exc).__name__}: {exc}")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    names = _buffer_names(program)
    x_name, y_name = names[0], names[2]
    if src and not (re.search(rf"\*\(uint4\*\)\({re.escape(x_name)} \+", src)
                    and re.search(rf"\*\(uint4\*\)\({re.escape(y_name)} \+", src)):
        return res.failed("the generated CUDA does not load X and store Y with 16-byte vectors (uint4)")
    red = re.search(r"AllReduce<tl::SumOp, (\d+)", src)
    lanes = int(red.group(1)) if red else 1
    if not src:
        pass
    elif lanes != g:
        return res.failed(f"the sum of squares is reduced over {lanes} lanes, not the group of {g}")
    else:
        res.passed("X is loaded and Y stored with 16-byte vectors (uint4)")
        res.passed(f"the sum of squares is reduced across exactly the {g} lanes of a row (warp shuffles)")
    if src:
        try:
            usage = next(iter(resource_usage(kernel).values()))
        except Exception as exc:  # ptxas missing: say so, do not fail the reader
            res.skipped(f"registers/spills not checked: ptxas -v failed ({type(exc).__name__}: {exc})")
        else:
            if usage["spill_stores"] or usage["spill_loads"]:
                return res.failed(f"ptxas: {usage['registers']} registers/thread and {usage['spill_stores']} B spilled "
                                  f"to local memory")
            res.passed(f"ptxas: {usage['registers']} registers/thread, nothing spilled")
    check_kernel_rows(res, kernel, C, dtype, rows=RAGGED_M)     # the kernel cell's check
    return res


#: threads an SM of Hopper holds at once, and blocks (of any size)
SM_THREADS, SM_BLOCKS = 2048, 32


def _follows_the_rule(res, C, dtype, g, t, v) -> bool:
    """Grade a valid layout by section 3's rule (:func:`.kernel.default_config`), naming the part
    of the rule it breaks and why. True when it is the rule's layout."""
    from . import kernel as rs

    rule = rs.default_config(C, dtype)
    if v > rs.MAX_VECTORS_PER_LANE:
        res.failed(f"group = {g}: each lane holds {v} vectors of the row, more than the rule's "
                   f"{rs.MAX_VECTORS_PER_LANE}: at most {rs.MAX_VECTORS_PER_LANE} vectors a lane")
        res.hint(f"a lane keeps its vectors in registers from the load to the store: {v * rs.VEC} elements of the "
                 f"row, their squares and the outputs. More registers a thread, fewer blocks an SM holds (or, under "
                 f"the cap of min_blocks, spills to memory); more lanes a row give each lane fewer vectors")
        return False
    if g > rule.group:
        smaller = rule.group
        res.failed(f"group = {g}: not the rule's group. The rule takes the smallest group (of at least "
                   f"{rs.MIN_GROUP} lanes) that leaves at most {rs.MAX_VECTORS_PER_LANE} vectors a lane")
        res.hint(f"{g} lanes hold {v} vectors each ({rs.vectors_per_thread(C, g) * g - C // rs.VEC} of "
                 f"{rs.vectors_per_thread(C, g) * g} slots empty); halving the group, as long as a lane stays within "
                 f"{rs.MAX_VECTORS_PER_LANE} vectors, gives each lane more 16-byte loads in flight and a shorter "
                 f"shuffle reduction" + (f" ({smaller} lanes still do)" if g // 2 >= smaller else ""))
        return False
    if t != rule.threads:
        res.failed(f"threads = {t}: the rule's blocks have {rule.threads} threads")
        if t * SM_BLOCKS < SM_THREADS:
            res.hint(f"an SM holds at most {SM_BLOCKS} blocks at once, so blocks of {t} threads fill at most "
                     f"{t * SM_BLOCKS} of its {SM_THREADS} thread slots: fewer loads in flight")
        else:
            res.hint(f"the rule fixes the block at {rule.threads} threads: its register caps (min_blocks, 4 or 5 "
                     f"blocks an SM) are counted in blocks of {rule.threads}")
        return False
    res.passed(f"the rule's layout (section 3): the smallest group of at least {rs.MIN_GROUP} lanes that leaves "
               f"at most {rs.MAX_VECTORS_PER_LANE} vectors a lane, {g} lanes of {v}, {t} threads a block")
    return True


# ------------------------------------------------------------------------------------------------
# Notebook 05b's exercises
# ------------------------------------------------------------------------------------------------
#
# 3. **The statistics pass, chunked** (05b exercise 1). Write ``factory(C, dtype)`` returning a
#    ``T.prim_func(X: (m, C) dtype, Rstd: (m,) float32, eps: T.float32)`` that stores
#    ``Rstd[i] = 1 / sqrt(mean_j X[i, j]^2 + eps)`` with the sum of squares in fp32, walking each
#    row in chunks of at most :data:`MAX_CHUNK` columns (no tile of the kernel is wider), so that
#    it serves a width the one-pass kernel's table does not cover. ``check_rms_stats(factory)``
#    reads the tiles the program allocates, compiles it, reads the generated CUDA (the sum's
#    type), and runs C = 96, 640 and 12288 on 1001 rows (ragged against any block of rows) with a
#    poisoned output, in the emulator (CPU) or on the GPU: ordinary rows, rows whose squares exceed
#    fp16's 65504, rows whose mean square is below eps and rows of zeros (:data:`STATS_ROW_KINDS`).
#
# 4. **The output pass in bf16, from a saved Rstd** (05b exercise 2). Write ``factory(C, dtype)``
#    returning a ``T.prim_func(X: (m, C) dtype, Rstd: (m,) float32, Gamma: (C,) dtype, Y: (m, C)
#    dtype)`` that writes ``Y = silu(X * Rstd[:, None] * Gamma)``, the product and SiLU in fp32 and
#    rounded to ``dtype`` once, every ``(block_m, width)`` fragment given its layout with
#    ``T.annotate_layout`` (``row_group_layout``). ``check_apply_rstd(factory)`` checks bfloat16:
#    the annotations, 16-byte loads of X and stores of Y at C = 96, then C = 96 and 640 on 1001 rows
#    against the fp32 reference, and the precision the spec names: every output within one bf16
#    step (ulp) of the fp32 result (a kernel that rounds to bf16 between the steps is not).
#
# Solutions: ``solutions/rms_stats.py`` and ``solutions/apply_rstd.py``.

#: the widest tile (columns) the statistics kernel may allocate: chunks, never the whole row
MAX_CHUNK = 128
STATS_WIDTHS = (96, 640, 12288)
#: Rows of the statistics checker's inputs: ``large`` rows hold |x| in [200, 300] (a square
#: reaches 9e4, beyond fp16's 65504: a square or a sum kept in fp16 is inf, and 1/sqrt(inf) = 0);
#: ``tiny`` rows |x| about 1e-3 (mean square about 1e-6, below any eps the check draws: eps decides);
#: ``zero`` rows all zeros (1/sqrt(0) = inf without eps); the rest N(0, 1).
STATS_ROW_KINDS = {"large": slice(0, 64), "tiny": slice(64, 128), "zero": slice(128, 136),
                   "ordinary": slice(136, RAGGED_M)}
STATS_TOLERANCE = 1e-5


def rms_stats_reference(x, eps: float = EPS):
    """fp32: 1/sqrt(mean(x^2) + eps) per row."""
    import torch

    return torch.rsqrt(x.float().pow(2).mean(-1) + eps)


def rms_stats_inputs(C: int, dtype: str = "float16", device: str = "cpu", M: int = RAGGED_M):
    """x for the statistics checker: fresh random, with the rows of :data:`STATS_ROW_KINDS`."""
    import torch

    x = checks.random_tensor((M, C), torch.float32, device)
    large, tiny, zero = STATS_ROW_KINDS["large"], STATS_ROW_KINDS["tiny"], STATS_ROW_KINDS["zero"]
    n = large.stop - large.start
    sign = torch.where(torch.rand(n, C, device=device) < 0.5, -1.0, 1.0)
    x[large] = sign * (200 + 100 * torch.rand(n, C, device=device))
    x[tiny] *= 1e-3
    x[zero] = 0
    return x.to(getattr(torch, dtype))


def check_rms_stats(factory, *, dtype: str = "float16", arch: str | None = None, verbose: bool = True) -> ExerciseResult:
    """Check a reader's chunked statistics ``factory(C, dtype)`` (05b exercise 1); prints and returns."""
    res = _check_stats(factory, dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _tiles(program):
    """[(name, scope, shape)] of every buffer the kernel allocates (fragments, shared, local)."""
    from tvm import tirx
    from tvm.tirx.stmt_functor import post_order_visit

    found = []

    def visit(node):
        if isinstance(node, tirx.SBlock):
            found.extend((b.name, b.scope(), tuple(int(s) for s in b.shape)) for b in node.alloc_buffers)

    post_order_visit(program.body, visit)
    return found


def _stats_signature(program, C, dtype, res) -> bool:
    specs = param_specs(program)
    want = [((None, C), dtype), ((None,), "float32"), (None, "float32")]
    ok = len(specs) == 3
    if ok:
        (xs, xd), (rs_, rd), (es, ed) = specs
        ok = (xs is not None and len(xs) == 2 and xs[1] == C and xd == dtype and rs_ is not None and len(rs_) == 1
              and rd == "float32" and es is None and ed == "float32")
    if not ok:
        res.failed(f"the kernel must take (X: ({'m'}, {C}) {dtype}, Rstd: (m,) float32, eps: T.float32); yours takes "
                   f"{specs}")
        return False
    res.passed(f"signature: X (m, {C}) {dtype}, Rstd (m,) float32, eps float32")
    return True


def _check_stats(factory, dtype, arch) -> ExerciseResult:
    res = ExerciseResult()
    what = "write the kernel first: factory(C, dtype) returning a T.prim_func(X, Rstd, eps)"
    programs, kernels = {}, {}
    for C in STATS_WIDTHS:                  # every width's tiles read before anything is compiled
        program = call_factory(res, factory, (C, dtype), what)
        if program is None:
            return res
        if C == STATS_WIDTHS[0] and not _stats_signature(program, C, dtype, res):
            return res
        wide = [(name, shape) for name, scope, shape in _tiles(program) if shape and max(shape[1:] or (0,)) > MAX_CHUNK]
        if wide:
            return res.failed(f"C = {C}: tile(s) {', '.join(f'{n} {s}' for n, s in wide)} wider than {MAX_CHUNK} "
                              f"columns: the spec asks for the row in chunks of at most {MAX_CHUNK} columns (a loop "
                              f"over k, each chunk X[rows, k * block_C:(k + 1) * block_C]), so that a thread's "
                              f"registers do not grow with C")
        programs[C] = program
    for C, program in programs.items():
        kernel = compile_or_fail(res, program, arch)
        if kernel is None:
            return res
        if len(res.lines) > 1 and res.lines[-1] in res.lines[:-1]:
            res.lines.pop()                              # "compiles for ..." once, not once per width
        kernels[C] = (program, kernel)
    res.passed(f"every tile is at most {MAX_CHUNK} columns wide at C = {', '.join(map(str, STATS_WIDTHS))}")
    src = kernel_source(kernels[STATS_WIDTHS[1]][1])
    red = re.search(r"(\w+)\[[^\]]*\] = tl::AllReduce<tl::SumOp", src) or re.search(
        r"(\w+)\[[^\]]*\] = \(\1\[[^\]]*\] \+", src)
    if src and red:
        decl = re.search(rf"\b([\w:]+) {re.escape(red.group(1))}\[\d+\];", src)
        if decl and decl.group(1) != "float":
            res.failed(f"the generated CUDA sums the squares in {decl.group(1)} ({red.group(1)}[...]): the spec says "
                       f"float32; a sum of squares kept in 16 bits exceeds 65504 on rows of a few hundred")
        elif decl:
            res.passed(f"the generated CUDA sums the squares in float ({red.group(1)}[...])")
    if not _stats_registers(res, kernels):
        return res
    import torch

    m = runtime.mode()
    where = "the GPU" if m.can_run else "the emulator (CPU)"
    eps = drawn_eps()
    for C, (program, kernel) in kernels.items():
        x = rms_stats_inputs(C, dtype, m.device)
        out = checks.poisoned((x.shape[0],), torch.float32, m.device)
        if not run_kernel(res, kernel, x, out, eps, label=f"C = {C}"):
            return res
        if not _stats_compare(res, x, out, C, where, eps):
            return res
    res.numerics_checked = True
    return res


def _stats_registers(res, kernels) -> bool:
    """ptxas's registers and spills at the narrowest and the widest width (no GPU needed): a
    chunked kernel spills nothing at C = 12288. False when it spills."""
    from ...inspector import resource_usage

    narrow, wide = STATS_WIDTHS[0], STATS_WIDTHS[-1]
    if not (kernel_source(kernels[narrow][1]) and kernel_source(kernels[wide][1])):
        res.skipped("registers NOT checked: nothing was compiled here (no nvcc)")
        return True
    try:
        usage = {C: next(iter(resource_usage(kernels[C][1]).values())) for C in (narrow, wide)}
    except Exception as exc:  # ptxas missing: say so, do not fail the reader
        res.skipped(f"registers NOT checked: ptxas -v failed ({type(exc).__name__}: {exc})")
        return True
    regs = {C: u["registers"] for C, u in usage.items()}
    spilled = {C: u["spill_stores"] + u["spill_loads"] for C, u in usage.items()}
    if any(spilled.values()):
        C = wide if spilled[wide] else narrow
        res.failed(f"ptxas: at C = {C} the kernel spills {spilled[C]} B to local memory ({regs[C]} registers/thread): "
                   f"a thread holds too much of the row; hold one chunk at a time")
        return False
    res.passed(f"ptxas: {regs[narrow]} registers/thread at C = {narrow}, {regs[wide]} at C = {wide}, nothing spilled")
    return True


def _stats_candidates(x, C, eps):
    """(what a plausible mistake stores, the advice when Rstd equals it), for the check's ``eps``."""
    import torch

    sq = x.float().pow(2)
    total = sq.sum(-1)
    out = [
        (torch.rsqrt(total / C + EPS), f"Rstd equals the formula with eps = {EPS:g}, not the eps "
                                       f"passed ({eps:.4g}): use the kernel's eps argument, not a value typed in"),
        (torch.rsqrt(total / C), "Rstd equals 1/sqrt(mean(x^2)) without eps: a row of zeros gives 1/sqrt(0) = inf, "
                                 "and rows whose mean square is below eps come out too large. eps belongs inside the "
                                 "square root, T.rsqrt(total / C + eps)"),
        (torch.rsqrt(total / C) + eps, "Rstd equals 1/sqrt(mean(x^2)) + eps, eps added after the root: eps belongs "
                                       "inside the square root, T.rsqrt(total / C + eps)"),
        (torch.rsqrt(total + eps), "Rstd equals 1/sqrt(sum(x^2) + eps): the 1/C of the mean is missing"),
        (torch.sqrt(total / C + eps), "Rstd equals sqrt(mean(x^2) + eps), the rms itself: store its inverse, "
                                      "T.rsqrt(...)"),
        (total / C + eps, "Rstd equals mean(x^2) + eps: the square root's inverse is missing, T.rsqrt(...)"),
    ]
    for b in (128, 64, 32):
        if C % b == 0 and C > b:
            last = sq[:, C - b:].sum(-1)
            out.append((torch.rsqrt(last / C + eps),
                        f"Rstd equals the formula over the last {b} columns only: the running total is overwritten by "
                        f"each chunk's sum (total[i] = part[i]) instead of accumulated (total[i] += part[i])"))
            out.append((torch.rsqrt(last / b + eps),
                        f"Rstd equals the formula over the last chunk of {b} columns, divided by {b}: accumulate "
                        f"the chunks' sums (+=) and divide by C, the whole row"))
            out.append((torch.rsqrt(total / b + eps),
                        f"Rstd equals 1/sqrt(sum(x^2) / {b} + eps): the sum is divided by the chunk width, not by "
                        f"C = {C}"))
    return out


def _same_each(out, candidate, tolerance) -> bool:
    """out equals candidate element by element (relative): inf/NaN at the same places, and every
    finite value within tolerance of its own (a norm over the rows would let the rows with a large
    Rstd hide the others: eps inside and after the root differ by 1e-5 where Rstd is 0.004)."""
    import torch

    o, c = out.double(), candidate.double()
    if not torch.equal(~torch.isfinite(o), ~torch.isfinite(c)):
        return False
    keep = torch.isfinite(o)
    return bool(((o[keep] - c[keep]).abs() <= tolerance * c[keep].abs().clamp_min(1e-30)).all())


def _stats_compare(res, x, out, C, where, eps) -> bool:
    import torch

    reference = rms_stats_reference(x, eps)
    what = f"C = {C}, M = {x.shape[0]}, eps = {eps:.4g} drawn at random, ran in {where}"
    whole = checks.compare(out, reference, tolerance=STATS_TOLERANCE)
    if whole.unwritten:
        res.failed(f"{whole.unwritten} of {out.numel()} Rstd values were never written (still NaN), {what}")
        missing = checks.poison_mask(out).nonzero().flatten()
        res.hint(f"the first unwritten row is {int(missing[0])} of {x.shape[0]}: does the grid cover the last, "
                 f"partial block of rows (T.ceildiv(m, block_m)), and is the whole block's Rstd stored?")
        return False
    by_kind = {kind: checks.compare(out[rows], reference[rows], tolerance=STATS_TOLERANCE)
               for kind, rows in STATS_ROW_KINDS.items()}
    wrong = [kind for kind, cmp in by_kind.items() if not cmp.ok]
    if not wrong and whole.ok:
        res.passed(f"Rstd matches 1/sqrt(mean(x^2) + eps) in fp32 ({what}): ordinary rows, rows whose squares "
                   f"exceed 65504, rows with a mean square below eps and rows of zeros; {whole}")
        return True
    res.failed(f"wrong Rstd ({what}) in the {', '.join(wrong)} rows: {whole}")
    for kind in wrong:
        res.hint(f"{kind} rows: {by_kind[kind]}")
    large = out[STATS_ROW_KINDS["large"]]
    if whole.nan and bool(torch.isnan(out[STATS_ROW_KINDS["ordinary"]]).all()):
        res.hint("every Rstd is NaN, ordinary rows too: the running total was read before it was set; "
                 "T.clear(total) before the loop over chunks")
        return False
    if "large" in wrong and bool(((large == 0) | ~torch.isfinite(large)).any()):
        res.hint("the rows whose squares exceed 65504 come out as 0 (1/sqrt(inf)): the square or the sum is kept in "
                 "16 bits (fp16) there. Widen each element to float32 before squaring, T.Cast('float32', chunk[i, j]), "
                 "and keep the sums in float32 fragments")
        return False
    for candidate, advice in _stats_candidates(x, C, eps):
        if _same_each(out, candidate, STATS_TOLERANCE):
            res.hint(advice)
            return False
    if "ordinary" in wrong:
        res.hint("even ordinary rows are wrong: print Rstd[:4] next to rms_stats_reference(x)[:4]; check the "
                 "column offset of each chunk (k * block_C) and that every chunk's sum is added")
    else:
        res.hint("ordinary rows are right, rows with a mean square near or at zero are not: look at eps, which "
                 "belongs inside the square root, T.rsqrt(total / C + eps)")
    return False


# -- 05b exercise 2: the output pass in bf16 -------------------------------------------------------

APPLY_WIDTHS = (96, 640)
APPLY_DTYPE = "bfloat16"
#: outputs allowed more than one bf16 step from the fp32 result (a GPU's exp2 may round an output
#: that lies near a rounding boundary the other way: one step, rarely two)
APPLY_MAX_SHARE_BEYOND_ONE_STEP = 1e-4


def apply_rstd_reference(x, rstd, gamma):
    """fp32: silu(x * rstd * gamma), rstd per row."""
    v = x.float() * rstd.float()[:, None] * gamma.float()
    return _silu(v)


def apply_rstd_inputs(C: int, dtype: str = APPLY_DTYPE, device: str = "cpu", M: int = RAGGED_M):
    """(x, rstd, gamma): x with the statistics checker's kinds of row, rstd their exact 1/rms."""
    x = rms_stats_inputs(C, dtype, device, M)
    return x, rms_stats_reference(x), checks.random_tensor((C,), x.dtype, device)


def _ulps_off(y, reference):
    """|y - reference| in units of the bf16 step at the reference's magnitude."""
    import torch

    ref = reference.double()
    mag = ref.abs().clamp_min(2.0 ** -126)
    step = torch.pow(2.0, torch.floor(torch.log2(mag)) - 7)
    return (y.double() - ref).abs() / step


def check_apply_rstd(factory, *, dtype: str = APPLY_DTYPE, arch: str | None = None,
                     verbose: bool = True) -> ExerciseResult:
    """Check a reader's output pass ``factory(C, dtype)`` (05b exercise 2); prints and returns."""
    res = _check_apply(factory, dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_apply(factory, dtype, arch) -> ExerciseResult:
    import torch

    res = ExerciseResult()
    what = "write the kernel first: factory(C, dtype) returning a T.prim_func(X, Rstd, Gamma, Y)"
    C = APPLY_WIDTHS[0]
    program = call_factory(res, factory, (C, dtype), what)
    if program is None:
        return res
    specs = param_specs(program)
    shapes_ok = (len(specs) == 4 and all(s is not None for s, _ in specs)
                 and [len(s) for s, _ in specs] == [2, 1, 1, 2]
                 and [d for _, d in specs] == [dtype, "float32", dtype, dtype]
                 and specs[0][0][1] == C and specs[2][0][0] == C and specs[3][0][1] == C)
    if not shapes_ok:
        return res.failed(f"the kernel must take (X: (m, {C}) {dtype}, Rstd: (m,) float32, Gamma: ({C},) {dtype}, "
                          f"Y: (m, {C}) {dtype}); yours takes {specs}")
    res.passed(f"signature: X, Y (m, {C}) {dtype}, Rstd (m,) float32, Gamma ({C},) {dtype}")
    fragments, annotated = _fragments(program)
    loose = [name for name in fragments if name not in annotated]
    if loose:
        res.failed(f"fragment(s) {', '.join(loose)} not annotated: the spec asks for every (block_m, width) fragment "
                   f"in T.annotate_layout with row_group_layout(...), as the kernel does")
        res.hint("without it layout inference may give each thread a whole row at C = 96 (notebook 05, section 2)")
        return res
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    names = _buffer_names(program)
    if src:
        missing = [role for role, name in (("X", names[0]), ("Y", names[3]))
                   if not re.search(rf"\*\(uint4\*\)\({re.escape(name)} \+", src)]
        if missing:
            return res.failed(f"at C = {C} the generated CUDA does not access {', '.join(missing)} with 16-byte "
                              f"vectors (uint4): give every fragment the row-group layout, width a multiple of "
                              f"8 * group")
        res.passed(f"X is loaded and Y stored with 16-byte vectors at C = {C}")
    m = runtime.mode()
    where = "the GPU" if m.can_run else "the emulator (CPU)"
    for width in APPLY_WIDTHS:
        try:
            with quiet_tilelang():
                k = kernel if width == C else runtime.compile_kernel(factory(width, dtype), arch=arch)
        except Exception as exc:
            return res.failed(f"C = {width}: factory/compile failed: {type(exc).__name__}: {str(exc)[:300]}")
        x, rstd, gamma = apply_rstd_inputs(width, dtype, m.device)
        y = checks.poisoned(x.shape, x.dtype, m.device)
        try:
            with quiet_tilelang():
                runtime.run(k, x, rstd, gamma, y)
            if m.can_run:
                torch.cuda.synchronize()
        except Exception as exc:
            return res.failed(f"C = {width}: running it on {where} failed: {type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[-1][:300]}")
        res.ran_on = where
        if not _apply_compare(res, x, rstd, gamma, y, width, dtype, where):
            return res
    res.numerics_checked = True
    res.skipped("speed NOT checked: the statistics pass and this one read X twice where notebook 05's kernel reads it "
                "once; timing the two against it on a GPU (tt.timing) would tell what the split costs")
    return res


def _apply_compare(res, x, rstd, gamma, y, C, dtype, where) -> bool:
    import torch

    reference = apply_rstd_reference(x, rstd, gamma)
    tolerance = checks.TOLERANCE[dtype]
    what = f"C = {C}, M = {x.shape[0]}, {dtype}, ran in {where}"
    cmp = checks.compare(y, reference, tolerance=tolerance)
    if cmp.unwritten:
        res.failed(f"{cmp.unwritten} of {y.numel()} outputs were never written (still NaN), {what}")
        res.hint("does the grid cover the last, partial block of rows (T.ceildiv(m, block_m)), and does "
                 "T.copy(y, Y[...]) store the whole tile?")
        return False
    if not cmp.ok:
        res.failed(f"wrong values against silu(x * rstd * gamma) in fp32 ({what}): {cmp}")
        v = x.float() * rstd[:, None] * gamma.float()
        candidates = (
            (_silu(x.float() * gamma.float()), "Y equals silu(x * gamma): Rstd is not applied (multiply by Rstd[i])"),
            (_silu(x.float() / rstd[:, None] * gamma.float()),
             "Y equals silu(x / rstd * gamma): the kernel divides by Rstd; it holds 1/rms already, multiply by it"),
            (v, "Y equals x * rstd * gamma: the SiLU is missing, v / (1 + exp(-v)) (notebook 05's kernel writes it "
                "with T.exp2)"),
            (torch.sigmoid(v), "Y equals sigmoid(v): SiLU is v * sigmoid(v), v / (1 + exp(-v))"),
            (_silu(x.float() * rstd[:, None]), "Y equals silu(x * rstd): Gamma is not applied"),
        )
        for candidate, advice in candidates:
            if _same(y, candidate, tolerance):
                res.hint(advice)
                break
        else:
            res.hint("compare your loop with the kernel's last loop, one step at a time: v = x * rstd * gamma in "
                     "float32, then v / (1 + exp2(-v * log2(e))), cast to the output type once")
        return False
    off = _ulps_off(y, reference)
    finite = torch.isfinite(reference)
    share_two = float((off[finite] > 1.0).double().mean())
    worst = float(off[finite].max())
    if share_two > APPLY_MAX_SHARE_BEYOND_ONE_STEP:
        res.failed(f"within {dtype}'s tolerance ({cmp}), but {100 * share_two:.1f} % of the outputs are more than one "
                   f"bf16 step from the fp32 result (worst {worst:.0f} steps), {what}")
        res.hint("the result is rounded to bfloat16 more than once: somewhere a step runs in bf16 (a T.Cast(dtype, "
                 "...) of Rstd, or a product of two bf16 values before the cast to float32). Compute "
                 "v = T.Cast('float32', x) * rstd * T.Cast('float32', gamma) and the SiLU in float32, and cast once, "
                 "into y")
        return False
    res.passed(f"matches silu(x * rstd * gamma) in fp32 ({what}): {cmp}; every output within "
               f"{'one bf16 step' if worst <= 1 else f'{worst:.1f} bf16 steps'} of the fp32 result "
               f"({100 * share_two:.3f} % beyond one step: rounded once)")
    return True
