"""Mutation testing of the tutorial's checks: does every check reject a wrong kernel?

A *mutant* is a kernel's (or an exercise solution's) source with one mistake typed in at one
place, made by rule (:func:`generate`):

* ``grid_swap``: the first two grid extents of ``T.Kernel(...)`` swapped;
* ``index_swap``: two block indices (``bx``, ``by``, ``bz``) swapped in one index expression;
* ``ceildiv``: ``T.ceildiv(a, b)`` -> ``(a // b)`` (the ragged last tile dropped);
* ``neg_inf``: ``-T.infinity(...)`` -> ``0`` (a max's start value);
* ``constant``: a number in an expression, a fill or an assignment changed (``0`` -> ``1``,
  ``n`` -> ``n + 1``, ``c`` -> ``2 c``);
* ``drop``: one statement dropped (a ``T.clear``, a ``T.fill``, a barrier/fence/sync, a rescale
  ``*=`` or ``/=``);
* ``accumulate``: ``a += b`` -> ``a = b``;
* ``narrow``: an fp32 accumulator (``alloc_fragment`` / ``alloc_local``) given the input dtype;
* ``param``: a scalar parameter replaced by the value the check passes (``alpha`` -> ``0.5``);
* ``mask``: a comparison's ``<`` <-> ``<=`` (``>`` <-> ``>=``).

An exercise whose answer is data (a configuration, a table, a dict of predictions) is mutated by
:func:`data_mutants` instead: a number off by one, halved or doubled, two numbers swapped, a
boolean flipped.

Only the kernel's own code is mutated: the bodies of the ``@T.prim_func`` / ``@T.macro``
functions a factory defines, or the body of an eager ``@tilelang.jit`` function (never the
signatures, the tensor annotations or the factory's Python around them).

Each mutant has a stable id, ``rule Lline: old -> new`` (the line counted in the target's own
source), and is built with :func:`tilelang_tutorial.exercise_kit.mutated`. A :class:`Target` is a
function plus the check a notebook or an exercise runs on it; a mutant is *killed* when that check
rejects it (a failing comparison, a compile error, the emulator stopping or refusing it, or warning
of a race or an uninitialised read that the right answer does not give) and *survives* when the
check passes. A survivor is a weakness of the check, unless it is an
*equivalent* mutant (the same results on every input): each lesson's ``mutants.py`` lists those
by id with a one-line reason. ``python -m tilelang_tutorial mutants`` runs them all.

This module never imports a lesson: the command line finds each lesson's ``mutants.py``.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import random
import re
import textwrap
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

RULES = ("grid_swap", "index_swap", "ceildiv", "neg_inf", "constant", "drop", "accumulate", "narrow",
         "param", "mask")
BLOCK_INDICES = ("bx", "by", "bz")
#: Statements the ``drop`` rule removes: calls whose name is one of these, or contains one of
#: the words after them (barriers, fences, syncs).
DROPPED_CALLS = ("clear", "fill")
DROPPED_WORDS = ("barrier", "fence", "sync")
FLIPPED = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}
OPERATOR = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True, order=True)
class Mutant:
    """One replacement ``old -> new`` in a target's source: ``old`` starts at ``line`` (1-based,
    in the dedented source of the target function), column ``col``."""

    line: int
    col: int
    rule: str
    old: str
    new: str
    context: str = field(default="", compare=False)   # the whole lines holding ``old``, as in the source
    replaced: str = field(default="", compare=False)  # those lines with ``old`` replaced

    @property
    def id(self) -> str:
        old, new = (" ".join(s.split()) for s in (self.old, self.new))
        return f"{self.rule} L{self.line}: {old} -> {new}"


def function_of(target_function) -> Callable:
    """The Python function whose source is mutated: the function itself, or the one an eager
    ``@tilelang.jit`` object wraps (its ``func.orig_func``)."""
    inner = getattr(getattr(target_function, "func", None), "orig_func", None)
    return inner if inner is not None else target_function


def source_of(target_function) -> str:
    return textwrap.dedent(inspect.getsource(function_of(target_function)))


def _is_kernel_def(node) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        word in ast.unparse(d) for d in node.decorator_list for word in ("prim_func", "macro", "jit"))


def _kernel_bodies(tree: ast.Module) -> list[list[ast.stmt]]:
    """The statement lists that are kernel code: each ``@T.prim_func`` / ``@T.macro`` /
    ``@tilelang.jit`` function's body (outermost only), else the whole function's body."""
    top = tree.body[0]
    bodies = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if _is_kernel_def(child):
                bodies.append(child.body)
            else:
                visit(child)

    if _is_kernel_def(top):
        return [top.body]
    visit(top)
    return bodies or [top.body]


class _Source:
    """The dedented source with ast positions turned into text (columns are UTF-8 byte offsets)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(True)

    def _offset(self, line: int, col: int) -> int:
        before = sum(len(l) for l in self.lines[:line - 1])
        return before + len(self.lines[line - 1].encode()[:col].decode())

    def segment(self, node) -> tuple[int, int]:
        return (self._offset(node.lineno, node.col_offset), self._offset(node.end_lineno, node.end_col_offset))

    def get(self, node) -> str:
        a, b = self.segment(node)
        return self.text[a:b]

    def mutant(self, rule: str, start, end, new: str) -> Mutant:
        """The replacement of the text from node ``start``'s beginning to node ``end``'s end by ``new``."""
        a, _ = self.segment(start)
        _, b = self.segment(end)
        first, last = start.lineno, end.end_lineno
        # whole lines, widened upwards until they occur once (exercise_kit.mutated's requirement)
        while True:
            lo = sum(len(l) for l in self.lines[:first - 1])
            hi = sum(len(l) for l in self.lines[:last])
            context = self.text[lo:hi]
            if self.text.count(context) == 1 or first == 1:
                break
            first -= 1
        replaced = context[:a - lo] + new + context[b - lo:]
        line_text = self.lines[start.lineno - 1]
        col = len(line_text.encode()[:start.col_offset].decode())
        return Mutant(start.lineno, col, rule, self.text[a:b], new, context, replaced)


