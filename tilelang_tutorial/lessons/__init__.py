"""The lessons: one folder per notebook, each holding that lesson's kernels, references,
exercises (checkers, solutions, wrong answers) and benchmark.

A lesson folder's ``__init__.py`` declares:

* ``NOTEBOOK``: the notebook's file name in ``notebooks/`` (its order is the lesson's order), and
  optionally ``EXTRA_NOTEBOOKS`` (an advanced part that follows it);
* ``compile_cases()``: the kernels the compile matrix builds, as :class:`CompileCase` objects;
* ``exercise_cases()``: its exercises, as :class:`Exercise` objects;
* ``flow_bugs()``: bugs the flow test injects into its notebooks' kernel cells, as
  :class:`FlowBug` objects (``tests/test_reader_flow.py``: every later check must report them);
* ``SUITES``: ``{suite: "module:function"}`` for its benchmark suites (``python -m
  tilelang_tutorial bench SUITE``), and it registers each suite's builder with
  :func:`tilelang_tutorial.results.register_suite` when imported.

Nothing outside this folder lists the lessons: :func:`all_lessons` finds them. Shared machinery
(runtime, emulator, checks, timing, results, report, inspector, layouts) never imports a lesson.
Adding a lesson is described in ``docs/adding-a-lesson.md``.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

#: Architectures the portable lesson kernels are compiled for in the compile matrix: Volta (V100)
#: and Turing (T4, the free GPU of Colab and Kaggle), Ampere, Ada, Hopper, Blackwell datacenter
#: (B200) and Blackwell consumer (RTX 50xx, compiled as the plain sm_120 so the same cubin would
#: serve every (12, x) part: runtime.ARCHS gives it the pass config it needs). Where the installed
#: nvcc cannot target one (CUDA 13 and sm_70), the runtime refuses it in one line before compiling.
PORTABLE = ("sm_70", "sm_75", "sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120")
HOPPER = ("sm_90a",)
#: Where the 152 KiB-of-shared-memory kernels (MLA) fit: A100, H100/H200, B200.
LARGE_SMEM = ("sm_80", "sm_90a", "sm_100a")


@dataclass(frozen=True)
class CompileCase:
    """A kernel the compile matrix builds: ``build(arch)`` for every architecture in ``archs``;
    ``unsupported`` maps the other architectures to the measured reason it cannot be built there."""

    name: str
    archs: tuple
    build: Callable[[str], Any]
    unsupported: dict = field(default_factory=dict)


@dataclass(frozen=True)
class WrongAnswer:
    """A plausible mistake, and a phrase the checker's message must contain when it rejects it."""

    name: str
    answer: Any
    says: str


@dataclass(frozen=True)
class Exercise:
    """An exercise: ``check(answer, verbose=False) -> ExerciseResult``, the reference solution,
    an unsolved starter (what the notebook's starter cell holds) and wrong answers."""

    name: str
    check: Callable[..., Any]
    solution: Any
    starter: Any
    wrong_answers: tuple = ()


@dataclass(frozen=True)
class FlowBug:
    """A bug a reader could type into a kernel cell, for the flow test (``tests/test_reader_flow.py``).

    The test copies ``notebook``, replaces ``old`` (which must occur exactly once) by ``new`` in the
    kernel cell whose marker line names ``cell``, and executes the copy up to the first markdown
    cell that starts with ``until``. Every code cell after the edited one, up to there, that prints a
    verdict must print a failing one (``✘``, ``FAIL`` or an exception, even beside the ``✔`` of
    steps that passed), none a passing one (``✔``, ``OK``, ``PASSED`` alone), and at least one
    must report the bug. A cell that has to use the package's
    copy of a kernel says so on its first line (``# ... the package's copy ...``) and is skipped.
    """

    notebook: str
    cell: str
    old: str
    new: str
    what: str = ""
    until: str = "## Exercises"


def lesson_names() -> list[str]:
    """The lesson folders, in notebook order."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if m.ispkg]
    return sorted(names, key=lambda n: load(n).NOTEBOOK)


def load(name: str):
    """The lesson package ``name`` (importing it registers its benchmark suites)."""
    return importlib.import_module(f"{__name__}.{name}")


def all_lessons() -> list:
    return [load(n) for n in lesson_names()]


def suites() -> dict[str, Callable]:
    """``{suite: run(quick=False) -> (records, provenance, goals)}`` over every lesson."""
    out = {}
    for lesson in all_lessons():
        for suite, target in getattr(lesson, "SUITES", {}).items():
            module, _, func = target.partition(":")
            out[suite] = (lesson.__name__, module, func)
    return out


def suite_runner(suite: str) -> Callable:
    lesson, module, func = suites()[suite]
    return getattr(importlib.import_module(f"{lesson}.{module}"), func)


def notebook_path(lesson):
    """``notebooks/<lesson.NOTEBOOK>`` (a lesson module or its folder name)."""
    from pathlib import Path

    module = load(lesson) if isinstance(lesson, str) else lesson
    return Path(__file__).resolve().parents[2] / "notebooks" / module.NOTEBOOK


def __getattr__(name):
    """``tt.lessons.<name>``: a lesson's package, imported when first used."""
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
