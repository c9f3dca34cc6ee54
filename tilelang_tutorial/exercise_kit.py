"""What every exercise checker shares: a verdict that never claims more than was checked, calling
a reader's factory safely, compiling it, and running it against a reference -- on the GPU where
there is one, in the tile emulator where there is not.

Every checker returns an :class:`ExerciseResult`; printing it gives one line per check and a
verdict. The marks are plain symbols that render in every font: ``✔`` checked and right, ``✘``
checked and wrong, ``○`` not checked here (only what needs hardware: timing). An unsolved starter
(``None``, or a factory that raises ``NotImplementedError`` or returns ``None``) is answered
with ``✘`` at once, before anything is compiled.
"""
from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass, field

PASS, FAIL, SKIP = "✔", "✘", "○"


@dataclass
class ExerciseResult:
    ok: bool = True                 # False as soon as one check failed
    numerics_checked: bool = False  # True once the kernel ran and matched the reference
    ran_on: str = ""                # "the GPU" or "the emulator (CPU)"
    lines: list = field(default_factory=list)
    cpu_only: bool = False          # an exercise with nothing to run: every check runs anywhere
    summary: str = ""               # optional: what the checks that ran were (a cpu_only ✔ verdict says it)

    def passed(self, msg: str) -> None:
        self.lines.append(f"{PASS} {msg}")

    def failed(self, msg: str) -> "ExerciseResult":
        self.ok = False
        self.lines.append(f"{FAIL} {msg}")
        return self

    def skipped(self, msg: str) -> None:
        self.lines.append(f"{SKIP} {msg}")

    def hint(self, msg: str) -> None:
        self.lines.append(f"  hint: {msg}")

    @property
    def verdict(self) -> str:
        if not self.ok:
            return f"{FAIL} NOT YET: see the failing check above"
        if self.cpu_only:
            return f"{PASS} PASSED: {self.summary or 'every check ran here'}"
        if self.numerics_checked:
            return f"{PASS} PASSED: compiled, ran in {self.ran_on} and matched the reference"
        return f"{SKIP} COMPILES, but correctness was NOT verified here (see above)"

    def __str__(self) -> str:
        return "\n".join(self.lines + [self.verdict])

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:  # a bare `check_...(f)` as a cell's last line shows the verdict once
        return f"<ExerciseResult ok={self.ok} numerics_checked={self.numerics_checked}>"


def not_attempted(res: ExerciseResult, what: str) -> ExerciseResult:
    """The reader has not written the answer yet: say what to write (nothing is compiled)."""
    return res.failed(f"not attempted yet: {what}")


@contextlib.contextmanager
def quiet_tilelang():
    """Keep TileLang's INFO lines and its dump of the traced builder source out of a checker's
    output: a failure is reported as one line plus a hint instead."""
    logger = logging.getLogger("tilelang")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


#: A kernel that faults on the GPU (an illegal address, a trap) leaves the process's CUDA context
#: unusable: every later CUDA call fails with the same error until the process restarts.
CUDA_FAULT_ADVICE = ("After a fault the GPU cannot be used again in this Python process: restart the "
                     "notebook's kernel (Kernel > Restart Kernel), fix the kernel cell and run the cells again")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if l.startswith("CUDA error"):          # torch's message; the lines after it are advice
            return f"{l}. {CUDA_FAULT_ADVICE}"[:400]
    # TileLang's own message (after its traceback of the builder) is the informative line
    for l in reversed(lines):
        if "Error" in l or "check failed" in l or "failed" in l:
            return l[:400]
    return (lines[-1] if lines else type(exc).__name__)[:400]


def call_factory(res: ExerciseResult, factory, args: tuple, what: str):
    """Call a reader's kernel factory; ``None`` on an unsolved starter or an error (already reported)."""
    if factory is None:
        not_attempted(res, what)
        return None
    try:
        with quiet_tilelang():
            program = factory(*args)
    except NotImplementedError:
        not_attempted(res, what)
        return None
    except Exception as exc:  # the reader's code: report, never crash the notebook
        res.failed(f"calling factory{args!r} raised {type(exc).__name__}: {_first_line(exc)}")
        return None
    if program is None:
        not_attempted(res, f"the factory returned None; {what}")
        return None
    if not hasattr(program, "buffer_map"):
        res.failed(f"factory{args!r} returned {type(program).__name__}, not a T.prim_func")
        return None
    return program


def compile_or_fail(res: ExerciseResult, program, arch: str):
    """Compile for ``arch``; report a failure in one line (TileLang's traced source is kept out)."""
    from . import runtime

    try:
        with quiet_tilelang():
            kernel = runtime.compile_kernel(program, arch=arch)
    except Exception as exc:
        res.failed(f"compiling for {arch} failed: {type(exc).__name__}: {_first_line(exc)}")
        return None
    if isinstance(kernel, runtime.UncompiledKernel):
        res.skipped(f"not compiled for {arch}: no nvcc here (the emulator still runs it)")
    else:
        res.passed(f"compiles for {arch}")
    return kernel


def kernel_source(kernel) -> str:
    """The generated CUDA, or "" where nothing was compiled (no nvcc)."""
    try:
        return kernel.get_kernel_source()
    except RuntimeError:
        return ""


