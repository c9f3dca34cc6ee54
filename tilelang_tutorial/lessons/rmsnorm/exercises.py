"""Notebook 05's exercises (1, 2) and notebook 05b's (3, 4: below, after exercise 1's checker).

1. **Choose the layout configuration** for C = 640 (fp16): how many threads share a row
   (``group``) and how many threads a block has (``threads``). Give
   ``RMSNormSiLUConfig(group=..., threads=...)`` (from the lesson's ``kernel`` module) to
   ``check_rmsnorm_config(config)``. The checker builds ``rmsnorm_silu_program(640, config=...)``,
   compiles it (either mode) and reads what compilation can tell: 16-byte (``uint4``) loads of X
   and stores of Y, the size of the reduction (``AllReduce`` over ``group`` lanes), each
   thread's slice of the row, and ptxas's registers and spills (``inspector.resource_usage``, no
   GPU needed), then runs the kernel against the fp32 reference (GPU, or the tile emulator).
   A layout that pads the row where an unpadded one builds is rejected, with the width sweep's
   measurement where it has one; which correct layout is *fastest* is timed only on a GPU (○ here).

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
   vectors), and runs C = 96 and C = 640 with a ragged number of rows and a poisoned (NaN) output
   against the fp32 reference, on the GPU or in the tile emulator. The inputs hold ordinary rows
   and three kinds that catch shortcuts (:data:`ROW_KINDS`): rows where x + r exceeds fp16's
   range (a 16-bit sum overflows), rows whose mean square is below eps, and rows with x + r = 0
   (both need eps); a failure names the kinds of row that went wrong.

3. **The statistics pass, chunked** (05b): ``check_rms_stats(factory)``.
4. **The output pass in bf16, from a saved Rstd** (05b): ``check_apply_rstd(factory)``.

Solutions: ``solutions/config.py``, ``solutions/residual.py``, ``solutions/rms_stats.py`` and
``solutions/apply_rstd.py`` in this lesson's folder.
"""
import re

from ... import checks, runtime
from ...exercise_kit import (ExerciseResult, call_factory, compile_or_fail, kernel_source, not_attempted, param_specs,
                             quiet_tilelang, run_and_compare, run_kernel)

CPU_WIDTH = 96
RUN_WIDTHS = (96, 640)
RAGGED_M = 1001
EPS = 1e-5


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
#: ``tiny`` rows hold |x|, |r| about 1e-3, a mean square of about 2e-6, below eps (1e-5), so a
#: kernel without eps scales them about 2.5x too much; ``zero`` rows hold r = -x exactly, where
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

    for width in RUN_WIDTHS:
        try:
            with quiet_tilelang():
                k = kernel if width == C else runtime.compile_kernel(factory(width, dtype), arch=arch)
        except Exception as exc:
            return res.failed(f"C = {width}: factory/compile failed: {type(exc).__name__}: {str(exc)[:300]}")
        if not _run_residual(res, k, width, dtype):
            return res
    return res


def _run_residual(res: ExerciseResult, kernel, C: int, dtype: str) -> bool:
    """Run the reader's kernel on :func:`residual_inputs`, compare each kind of row with the fp32
    reference and name the mistake the failing kinds point to. True when everything matched."""
    import torch

    m = runtime.mode()
    where = "the GPU" if m.can_run else "the emulator (CPU)"
    x, r, gamma = residual_inputs(C, dtype, m.device)
    y = checks.poisoned(x.shape, getattr(torch, dtype), m.device)
    if not run_kernel(res, kernel, x, r, gamma, y, EPS):
        return False
    tolerance = checks.TOLERANCE[dtype]
    reference = residual_rmsnorm_silu_reference(x, r, gamma)
    whole = checks.compare(y, reference, tolerance=tolerance)
    what = f"C = {C}, M = {x.shape[0]}, ran in {where}"
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
    matched = [advice for mistake, advice in _MISTAKES if _same(y, mistake(x, r, gamma), tolerance)]
    if matched:
        res.hint(matched[0])
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