def _constant_change(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value == 0:
        return "1" if isinstance(value, int) else "1.0"
    if isinstance(value, int):
        return str(value + 1)
    return repr(value * 2)


#: Calls whose positional arguments are values (a fill's value, a max's floor, a select's branches),
#: not shapes or options: the ``constant`` rule changes a number given to them.
VALUE_CALLS = ("fill", "max", "min", "if_then_else")


def _value_argument(parent, node) -> bool:
    return (isinstance(parent, ast.Call) and getattr(parent.func, "attr", "") in VALUE_CALLS
            and any(a is node for a in parent.args[1 if getattr(parent.func, "attr", "") == "fill" else 0:]))


def generate(target_function, *, params: dict | None = None, input_dtype: str | None = None) -> list[Mutant]:
    """Every mutant of ``target_function`` by the rules above, in source order (line, column, rule).

    ``params``: ``{name: text}``, the scalar parameters the ``param`` rule replaces by the value the
    check passes. ``input_dtype``: the text an fp32 accumulator is narrowed to (default: the
    function's ``dtype`` or ``in_dtype`` parameter, else ``"float16"``)."""
    src = _Source(source_of(target_function))
    tree = ast.parse(src.text)
    if input_dtype is None:
        top = tree.body[0]
        names = [a.arg for a in top.args.args + top.args.kwonlyargs]
        input_dtype = next((n for n in ("dtype", "in_dtype") if n in names), '"float16"')
    params = params or {}
    found: dict[tuple, Mutant] = {}

    def add(m: Mutant | None):
        if m is not None and m.old != m.new:
            found.setdefault((m.line, m.col, m.rule, m.old, m.new), m)

    parents: dict[ast.AST, ast.AST] = {}
    nodes = []
    for body in _kernel_bodies(tree):
        for stmt in body:
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None:   # eager mode's tensor annotations
                continue
            for node in ast.walk(stmt):
                nodes.append(node)
                for child in ast.iter_child_nodes(node):
                    parents[child] = node

    for node in nodes:
        if isinstance(node, ast.Call):
            fname = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if fname == "Kernel" and len(node.args) >= 2:
                for i, j in ((0, 1), (1, 2))[: len(node.args) - 1]:
                    a, b = node.args[i], node.args[j]
                    if ast.unparse(a) != ast.unparse(b):
                        add(src.mutant("grid_swap", a, b, f"{src.get(b)}, {src.get(a)}"))
            elif fname == "ceildiv" and len(node.args) == 2:
                add(src.mutant("ceildiv", node, node, f"({src.get(node.args[0])} // {src.get(node.args[1])})"))
            elif fname in ("alloc_fragment", "alloc_local"):
                dtype_arg = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "dtype"), None)
                narrowable = dtype_arg is not None and (
                    (isinstance(dtype_arg, ast.Constant) and dtype_arg.value == "float32")
                    or (isinstance(dtype_arg, ast.Name) and "accum" in dtype_arg.id))
                if narrowable:
                    add(src.mutant("narrow", dtype_arg, dtype_arg, input_dtype))
        elif isinstance(node, ast.Subscript):
            present = [n for n in BLOCK_INDICES
                       if any(isinstance(x, ast.Name) and x.id == n for x in ast.walk(node.slice))]
            for i, a in enumerate(present):
                for b in present[i + 1:]:
                    text = src.get(node.slice)
                    swapped = re.sub(rf"\b({a}|{b})\b", lambda m: b if m.group(1) == a else a, text)
                    add(src.mutant("index_swap", node.slice, node.slice, swapped))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = node.operand
            if isinstance(operand, ast.Call) and getattr(operand.func, "attr", "") == "infinity":
                add(src.mutant("neg_inf", node, node, "0"))
        elif isinstance(node, ast.Constant):
            parent = parents.get(node)
            new = _constant_change(node.value)
            if new is None or parent is None:
                continue
            if isinstance(parent, (ast.BinOp, ast.Compare, ast.Assign, ast.AugAssign)) or _value_argument(parent, node):
                add(src.mutant("constant", node, node, new))
            elif isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
                grand = parents.get(parent)
                if isinstance(grand, (ast.BinOp, ast.Compare, ast.Assign, ast.AugAssign)) or _value_argument(grand, parent):
                    add(src.mutant("constant", parent, parent, f"-{new}"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname in DROPPED_CALLS or any(w in fname.lower() for w in DROPPED_WORDS):
                add(src.mutant("drop", node, node, "pass"))
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.op, (ast.Mult, ast.Div)):
                add(src.mutant("drop", node, node, "pass"))
            elif isinstance(node.op, ast.Add):
                add(src.mutant("accumulate", node, node, f"{src.get(node.target)} = {src.get(node.value)}"))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPPED:
            new = f"{src.get(node.left)} {FLIPPED[type(node.ops[0])]} {src.get(node.comparators[0])}"
            add(src.mutant("mask", node, node, new))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in params:
            add(src.mutant("param", node, node, str(params[node.id])))
    return sorted(found.values())


def build(target_function, mutant: Mutant):
    """The target rebuilt from its source with the mutant's one replacement (what
    :func:`~tilelang_tutorial.exercise_kit.mutated` builds: a factory, or an eager function).
    A variant renamed after it was built from another factory's source (``last_rows.variant_of``)
    is rebuilt under the name its source defines."""
    from .exercise_kit import mutated

    function = function_of(target_function)
    defined = ast.parse(source_of(function)).body[0].name
    if defined != function.__name__:
        renamed = types.FunctionType(function.__code__, function.__globals__, defined, function.__defaults__,
                                     function.__closure__)
        renamed.__kwdefaults__, renamed.__module__ = function.__kwdefaults__, function.__module__
        renamed.__qualname__ = defined
        function = renamed
    return mutated(function, (mutant.context, mutant.replaced))


# --------------------------------------------------------------------------------------------
# Answers that are data (a configuration, a table, a dict of predictions)

DATA_RULES = ("off_by_one", "scale", "swap", "flip")


def _entries(answer) -> list[tuple[str, Any]]:
    """The named numbers and booleans of a data answer: ``[(path, value)]`` (a dataclass's fields,
    a dict's keys, a nested list's positions)."""
    if dataclasses.is_dataclass(answer):
        items = [(f.name, getattr(answer, f.name)) for f in dataclasses.fields(answer)]
    elif isinstance(answer, dict):
        items = list(answer.items())
    elif isinstance(answer, (list, tuple)):
        items = list(enumerate(answer))
    else:
        return []
    found = []
    for name, value in items:
        label = f"[{name}]" if isinstance(name, int) else f".{name}" if dataclasses.is_dataclass(answer) else f"[{name!r}]"
        if isinstance(value, (bool, int, float)):
            found.append((label, value))
        else:
            found += [(label + sub, v) for sub, v in _entries(value)]
    return found


def _replaced(answer, path: str, value):
    """``answer`` with the entry at ``path`` (as :func:`_entries` names it) set to ``value``; a
    dataclass is rebuilt with ``dataclasses.replace`` (its own checks run)."""
    head = re.match(r"\.(\w+)|\[('?)(.+?)\2\]", path)
    rest = path[head.end():]
    if head.group(1):
        key = head.group(1)
        return dataclasses.replace(answer, **{key: _replaced(getattr(answer, key), rest, value) if rest else value})
    key = head.group(3) if head.group(2) else int(head.group(3))
    copy = dict(answer) if isinstance(answer, dict) else list(answer)
    copy[key] = _replaced(copy[key], rest, value) if rest else value
    return copy if not isinstance(answer, tuple) else tuple(copy)


def data_mutants(answer) -> list[Mutant]:
    """Wrong answers made from a data answer by rule: each number off by one (``n - 1``, ``n + 1``),
    each int above 1 halved and doubled (``scale``), each pair of different numbers of one kind
    swapped (``swap``: a table's cells, two knobs), each boolean flipped. A :class:`Mutant` whose
    ``line`` is 0, ``col`` the entry's position, ``old`` its path and ``new`` the change; the
    wrong answer itself is :func:`build_data`'s."""
    entries = _entries(answer)
    found = []
    for col, (path, value) in enumerate(entries):
        if isinstance(value, bool):
            found.append(Mutant(0, col, "flip", path, f"{path} = {not value}"))
            continue
        for new in (value - 1, value + 1):
            found.append(Mutant(0, col, "off_by_one", path, f"{path} = {new!r}"))
        if isinstance(value, int) and value > 1:
            for new in (value // 2, value * 2):
                found.append(Mutant(0, col, "scale", path, f"{path} = {new!r}"))
        for other_path, other in entries[col + 1:]:
            if type(other) is type(value) and other != value:
                found.append(Mutant(0, col, "swap", path, f"{path} <-> {other_path}"))
    return found


def build_data(answer, mutant: Mutant):
    """The wrong answer ``mutant`` describes (a dataclass that refuses it raises its error)."""
    values = dict(_entries(answer))
    if mutant.rule == "swap":
        first, second = (part.strip() for part in mutant.new.split("<->"))
        return _replaced(_replaced(answer, first, values[second]), second, values[first])
    return _replaced(answer, mutant.old, ast.literal_eval(mutant.new.split(" = ", 1)[1]))


# --------------------------------------------------------------------------------------------
# Targets and their checks


@dataclass(frozen=True)
class Target:
    """A function a notebook teaches or an exercise's solution, and the check run on an answer.

    ``check(answer) -> (passed, detail)``: the notebook's or the exercise's own check, with the
    mutant as the answer. ``params`` / ``input_dtype``: see :func:`generate`."""

    name: str
    function: Any
    check: Callable[[Any], tuple]
    params: dict = field(default_factory=dict)
    input_dtype: str | None = None

    @property
    def is_data(self) -> bool:
        """An answer that is data (a configuration, a table), not a function: mutated by :func:`data_mutants`."""
        return not callable(self.function) or dataclasses.is_dataclass(self.function)

    def mutants(self) -> list[Mutant]:
        if self.is_data:
            return data_mutants(self.function)
        return generate(self.function, params=self.params, input_dtype=self.input_dtype)

    def build(self, mutant: Mutant):
        return build_data(self.function, mutant) if self.is_data else build(self.function, mutant)


def verdict(res) -> tuple:
    """An :class:`~tilelang_tutorial.exercise_kit.ExerciseResult` as ``(passed, detail)``: passed
    when its verdict is ✔ (numbers not verified, the emulator refusing the kernel, is no pass)."""
    passed = bool(res.ok) and (res.numerics_checked or res.cpu_only)
    failing = [l for l in res.lines if l.startswith("✘")]
    return passed, (failing[0] if failing else res.verdict)


def result_check(checker) -> Callable[[Any], tuple]:
    """A checker ``checker(answer, verbose=False) -> ExerciseResult`` (an exercise's, or a lesson's
    check of a kernel cell) as a target's check."""
    return lambda answer: verdict(checker(answer, verbose=False))


def exercise_check(exercise) -> Callable[[Any], tuple]:
    """The exercise's checker as a target's check."""
    return result_check(exercise.check)


def exercise_target(exercise, **options) -> Target:
    return Target(exercise.name, exercise.solution, exercise_check(exercise), **options)


def compare_run(program, inputs: list, reference, *, tolerance: float, output: int = -1, scalars=()) -> tuple:
    """A kernel cell's check: compile ``program`` as the notebook does, run it on ``inputs`` (the
    output poisoned) in the emulator (or on the GPU), and compare ``inputs[output]`` with
    ``reference``; ``(passed, the comparison's line)``."""
    from . import checks, runtime

    kernel = runtime.compile_kernel(program)
    runtime.run(kernel, *inputs, *scalars)
    cmp = checks.compare(inputs[output], reference, tolerance=tolerance)
    return cmp.ok, str(cmp)


# --------------------------------------------------------------------------------------------
# Running


@dataclass
class Outcome:
    target: str
    mutant: Mutant
    killed: bool
    detail: str
    equivalent: str = ""   # the reviewed reason, where the mutant is listed as equivalent

    @property
    def key(self) -> str:
        return f"{self.target}: {self.mutant.id}"


def key(target_name: str, mutant: Mutant) -> str:
    """How a lesson's list of equivalent mutants names one: ``target: rule Lline: old -> new``."""
    return f"{target_name}: {mutant.id}"


def _checked(target: Target, answer) -> tuple[bool, str, dict]:
    """The target's check run on ``answer``: ``(passed, detail, warned)``, ``warned`` the emulator's
    warnings during the check by kind (``{"RaceWarning": its first message, ...}``)."""
    from . import emulate, runtime
    from .exercise_kit import quiet_tilelang

    # in the emulator on every machine: the checks build their inputs on the CPU, and the emulator
    # reports what a GPU would hang on or hide (a wrong parity, a race)
    with warnings.catch_warnings(record=True) as caught, quiet_tilelang(), runtime.emulated():
        warnings.simplefilter("always", emulate.EmulatorWarning)
        passed, detail = target.check(answer)
    warned = {}
    for w in caught:
        if issubclass(w.category, emulate.EmulatorWarning):
            warned.setdefault(w.category.__name__, str(w.message).splitlines()[0])
    return passed, detail, warned


def right_warnings(target: Target) -> frozenset:
    """The kinds of emulator warning the target's check gives its right answer (a short box's
    reads of rows it never loads, by design): a mutant is not killed by those."""
    if target.is_data:
        return frozenset()
    return frozenset(_checked(target, target.function)[2])


def judge(target: Target, mutant: Mutant, right: frozenset | None = None) -> tuple[bool, str]:
    """``(killed, why)``: the target's check run on the mutant. Killed when the check fails, the
    compile or the emulator stops or refuses it, or the emulator warns of a kind of finding (a
    race, a read of an element never written) that it does not give the right answer: the reader
    sees that warning under the check. ``right``: :func:`right_warnings` of the target (computed
    when not given)."""
    from .exercise_kit import _first_line

    try:
        answer = target.build(mutant)     # the factory's definition only: no kernel code runs yet
    except (TypeError, ValueError) as exc:
        if not target.is_data:
            raise
        return True, f"{type(exc).__name__}: {_first_line(exc)}"   # a configuration that refuses the value itself
    try:
        passed, detail, warned = _checked(target, answer)
    except Exception as exc:      # a compile error, the emulator stopping or refusing it
        return True, f"{type(exc).__name__}: {_first_line(exc)}"
    if passed and warned:
        new = {kind: message for kind, message in warned.items()
               if kind not in (right_warnings(target) if right is None else right)}
        if new:
            kind, message = next(iter(new.items()))
            return True, f"the emulator warned ({kind}): {message}"
    return (not passed), detail


def all_mutants(targets: list[Target]) -> list[tuple[Target, Mutant]]:
    return [(t, m) for t in targets for m in t.mutants()]


def select(pairs: list, sample: int | None, seed: int) -> list:
    """All of ``pairs``, or ``sample`` of them drawn with ``seed`` (kept in their order)."""
    if sample is None or sample >= len(pairs):
        return list(pairs)
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), sample))
    return [pairs[i] for i in chosen]