def run_kernel(res: ExerciseResult, kernel, *inputs, label: str = "") -> bool:
    """Run ``kernel(*inputs)`` where this machine can (GPU, else the emulator). False, with the
    reason on ``res``, when it did not run: a construct the emulator refuses is *not checked*
    (never a pass), an emulator stop or any other error a failure (the reader's kernel never
    crashes the notebook). ``label`` prefixes the message (which case of several)."""
    from . import emulate, runtime

    where = "the GPU" if runtime.mode().can_run else "the emulator (CPU)"
    prefix = f"{label}: " if label else ""
    try:
        with quiet_tilelang():
            runtime.run(kernel, *inputs)
        if runtime.mode().can_run:
            import torch

            torch.cuda.synchronize()
    except emulate.UnsupportedConstruct as exc:
        res.skipped(f"{prefix}NOT CHECKED: the emulator cannot run this kernel ({exc}); correctness needs a GPU here")
        return False
    except emulate.EmulationError as exc:
        res.failed(f"{prefix}running it in the emulator stopped: {exc}")
        return False
    except Exception as exc:  # the reader's kernel: report, never crash the notebook
        res.failed(f"{prefix}running it on {where} failed: {type(exc).__name__}: {_first_line(exc)}")
        return False
    res.ran_on = where
    return True


def run_and_compare(res: ExerciseResult, kernel, inputs, reference, *, tolerance: float, what: str,
                    out=None, hint_unwritten: str = "", hint_wrong: str = "", extra_check=None) -> ExerciseResult:
    """Run ``kernel(*inputs)`` where this machine can (GPU, else the emulator), then compare the
    output ``out`` (default: the last input; poisoned with NaN by the caller) with ``reference``.

    ``extra_check(out) -> str | None`` may name a more specific mistake; ``hint_unwritten`` may be
    a function of ``out`` (a hint that depends on which elements were never written). Emulator
    limits (a construct it does not support) are reported as not checked, never as a pass.
    """
    from . import checks, runtime

    m = runtime.mode()
    where = "the GPU" if m.can_run else "the emulator (CPU)"
    if not run_kernel(res, kernel, *inputs):
        return res
    out = inputs[-1] if out is None else out
    cmp = checks.compare(out, reference, tolerance=tolerance)
    res.ran_on = where
    if not cmp.ok:
        found = _emulator_diagnosis(kernel, inputs, emulated=not m.can_run)
        if found:
            # A GPU's registers hold leftovers, not NaN: the numbers alone would point at the wrong
            # mistake. The emulator names the buffer read before it was set (or the race) instead.
            res.failed(f"wrong values, ran in {where}: {cmp}")
            return res.failed(f"the emulator, run on the same inputs, found the cause: {found}")
    if cmp.unwritten:
        res.failed(f"{cmp.unwritten} of {out.numel()} outputs were never written (still NaN), ran in {where}")
        hint = hint_unwritten(out) if callable(hint_unwritten) else hint_unwritten
        if hint:
            res.hint(hint)
        return res
    if cmp.nan:
        res.failed(f"{cmp.nan} of {out.numel()} outputs were written as NaN (computed, not left unwritten), "
                   f"ran in {where}")
        res.hint("a NaN the kernel computed usually comes from an accumulator read before it was set: "
                 "T.clear (or T.fill) every fragment you accumulate into before the loop")
        return res
    if not cmp.ok:
        specific = extra_check(out) if extra_check else None
        res.failed(f"wrong values against {what}, ran in {where}: {cmp}" + (f" — {specific}" if specific else ""))
        if hint_wrong:
            res.hint(hint_wrong)
        return res
    res.numerics_checked = True
    res.passed(f"matches {what} on fresh random inputs, ran in {where}: {cmp}")
    return res


def _emulator_diagnosis(kernel, inputs, *, emulated: bool) -> str | None:
    """A buffer read before it was set, or a race, in the run that just gave wrong values: the
    emulator's findings of that run (emulated mode), or of a run on CPU copies of the inputs (GPU
    mode). None when it finds nothing, or cannot run the kernel."""
    from . import emulate

    if emulated:
        findings = emulate.last_findings()
    else:
        import torch

        cpu = [t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        try:
            with quiet_tilelang():
                findings = emulate.check(kernel, *cpu)
        except Exception:          # refused construct, out of bounds, ...: no diagnosis to add
            return None
    for kind, what in (("uninit", "a buffer read before it was set"), ("race", "a race")):
        first = next((f for f in findings if f.kind == kind), None)
        if first is not None:
            return f"{what} -- {first.message}"
    return None


def param_specs(prim_func):
    """[(shape tuple, dtype str)] of a prim_func's parameters, in order (shapes as ints or names)."""
    specs = []
    for p in prim_func.params:
        buf = prim_func.buffer_map.get(p)
        if buf is None:
            specs.append((None, str(p.dtype)))
            continue
        shape = tuple(int(s) if hasattr(s, "value") or isinstance(s, int) else str(s) for s in buf.shape)
        specs.append((shape, str(buf.dtype)))
    return specs


def mutated(function, *edits):
    """``function`` rebuilt from its own source with each ``(old, new)`` edit applied: a wrong
    answer written as the one mistake it makes in a solution. ``old`` must occur exactly once in
    the function's source. The edited source is registered with ``linecache`` (``T.prim_func``
    reads the source of the kernel it parses) and runs in the function's module globals."""
    import hashlib
    import inspect
    import linecache
    import textwrap

    source = textwrap.dedent(inspect.getsource(function))
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{function.__qualname__}: {old!r} occurs {source.count(old)} times, not once")
        source = source.replace(old, new)
    filename = f"<{function.__module__}.{function.__qualname__} mutated {hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(function.__globals__)
    # dont_inherit: this module's `from __future__ import annotations` would turn the kernel's annotations
    # into strings, which T.prim_func cannot evaluate
    exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # noqa: S102 (a solution's own source, edited)
    return namespace[function.__name__]
