"""Exercises: checkers that compile a reader's kernel in either mode, inspect what compilation
can tell, run it against the reference on a GPU, and answer with a clear verdict.

Every checker returns an :class:`ExerciseResult`; printing it gives one line per check
(✅ / ❌ / ⏭ for "could not be checked here") and a verdict. Checkers print their result by
default (``verbose=True``) so a starter cell needs no ``print``.

Where things live:

* checkers: ``tilelang_tutorial/exercises/<topic>.py`` (``tile``, ``gemm``, ``layouts``, ``mla``,
  ``rmsnorm``), one ``check_...`` per exercise;
* reference solutions: ``tilelang_tutorial/solutions/`` (one module per exercise; try first!);
* plausible wrong answers the checkers must reject: ``tests/exercise_wrong_answers.py``.

An unsolved starter (``None``, or a factory that raises ``NotImplementedError`` or returns
``None``) is answered with ❌ at once, before anything is compiled.
"""
from dataclasses import dataclass, field

PASS, FAIL, SKIP = "✅", "❌", "⏭"


@dataclass
class ExerciseResult:
    ok: bool = True              # False as soon as one check failed
    numerics_checked: bool = False  # True only when the kernel ran on a GPU and was compared
    lines: list = field(default_factory=list)
    cpu_only: bool = False       # an exercise with nothing to launch: every check runs anywhere

    def passed(self, msg: str) -> None:
        self.lines.append(f"{PASS} {msg}")

    def failed(self, msg: str) -> "ExerciseResult":
        self.ok = False
        self.lines.append(f"{FAIL} {msg}")
        return self

    def skipped(self, msg: str) -> None:
        self.lines.append(f"{SKIP} {msg}")

    def __str__(self) -> str:
        if not self.ok:
            verdict = f"{FAIL} NOT YET: see the failing check above"
        elif self.cpu_only:
            verdict = f"{PASS} PASSED: every check ran here (this exercise needs no GPU)"
        elif self.numerics_checked:
            verdict = f"{PASS} PASSED: compiled, ran and matched the reference"
        else:
            verdict = f"{PASS} COMPILES and passes every check possible here (the numerical check needs a GPU; not run)"
        return "\n".join(self.lines + [verdict])

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:  # a bare `check_...(f)` as a cell's last line shows the verdict once
        return f"<ExerciseResult ok={self.ok} numerics_checked={self.numerics_checked}>"


def not_attempted(res: ExerciseResult, what: str) -> ExerciseResult:
    """The reader has not written the answer yet: say what to write (nothing is compiled)."""
    return res.failed(f"not attempted yet: {what}")


def call_factory(res: ExerciseResult, factory, args: tuple, what: str):
    """Call a reader's kernel factory; ``None`` on an unsolved starter or an error (already reported)."""
    if factory is None:
        not_attempted(res, what)
        return None
    try:
        program = factory(*args)
    except NotImplementedError:
        not_attempted(res, what)
        return None
    except Exception as exc:  # the reader's code: report, never crash the notebook
        res.failed(f"calling factory{args!r} raised {type(exc).__name__}: {exc}")
        return None
    if program is None:
        not_attempted(res, f"the factory returned None; {what}")
        return None
    if not hasattr(program, "buffer_map"):
        res.failed(f"factory{args!r} returned {type(program).__name__}, not a T.prim_func")
        return None
    return program


def compile_or_fail(res: ExerciseResult, program, arch: str):
    """Compile for ``arch`` (either mode); report a failure with the first lines of the error."""
    from . import runtime

    try:
        kernel = runtime.compile_kernel(program, arch=arch)
    except Exception as exc:
        lines = [l for l in str(exc).strip().splitlines() if l.strip()]
        head = " | ".join(lines[:3])[:700]
        res.failed(f"compiling for {arch} failed: {type(exc).__name__}: {head}")
        return None
    res.passed(f"compiles for {arch}")
    return kernel


def can_launch(arch: str) -> bool:
    """True when the kernel compiled for ``arch`` can be launched here (a GPU of that arch)."""
    from . import runtime

    m = runtime.mode()
    return bool(m.can_run and arch == m.arch)


def skip_numerics(res: ExerciseResult, what: str = "the numerical check", arch: str | None = None) -> ExerciseResult:
    """Say plainly what was not checked because nothing can be launched here."""
    from . import runtime

    m = runtime.mode()
    arch = arch or m.arch
    why = (f"a {m.device_name} is present but the kernel was built for {arch}" if m.device_name
           else f"no GPU here: compile-only mode, built for {arch}")
    res.skipped(f"NOT CHECKED: {what} needs a GPU to launch the kernel ({why})")
    return res


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
