"""Workshop exercises, over every lesson: each solution passes its checker, each plausible wrong
answer is rejected with a helpful message, unsolved starters fail fast without compiling, and
every notebook ends with its exercises.

Checkers verify numbers through the GPU when there is one and through the tile emulator when
there is not, so every wrong answer is rejected on any machine.
"""
import json
import re
import time

import pytest

from tilelang_tutorial import kernel_cells, lessons, runtime
from tilelang_tutorial.exercise_kit import ExerciseResult

EXERCISES = {ex.name: (lesson, ex) for lesson in lessons.all_lessons() for ex in lesson.exercise_cases()}


def check_solution_passes(ex):
    res = ex.check(ex.solution, verbose=False)
    assert isinstance(res, ExerciseResult)
    assert res.ok, f"{ex.name}:\n{res}"
    assert "PASSED" in str(res) and "✘" not in str(res), str(res)


def check_unsolved_starter_fails_fast_without_compiling(ex, monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("an unsolved starter must not compile anything")

    monkeypatch.setattr(runtime, "compile_kernel", no_compile)
    t0 = time.time()
    res = ex.check(ex.starter, verbose=False)
    assert not res.ok and "not attempted yet" in str(res), str(res)
    assert time.time() - t0 < 2.0


def check_rejects_wrong_answer(ex, wrong, monkeypatch):
    """The checker rejects ``wrong`` and its message says ``wrong.says``.

    Without a GPU, checked first as on a machine without nvcc: the emulator runs a kernel's program
    (its TIR before lowering), compiled or not, so a mistake that the signature or the numbers show
    is rejected there as it is with nvcc, without the compile (lowering and nvcc: seconds per
    kernel, most of a wrong answer's time on a CPU). A mistake that only the generated code shows
    (no pipeline, no wgmma, the shared memory the compiled kernel asks for) is not rejected there:
    it is checked again, compiled, as it is on a GPU."""
    import warnings

    from tilelang_tutorial import emulate

    def check():
        with warnings.catch_warnings():
            # a wrong answer may read a buffer before it is set or race: the emulator's one-line warning
            # is the expected finding here (the checker's message, asserted below, carries it)
            warnings.simplefilter("ignore", emulate.EmulatorWarning)
            return ex.check(wrong.answer, verbose=False)

    res = None
    if not runtime.gpu_available():
        with monkeypatch.context() as without_nvcc:
            without_nvcc.setattr(runtime, "_nvcc_lookup", lambda *args: None)
            runtime.invalidate_mode()
            try:
                res = check()
            finally:
                without_nvcc.undo()
                runtime.invalidate_mode()
    if res is None or res.ok or wrong.says not in str(res):
        res = check()
    assert not res.ok, f"{ex.name}: {wrong.name} was accepted:\n{res}"
    assert wrong.says in str(res), f"{ex.name}: {wrong.name}: the message should mention {wrong.says!r}:\n{res}"


def _exercise_class(ex):
    """The tests of one exercise: its solution passes, its starter fails fast, each wrong answer is
    rejected with its phrase."""
    wrong = {w.name: w for w in ex.wrong_answers}

    def test_solution_passes_its_checker(self):
        check_solution_passes(ex)

    def test_unsolved_starter_fails_fast_without_compiling(self, monkeypatch):
        check_unsolved_starter_fails_fast_without_compiling(ex, monkeypatch)

    @pytest.mark.parametrize("name", list(wrong))
    def test_checker_rejects_a_plausible_wrong_answer(self, name, monkeypatch):
        check_rejects_wrong_answer(ex, wrong[name], monkeypatch)

    name = "TestExercise_" + re.sub(r"\W+", "_", ex.name).strip("_")
    return type(name, (), {
        "__doc__": f"Exercise {ex.name}.",
        "test_solution_passes_its_checker": test_solution_passes_its_checker,
        "test_unsolved_starter_fails_fast_without_compiling": test_unsolved_starter_fails_fast_without_compiling,
        "test_checker_rejects_a_plausible_wrong_answer": test_checker_rejects_a_plausible_wrong_answer})


# One class per exercise: pytest-xdist (--dist loadscope) gives each class to one worker, so the
# exercises' compiles (each wrong answer is a kernel of its own) spread over every worker instead
# of one worker running them all.
for _name, (_, _ex) in EXERCISES.items():
    _cls = _exercise_class(_ex)
    globals()[_cls.__name__] = _cls
del _name, _ex, _cls


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


def test_a_kernel_that_faults_on_the_gpu_is_reported_with_its_cure():
    # torch's message for a fault: its first line names the fault, the rest is advice for C++ users
    from tilelang_tutorial.exercise_kit import _first_line

    fault = RuntimeError("CUDA error: an illegal memory access was encountered\n"
                         "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
                         "group__CUDART__TYPES.html for more information.\n"
                         "CUDA kernel errors might be asynchronously reported at some other API call\n"
                         "For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
    line = _first_line(fault)
    assert line.startswith("CUDA error: an illegal memory access was encountered. ")
    assert "restart the notebook's kernel" in line
    assert _first_line(RuntimeError("TileLang: check failed: x < 4")) == "TileLang: check failed: x < 4"
