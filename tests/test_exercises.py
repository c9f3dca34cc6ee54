"""Workshop exercises: every solution passes its checker, every checker rejects plausible wrong
answers with a helpful message, unsolved starters fail fast without compiling, and every notebook
ends with at least two exercises.

On a CPU machine "passes" means: compiles and passes every check compilation allows (the checker
says what it could not check); on a GPU the very same tests also run the numbers.
Compiled kernels land in TileLang's disk cache (TILELANG_CACHE_DIR), so a second run is fast.
"""
import json
import time
from pathlib import Path

import pytest

import exercise_wrong_answers as W
from tilelang_tutorial import runtime
from tilelang_tutorial.exercises import ExerciseResult, gemm, layouts, mla, rmsnorm, tile
from tilelang_tutorial.kernels import row_sum

from conftest import HAS_GPU

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def _solutions():
    """(checker, answer) for every exercise, answer taken from tilelang_tutorial/solutions/."""
    from tilelang_tutorial.solutions import (gemm_bias_gelu, gemm_transpose_b, layouts_conflict_table,
                                             layouts_padding, mla_combine, mla_warp_policy, rmsnorm_config,
                                             rmsnorm_residual, tile_row_max, tile_transpose)

    return {
        "01 row max": (tile.check_row_max, tile_row_max.row_max_program),
        "01 transpose": (tile.check_transpose, tile_transpose.transpose_program),
        "02 transposed B": (gemm.check_gemm_transposed_b, gemm_transpose_b.gemm_transpose_b_solution),
        "02 bias + GELU": (gemm.check_gemm_epilogue, gemm_bias_gelu.gemm_bias_gelu_solution),
        "03 conflict table": (layouts.check_conflict_table, layouts_conflict_table.CONFLICT_TABLE),
        "03 padding": (lambda a, **kw: layouts.check_padding(*a, **kw),
                       (layouts_padding.COLUMN_PAD, layouts_padding.LDMATRIX_PAD)),
        "04 warp config": (mla.check_warp_config, mla_warp_policy.WARP_CONFIG),
        "04 combine": (mla.check_combine, mla_combine.combine),
        "05 config": (rmsnorm.check_rmsnorm_config, rmsnorm_config.CONFIG_640),
        "05 residual": (rmsnorm.check_residual_rmsnorm_silu, rmsnorm_residual.residual_rmsnorm_silu_solution),
    }


CPU_ONLY = {"03 conflict table", "03 padding", "04 warp config", "04 combine"}


@pytest.mark.parametrize("name", list(_solutions()))
def test_solution_passes_its_checker(name):
    check, answer = _solutions()[name]
    res = check(answer, verbose=False)
    assert isinstance(res, ExerciseResult)
    assert res.ok, f"{name}:\n{res}"
    text = str(res)
    if name in CPU_ONLY:
        assert res.cpu_only and "PASSED" in text
    elif HAS_GPU:
        assert res.numerics_checked and "PASSED: compiled, ran and matched" in text, text
    else:
        # Compile-only: the checker must say plainly what it could not check.
        assert not res.numerics_checked and "⏭ NOT CHECKED" in text and "needs a GPU" in text, text


def _unsolved():
    def todo(*args):
        raise NotImplementedError

    return {
        "01 row max": lambda: tile.check_row_max(lambda N, dtype: None, verbose=False),
        "01 transpose": lambda: tile.check_transpose(todo, verbose=False),
        "02 transposed B": lambda: gemm.check_gemm_transposed_b(None, verbose=False),
        "02 bias + GELU": lambda: gemm.check_gemm_epilogue(todo, verbose=False),
        "03 conflict table": lambda: layouts.check_conflict_table([[None, None], [None, None]], verbose=False),
        "03 padding": lambda: layouts.check_padding(None, None, verbose=False),
        "04 warp config": lambda: mla.check_warp_config(None, verbose=False),
        "04 combine": lambda: mla.check_combine(todo, verbose=False),
        "05 config": lambda: rmsnorm.check_rmsnorm_config(None, verbose=False),
        "05 residual": lambda: rmsnorm.check_residual_rmsnorm_silu(todo, verbose=False),
    }