#: how a listed mutant that is a rounding within tolerance, not an equivalence, starts its reason
ROUNDING = "a rounding, not an equivalence"
#: how a listed mutant that is wrong on a GPU in a way the emulator does not model starts its reason
EMULATOR_LIMIT = "an emulator limit, not an equivalence"


@dataclass
class LessonReport:
    lesson: str
    outcomes: list
    seconds: float = 0.0

    @property
    def killed(self) -> int:
        return sum(o.killed for o in self.outcomes)

    @property
    def equivalent(self) -> int:
        return sum(1 for o in self.outcomes if not o.killed and o.equivalent)

    @property
    def roundings(self) -> int:
        """Listed mutants that change the result, but by less than the check's tolerance on every
        input the emulator can afford (their reason starts with :data:`ROUNDING`)."""
        return sum(1 for o in self.outcomes if not o.killed and o.equivalent.startswith(ROUNDING))

    @property
    def emulator_limits(self) -> int:
        """Listed mutants that are wrong on a GPU, through something the emulator does not model
        (their reason starts with :data:`EMULATOR_LIMIT`)."""
        return sum(1 for o in self.outcomes if not o.killed and o.equivalent.startswith(EMULATOR_LIMIT))

    @property
    def survivors(self) -> list:
        return [o for o in self.outcomes if not o.killed and not o.equivalent]

    @property
    def kill_rate(self) -> float:
        relevant = len(self.outcomes) - self.equivalent
        return self.killed / relevant if relevant else 1.0

    @property
    def strict_kill_rate(self) -> float:
        """The kill rate with the listed roundings and emulator limits counted as survivors."""
        relevant = len(self.outcomes) - self.equivalent + self.roundings + self.emulator_limits
        return self.killed / relevant if relevant else 1.0

    def summary(self) -> str:
        equivalent = self.equivalent - self.roundings - self.emulator_limits
        return (f"{self.lesson}: {len(self.outcomes)} mutants, {self.killed} killed, {equivalent} equivalent, "
                f"{self.roundings} roundings within tolerance and {self.emulator_limits} emulator limits (reviewed), "
                f"{len(self.survivors)} survived; kill rate {self.kill_rate:.1%} of the non-equivalent, "
                f"{self.strict_kill_rate:.1%} with the roundings and emulator limits counted as survivors "
                f"({self.seconds:.0f} s)")


