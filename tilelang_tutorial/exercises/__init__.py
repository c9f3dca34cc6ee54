"""Exercises: checkers that compile a reader's kernel in either mode, inspect what compilation
can tell, run it against the reference on a GPU, and answer with a clear verdict.

Every checker returns an :class:`ExerciseResult`; printing it gives one line per check
(✅ / ❌ / ⏭ for "could not be checked here") and a verdict.
"""
from dataclasses import dataclass, field

PASS, FAIL, SKIP = "✅", "❌", "⏭"


@dataclass
class ExerciseResult:
    ok: bool = True              # False as soon as one check failed
    numerics_checked: bool = False  # True only when the kernel ran on a GPU and was compared
    lines: list = field(default_factory=list)

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
        elif self.numerics_checked:
            verdict = f"{PASS} PASSED: compiled, ran and matched the reference"
        else:
            verdict = f"{PASS} COMPILES and passes every check possible here (the numerical check needs a GPU; not run)"
        return "\n".join(self.lines + [verdict])

    def __bool__(self) -> bool:
        return self.ok


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
