"""Workshop exercises, over every lesson: each solution passes its checker, each plausible wrong
answer is rejected with a helpful message, unsolved starters fail fast without compiling, and
every notebook ends with its exercises.

Checkers verify numbers through the GPU when there is one and through the tile emulator when
there is not, so every wrong answer is rejected on any machine.
"""
import json
import time

import pytest

from tilelang_tutorial import kernel_cells, lessons, runtime
from tilelang_tutorial.exercise_kit import ExerciseResult

EXERCISES = {ex.name: (lesson, ex) for lesson in lessons.all_lessons() for ex in lesson.exercise_cases()}
WRONG = {f"{name}: {w.name}": (ex, w) for name, (_, ex) in EXERCISES.items() for w in ex.wrong_answers}


@pytest.mark.parametrize("name", list(EXERCISES))
def test_solution_passes_its_checker(name):
    _, ex = EXERCISES[name]
    res = ex.check(ex.solution, verbose=False)
    assert isinstance(res, ExerciseResult)
    assert res.ok, f"{name}:\n{res}"
    assert "PASSED" in str(res) and "✘" not in str(res), str(res)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_unsolved_starter_fails_fast_without_compiling(name, monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("an unsolved starter must not compile anything")

    monkeypatch.setattr(runtime, "compile_kernel", no_compile)
    _, ex = EXERCISES[name]
    t0 = time.time()
    res = ex.check(ex.starter, verbose=False)
    assert not res.ok and "not attempted yet" in str(res), str(res)
    assert time.time() - t0 < 2.0


@pytest.mark.parametrize("name", list(WRONG))
def test_checker_rejects_a_plausible_wrong_answer(name):
    import warnings

    from tilelang_tutorial import emulate

    ex, wrong = WRONG[name]
    with warnings.catch_warnings():
        # a wrong answer may read a buffer before it is set or race: the emulator's one-line warning
        # is the expected finding here (the checker's message, asserted below, carries it)
        warnings.simplefilter("ignore", emulate.EmulatorWarning)
        res = ex.check(wrong.answer, verbose=False)
    assert not res.ok, f"{name} was accepted:\n{res}"
    assert wrong.says in str(res), f"{name}: the message should mention {wrong.says!r}:\n{res}"


def test_every_exercise_has_a_wrong_answer():
    assert all(ex.wrong_answers for _, ex in EXERCISES.values())


def _cells(path):
    nb = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]) for c in nb["cells"]]


@pytest.mark.parametrize("lesson", lessons.all_lessons(), ids=lambda m: m.NOTEBOOK)
def test_every_exercise_is_checked_in_its_notebook_after_the_kernels(lesson):
    """Each exercise's checker is called by a code cell of the lesson's notebooks, after the last
    kernel cell of that notebook: the reader meets the exercises once the lesson's kernels are done."""
    paths = [lessons.notebook_path(lesson).parent / name for name in (lesson.NOTEBOOK, *getattr(lesson, "EXTRA_NOTEBOOKS", ()))]
    calls = {}
    for path in paths:
        last_kernel = max(c.index for c in kernel_cells.kernel_cells(path))
        for i, (kind, source) in enumerate(_cells(path)):
            for ex in lesson.exercise_cases():
                if kind == "code" and f"{ex.check.__name__}(" in source:
                    calls.setdefault(ex.name, []).append((path.name, i, i > last_kernel))
    missing = [ex.name for ex in lesson.exercise_cases() if ex.name not in calls]
    assert not missing, f"{lesson.NOTEBOOK}: no code cell calls the checker of {missing}"
    early = {name: where for name, where in calls.items() if not all(after for *_, after in where)}
    assert not early, f"exercise checkers called before the notebook's last kernel cell (notebook, cell): {early}"
    assert len(lesson.exercise_cases()) >= 2


@pytest.mark.parametrize("lesson", lessons.all_lessons(), ids=lambda m: m.NOTEBOOK)
def test_notebooks_do_not_import_solutions(lesson):
    for t, s in _cells(lessons.notebook_path(lesson)):
        if t == "code":
            assert ".solutions" not in s and "_solution" not in s, f"{lesson.NOTEBOOK} imports a solution:\n{s[:300]}"
