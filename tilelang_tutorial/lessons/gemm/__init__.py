"""Lesson 02: GEMM with a fused ReLU (``notebooks/02_gemm_relu.ipynb``).

Kernel :mod:`.kernel` (factory, op, reference), configurations :mod:`.configs`, exercises
:mod:`.exercises` (transposed B, bias + GELU epilogue), benchmark suites ``gemm`` and
``gemm_sweep`` (:mod:`.bench`), plots :mod:`.plots`.
"""
from ... import results

NOTEBOOK = "02_gemm_relu.ipynb"
#: gemm_rates first: the rule that ``gemm`` records through reads it
SUITES = {"gemm_rates": "bench:run_rates", "gemm": "bench:run", "gemm_sweep": "bench:run_sweep"}


def measured(record):
    """What a ``gemm`` / ``gemm_sweep`` / ``gemm_rates`` record measured: the dynamic-M program(s) of
    its config (the split-K pair when it split K), and for records of the op, the op's Python."""
    from . import kernel, split_k
    from .configs import GemmConfig

    s, c, dt = record["shape"], record["config"], record["dtype"]
    if record["kernel"] == "splitk_reduce_relu":
        return [split_k.splitk_reduce_relu_program(s["N"], c["split"], out_dtype=dt)]
    cfg = GemmConfig(**{k: c[k] for k in GemmConfig.__dataclass_fields__})
    if c.get("split", 1) > 1:
        progs = split_k.programs(s["N"], s["K"], c["split"], cfg, dt)
    else:
        progs = [kernel.gemm_relu_program(None, s["N"], s["K"], in_dtype=dt, dynamic_m=True, **cfg.as_dict())]
    if c.get("variant") == "rule":
        progs += [kernel.gemm_relu, kernel.validate_inputs, split_k.gemm_relu_split_k]
    return progs


results.register_suite("gemm", measured)
results.register_suite("gemm_sweep", measured)
results.register_suite("gemm_rates", measured)


def compile_cases():
    from .. import HOPPER, PORTABLE, CompileCase
    from . import rule, split_k
    from .blackwell import build_gemm_relu_tmem
    from .configs import SEED_CONFIG, tuned_config
    from .kernel import build_gemm_relu

    def by_rule(M):
        """what gemm_relu builds for (M, 4096, 4096) on this architecture"""
        def build(arch):
            choice = rule.choose(M, 4096, 4096, "float16", arch)
            if choice.split > 1:
                return split_k.build_split_k(4096, 4096, choice.split, choice.config, "float16", arch)[0]
            return build_gemm_relu(4096, 4096, config=choice.config, dtype="float16", arch=arch)
        return build

    no_tmem = {arch: "needs an sm_100a-class target" for arch in ("sm_80", "sm_89", "sm_90a", "sm_120", "sm_120a")}
    return [
        CompileCase("gemm_relu/seed", PORTABLE,
                    lambda arch: build_gemm_relu(4096, 4096, config=SEED_CONFIG, dtype="float16", arch=arch)),
        CompileCase("gemm_relu/tuned", HOPPER,
                    lambda arch: build_gemm_relu(4096, 4096, config=tuned_config("float16"), dtype="float16",
                                                 arch=arch)),
        CompileCase("gemm_relu/rule M=4096", PORTABLE, by_rule(4096)),
        CompileCase("gemm_relu/rule M=16", HOPPER, by_rule(16)),
        CompileCase("gemm_relu/unaligned N=1001 K=1000", PORTABLE,
                    lambda arch: build_gemm_relu(1001, 1000, config=SEED_CONFIG, dtype="float16", arch=arch)),
        CompileCase("gemm_relu/tensor memory (tcgen05)", ("sm_100a",),
                    lambda arch: build_gemm_relu_tmem(4096, 4096, arch=arch), unsupported=no_tmem),
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
