"""Lesson 02: GEMM with a fused ReLU (``notebooks/02_gemm_relu.ipynb``).

Kernel :mod:`.kernel` (factory, op, reference), configurations :mod:`.configs`, exercises
:mod:`.exercises` (transposed B, bias + GELU epilogue), benchmark suites ``gemm`` and
``gemm_sweep`` (:mod:`.bench`), plots :mod:`.plots`.
"""
from ... import results

NOTEBOOK = "02_gemm_relu.ipynb"
SUITES = {"gemm": "bench:run", "gemm_sweep": "bench:run_sweep"}


def measured(record):
    """What a ``gemm`` / ``gemm_sweep`` record measured: the dynamic-M program of its config."""
    from .configs import GemmConfig
    from .kernel import gemm_relu_program

    cfg = GemmConfig(**{k: record["config"][k] for k in GemmConfig.__dataclass_fields__})
    s = record["shape"]
    return [gemm_relu_program(None, s["N"], s["K"], in_dtype=record["dtype"], dynamic_m=True, **cfg.as_dict())]


results.register_suite("gemm", measured)
results.register_suite("gemm_sweep", measured)


def compile_cases():
    from .. import HOPPER, PORTABLE, CompileCase
    from .configs import SEED_CONFIG, tuned_config
    from .kernel import build_gemm_relu

    return [
        CompileCase("gemm_relu/seed", PORTABLE,
                    lambda arch: build_gemm_relu(4096, 4096, config=SEED_CONFIG, dtype="float16", arch=arch)),
        CompileCase("gemm_relu/tuned", HOPPER,
                    lambda arch: build_gemm_relu(4096, 4096, config=tuned_config("float16"), dtype="float16",
                                                 arch=arch)),
    ]


def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from . import wrong_answers as wrong
    from .solutions import bias_gelu, transpose_b

    def todo(*args):
        raise NotImplementedError

    return [
        Exercise("02 transposed B", ex.check_gemm_transposed_b, transpose_b.gemm_transpose_b_solution, starter=None,
                 wrong_answers=(
                     WrongAnswer("(K, N) B", wrong.gemm_bt_untransposed_shape, "stored (N, K)"),
                     WrongAnswer("no pipeline", wrong.gemm_bt_serial, "T.Pipelined"),
                     WrongAnswer("wrong tile corner", wrong.gemm_bt_wrong_tile, "wrong"),
                 )),
        Exercise("02 bias + GELU", ex.check_gemm_epilogue, bias_gelu.gemm_bias_gelu_solution, starter=todo,
                 wrong_answers=(
                     WrongAnswer("no bias", wrong.gemm_bias_gelu_no_bias, "4 tensors"),
                     WrongAnswer("factory raises", lambda M, N, K, dt: 1 / 0, "ZeroDivisionError"),
                     WrongAnswer("GELU before bias", wrong.gemm_bias_gelu_wrong_order, "wrong values"),
                 )),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import configs, kernel, exercises  # noqa: E402,F401