@pytest.mark.parametrize("name", list(_unsolved()))
def test_unsolved_starter_fails_fast_without_compiling(name, monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("an unsolved starter must not compile anything")

    monkeypatch.setattr(runtime, "compile_kernel", no_compile)
    t0 = time.time()
    res = _unsolved()[name]()
    assert not res.ok and "not attempted yet" in str(res), str(res)
    assert "❌" in str(res)
    assert time.time() - t0 < 2.0


# ------------------------------------------------------------------------------------------------
# Plausible wrong answers caught on any machine (by the signature, compilation or the arithmetic)
# ------------------------------------------------------------------------------------------------

CPU_WRONG = {
    "01 row max: a row *sum*": (lambda: tile.check_row_max(lambda N, dtype: row_sum.row_sum_program(N, dtype=dtype),
                                                           verbose=False), "T.reduce_max"),
    "01 transpose: scattered stores": (lambda: tile.check_transpose(W.transpose_scattered, verbose=False),
                                       "one element at a time"),
    "02 transposed B: (K, N) B": (lambda: gemm.check_gemm_transposed_b(W.gemm_bt_untransposed_shape, verbose=False),
                                  "stored (N, K)"),
    "02 transposed B: no pipeline": (lambda: gemm.check_gemm_transposed_b(W.gemm_bt_serial, verbose=False),
                                     "T.Pipelined"),
    "02 bias + GELU: no bias": (lambda: gemm.check_gemm_epilogue(W.gemm_bias_gelu_no_bias, verbose=False),
                                "4 tensors"),
    "02 bias + GELU: factory raises": (lambda: gemm.check_gemm_epilogue(lambda M, N, K, dt: 1 / 0, verbose=False),
                                       "ZeroDivisionError"),
    "03 conflict table: 64-wide guess": (lambda: layouts.check_conflict_table(W.CONFLICT_TABLE_FROM_64_WIDE,
                                                                              verbose=False), "must deliver"),
    "03 padding: too small": (lambda: layouts.check_padding(**W.PADDING_TOO_SMALL, verbose=False),
                              "16-byte aligned"),
    "04 warp config: one warpgroup": (lambda: mla.check_warp_config(W.WARP_CONFIG_ONE_WARPGROUP, verbose=False),
                                      "spill"),
    "04 warp config: FullRow": (lambda: mla.check_warp_config(W.WARP_CONFIG_FULLROW, verbose=False),
                                "inference split the columns"),
    "04 combine: mean": (lambda: mla.check_combine(W.combine_mean, verbose=False), "relative error"),
    "04 combine: overflow": (lambda: mla.check_combine(W.combine_no_max_subtraction, verbose=False), "overflow"),
    "05 config: a warp per row": (lambda: rmsnorm.check_rmsnorm_config(W.rmsnorm_config_warp_per_row(),
                                                                       verbose=False), "divisor of 80"),
    "05 residual: layout left to inference": (lambda: rmsnorm.check_residual_rmsnorm_silu(
        W.wrong_residual_no_layout, verbose=False), "16-byte vectors"),
    "05 residual: 4 parameters": (lambda: rmsnorm.check_residual_rmsnorm_silu(
        lambda C, dtype="float16": __import__("tilelang_tutorial.kernels.rmsnorm_silu", fromlist=["x"])
        .rmsnorm_silu_program(C, dtype), verbose=False), "5 parameters"),
}


@pytest.mark.parametrize("name", list(CPU_WRONG))
def test_checker_rejects_a_plausible_wrong_answer(name):
    run, hint = CPU_WRONG[name]
    res = run()
    assert not res.ok, f"{name} was accepted:\n{res}"
    assert hint in str(res), f"{name}: the message should mention {hint!r}:\n{res}"


def test_every_checker_has_a_cpu_wrong_answer():
    checkers = {n.split(":")[0] for n in CPU_WRONG}
    assert checkers == set(_solutions()), set(_solutions()) - checkers


# ------------------------------------------------------------------------------------------------
# Wrong answers only a GPU can catch (they compile and pass every static check)
# ------------------------------------------------------------------------------------------------

GPU_WRONG = {
    "01 row max: zero-filled columns": (lambda: tile.check_row_max(W.row_max_unmasked, verbose=False), "-inf"),
    "01 transpose: swapped tiles": (lambda: tile.check_transpose(W.transpose_swapped_blocks, verbose=False), "B != A.T"),
    "02 transposed B: wrong tile corner": (lambda: gemm.check_gemm_transposed_b(W.gemm_bt_wrong_tile, verbose=False),
                                           "wrong"),
    "02 bias + GELU: GELU before bias": (lambda: gemm.check_gemm_epilogue(W.gemm_bias_gelu_wrong_order, verbose=False),
                                         "wrong result"),
    "05 residual: added after the norm": (lambda: rmsnorm.check_residual_rmsnorm_silu(
        W.wrong_residual_after_norm, verbose=False), "wrong values"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_WRONG))
def test_checker_rejects_a_wrong_answer_on_the_gpu(name):
    run, hint = GPU_WRONG[name]
    res = run()
    assert res.numerics_checked or not res.ok
    assert not res.ok and hint in str(res), f"{name}:\n{res}"


def test_gpu_only_wrong_answers_are_not_rejected_without_a_gpu():
    """Without a GPU they pass every static check, and the checker says the numbers were not run."""
    if HAS_GPU:
        pytest.skip("GPU present: test_checker_rejects_a_wrong_answer_on_the_gpu covers these")
    res = tile.check_row_max(W.row_max_unmasked, verbose=False)
    assert res.ok and not res.numerics_checked and "NOT CHECKED" in str(res)


# ------------------------------------------------------------------------------------------------
# Notebooks
# ------------------------------------------------------------------------------------------------

def _cells(path):
    nb = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]) for c in nb["cells"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_ends_with_at_least_two_exercises(path):
    cells = _cells(path)
    heads = [i for i, (t, s) in enumerate(cells) if t == "markdown" and s.lstrip().startswith("## ")]
    last = heads[-1]
    title = cells[last][1].lstrip().splitlines()[0]
    assert "exercise" in title.lower(), f"{path.name}: the last section is {title!r}, not the exercises"
    starters = [s for t, s in cells[last:] if t == "code" and "check_" in s and "(" in s.split("check_", 1)[1]]
    assert len(starters) >= 2, f"{path.name}: {len(starters)} exercise starter cells calling a check_... function"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_do_not_import_solutions(path):
    for t, s in _cells(path):
        if t == "code":
            assert "solutions" not in s and "_solution" not in s, f"{path.name} imports a solution:\n{s[:300]}"