def run_lesson(lesson: str, targets: list[Target], equivalent: dict, *, sample: int | None = None, seed: int = 0,
               progress: Callable[[str], None] | None = None) -> LessonReport:
    """Judge the lesson's mutants (or a seeded sample of them); ``equivalent``: ``{key: reason}``."""
    t0 = time.time()
    pairs = select(all_mutants(targets), sample, seed)
    outcomes, right = [], {}
    for i, (target, mutant) in enumerate(pairs, 1):
        if target.name not in right:
            right[target.name] = right_warnings(target)
        killed, detail = judge(target, mutant, right[target.name])
        outcome = Outcome(target.name, mutant, killed, detail, "" if killed else equivalent.get(key(target.name, mutant), ""))
        outcomes.append(outcome)
        if progress:
            state = "killed" if killed else ("equivalent" if outcome.equivalent else "SURVIVED")
            progress(f"[{lesson} {i}/{len(pairs)}] {state:10} {outcome.key}")
    return LessonReport(lesson, outcomes, time.time() - t0)


def main(lessons: dict, *, sample: int | None, seed: int) -> int:
    """``lessons``: ``{name: its mutants module}`` (``targets()``, ``EQUIVALENT``). Prints each
    lesson's counts and survivors; 1 when a non-equivalent mutant survived."""
    reports = []
    for name, module in lessons.items():
        report = run_lesson(name, module.targets(), getattr(module, "EQUIVALENT", {}), sample=sample, seed=seed,
                            progress=lambda line: print(line, flush=True))
        reports.append(report)
        print(report.summary(), flush=True)
        listed = getattr(module, "EQUIVALENT", {})
        for o in report.outcomes:
            if o.killed and o.key in listed:
                print(f"  KILLED, yet listed as equivalent: {o.key} (delete its entry)", flush=True)
    print("\n== mutants ==")
    for report in reports:
        print(report.summary())
        for o in report.survivors:
            print(f"  SURVIVED {o.key}\n           the check said: {o.detail[:200]}")
    return 1 if any(r.survivors for r in reports) else 0