#: (what a plausible mistake computes, the advice when the reader's output matches it)
_MISTAKES = (
    (lambda x, r, g: _silu(x.float() * _rstd(x.float()) * g.float() + r.float()),
     "the output equals silu(rms_norm(x) * gamma + r): r is added after the norm; add it first, h = x + r, and "
     "normalise h"),
    (lambda x, r, g: _rows(x.float(), _rstd(x.float()), g),
     "the output equals silu(rms_norm(x) * gamma): R is never added"),
    (lambda x, r, g: _rows((x + r).float(), _rstd((x + r).float()), g),
     "the output equals the formula with x + r added in 16 bits: where the sum exceeds 65504 (fp16's largest "
     "value) it is inf, and its row is lost. Cast each input to float32 before adding: "
     "T.Cast('float32', x[i, j]) + T.Cast('float32', r[i, j])"),
    (lambda x, r, g: _rows(x.float() + r.float(), _mean_square(x.float() + r.float()).rsqrt(), g),
     "the output equals the formula without eps: rows whose mean square is below eps (1e-5) are scaled too much, "
     "and x + r = 0 gives 1/sqrt(0) = inf, times 0 = NaN. eps belongs inside the square root, "
     "T.rsqrt(sum_of_squares / C + eps)"),
    (lambda x, r, g: _rows(x.float() + r.float(), _mean_square(x.float() + r.float()).rsqrt() + EPS, g),
     "the output equals 1/sqrt(mean(h^2)) + eps, eps added after the root (TileLang's examples/norm/rms_norm.py "
     "writes it so, with 1e-12): wrong wherever 1/rms is not much larger than eps. eps belongs inside the square "
     "root, T.rsqrt(sum_of_squares / C + eps)"),
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


def _rstd(h):
    import torch

    return torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)


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
        res.passed(f"the sum of squares is reduced across exactly the {g} lanes of a row"
                   + (" (no shuffle at all: one lane holds the whole row)" if g == 1 else " (warp shuffles)"))
    usage = None
    if src:
        try:
            usage = next(iter(resource_usage(kernel).values()))
        except Exception as exc:  # ptxas missing: say so, do not fail the reader
            res.skipped(f"registers/spills not checked: ptxas -v failed ({type(exc).__name__}: {exc})")
    if usage is not None:
        if usage["spill_stores"] or usage["spill_loads"]:
            return res.failed(f"ptxas: {usage['registers']} registers/thread and {usage['spill_stores']} B spilled to local "
                              f"memory: {v * rs.VEC} elements of the row per thread is too many; use a larger group")
        res.passed(f"ptxas: {usage['registers']} registers/thread, nothing spilled")
    if usage is not None:
        resident = min(2048, 65536 // max(usage["registers"], 1) // 32 * 32)
        if resident < 1024:
            res.hint(f"{usage['registers']} registers/thread: an SM's 65,536 registers hold at most {resident} such "
                     f"threads of its 2,048, so fewer 16-byte loads are in flight per SM")
    import torch

    dev = runtime.mode().device
    tdt = getattr(torch, dtype)
    x = checks.random_tensor((RAGGED_M, C), tdt, dev)
    gamma = checks.random_tensor((C,), tdt, dev)
    y = checks.poisoned((RAGGED_M, C), tdt, dev)
    run_and_compare(res, kernel, (x, gamma, y, EPS), rs.rmsnorm_silu_reference(x, gamma, EPS), out=y,
                    tolerance=checks.TOLERANCE[dtype], what=f"silu(rms_norm(x) * gamma) in fp32, C = {C}, M = {RAGGED_M}")
    if not res.ok:
        return res
    measured = _measured_groups(C)
    if v * g != n_vec:
        unpadded = [d for d in valid if n_vec % d == 0]
        res.failed(f"group = {g} pads the row: {g} lanes x {v} vectors = {v * g} slots for {n_vec} vectors, "
                   f"{v * g - n_vec} per row ({100 * (v * g - n_vec) / (v * g):.0f}%) empty, where groups of "
                   f"{', '.join(map(str, unpadded))} lanes divide the row (correct, but every empty slot is computed and thrown away)")
        if g in measured:
            best = max(measured, key=measured.get)
            res.hint(f"measured at C = {C} ({_widths_source()}): {g} lanes {measured[g]:.0f} GB/s, "
                     f"{best} lanes {measured[best]:.0f} GB/s")
        else:
            res.hint(f"over the widths the sweep recorded (the op's layout at each), {_padding_span()}")
        return res
    res.passed(f"no padding: {g} lanes x {v} vectors = the row's {n_vec} vectors")
    note = (f"the width sweep measured {', '.join(f'{k} lanes {val:.0f} GB/s' for k, val in sorted(measured.items()))} "
            f"at C = {C} ({_widths_source()})" if measured else "the width sweep has no record of this width")
    if runtime.mode().can_run:
        res.skipped(f"which layout is fastest is timed, not judged: {_time_layouts(C, dtype, config, measured)}; {note}")
    else:
        res.skipped(f"which layout is fastest, and why, is NOT checked here: a GPU timing would verify it (this "
                    f"checker times your layout against the measured ones when it runs on a GPU); {note}")
    return res


def _measured_groups(C: int) -> dict:
    """{group: GB/s} the width sweep (``rmsnorm_widths``) measured at width C; {} without a current record."""
    from ... import report

    try:
        records = report.records("rmsnorm_widths", where={"shape.C": C})
    except Exception:
        return {}
    return {c["config"]["group"]: c["quick_gbps"] for r in records for c in r.get("candidates", [])}


def _widths_source() -> str:
    from ... import results

    doc = results.load_file("rmsnorm_widths") or {}
    prov = doc.get("provenance", {})
    return f"{prov.get('gpu', 'GPU')}, {str(prov.get('date', ''))[:10]}, fp16"


def _padding_span() -> str:
    from ... import report
    from . import kernel as rs

    try:
        records = report.records("rmsnorm_widths")
    except Exception:
        records = []
    padded = [r["ratio_to_ceiling"] for r in records
              if rs.vectors_per_thread(r["shape"]["C"], r["config"]["group"]) * r["config"]["group"] != r["shape"]["C"] // rs.VEC]
    flat = [r["ratio_to_ceiling"] for r in records
            if rs.vectors_per_thread(r["shape"]["C"], r["config"]["group"]) * r["config"]["group"] == r["shape"]["C"] // rs.VEC]
    if not padded or not flat:
        return "no current record compares padded and unpadded layouts"
    return (f"padded layouts reached {min(padded):.2f}-{max(padded):.2f} of copy bandwidth, unpadded ones "
            f"{min(flat):.2f}-{max(flat):.2f} ({_widths_source()})")


def _time_layouts(C, dtype, config, measured) -> str:
    """GB/s of the reader's layout and of the measured ones, on this GPU (2^20 rows)."""
    import torch

    from ... import timing
    from . import kernel as rs

    M = 1 << 20
    x = checks.random_tensor((M, C), getattr(torch, dtype), "cuda")
    gamma = checks.random_tensor((C,), getattr(torch, dtype), "cuda")
    y = torch.empty_like(x)
    configs = {"yours": config}
    configs.update({f"{g} lanes": rs.RMSNormSiLUConfig(group=g, threads=max(256, g)) for g in measured if g != config.group})
    out = []
    for label, cfg in configs.items():
        try:
            kernel = runtime.compile_kernel(rs.rmsnorm_silu_program(C, dtype, cfg))
            ms = timing.median_ms(lambda: runtime.run(kernel, x, gamma, y, EPS))
        except Exception as exc:   # a timing that fails is reported, never a verdict
            out.append(f"{label}: timing failed ({type(exc).__name__})")
            continue
        out.append(f"{label} ({cfg.group} lanes) {4 * M * C / ms / 1e6:.0f} GB/s")
    return "on this GPU, " + ", ".join(out)


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
#: ``tiny`` rows |x| about 1e-3 (mean square about 1e-6, below eps = 1e-5: eps decides the result);
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
    for C, (program, kernel) in kernels.items():
        x = rms_stats_inputs(C, dtype, m.device)
        out = checks.poisoned((x.shape[0],), torch.float32, m.device)
        if not run_kernel(res, kernel, x, out, EPS, label=f"C = {C}"):
            return res
        if not _stats_compare(res, x, out, C, where):
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


def _stats_candidates(x, C):
    """(what a plausible mistake stores, the advice when Rstd equals it)."""
    import torch

    sq = x.float().pow(2)
    total = sq.sum(-1)
    out = [
        (torch.rsqrt(total / C), "Rstd equals 1/sqrt(mean(x^2)) without eps: a row of zeros gives 1/sqrt(0) = inf, "
                                 "and rows whose mean square is below eps come out too large. eps belongs inside the "
                                 "square root, T.rsqrt(total / C + eps)"),
        (torch.rsqrt(total / C) + EPS, "Rstd equals 1/sqrt(mean(x^2)) + eps, eps added after the root: eps belongs "
                                       "inside the square root, T.rsqrt(total / C + eps)"),
        (torch.rsqrt(total + EPS), "Rstd equals 1/sqrt(sum(x^2) + eps): the 1/C of the mean is missing"),
        (torch.sqrt(total / C + EPS), "Rstd equals sqrt(mean(x^2) + eps), the rms itself: store its inverse, "
                                      "T.rsqrt(...)"),
        (total / C + EPS, "Rstd equals mean(x^2) + eps: the square root's inverse is missing, T.rsqrt(...)"),
    ]
    for b in (128, 64, 32):
        if C % b == 0 and C > b:
            last = sq[:, C - b:].sum(-1)
            out.append((torch.rsqrt(last / C + EPS),
                        f"Rstd equals the formula over the last {b} columns only: the running total is overwritten by "
                        f"each chunk's sum (total[i] = part[i]) instead of accumulated (total[i] += part[i])"))
            out.append((torch.rsqrt(last / b + EPS),
                        f"Rstd equals the formula over the last chunk of {b} columns, divided by {b}: accumulate "
                        f"the chunks' sums (+=) and divide by C, the whole row"))
            out.append((torch.rsqrt(total / b + EPS),
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


def _stats_compare(res, x, out, C, where) -> bool:
    import torch

    reference = rms_stats_reference(x)
    what = f"C = {C}, M = {x.shape[0]}, ran in {where}"
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
    for candidate, advice in _stats_candidates(x, C):
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
