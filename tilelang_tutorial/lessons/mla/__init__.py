"""Lesson 04: DeepSeek MLA decode (``notebooks/04_mla_decode.ipynb``).

Imports run one way: :mod:`.common` (sizes, split heuristic, signature, combine) -> the schedules
(:mod:`.auto`; the hand-written :mod:`.ws` and :mod:`.seesaw` on :mod:`.hand_scheduled`) -> the op
(:mod:`.op`). Also: :mod:`.reference` (torch reference, random paged inputs), :mod:`.emulation`
(the algorithm step by step in torch), :mod:`.triton_baseline`, :mod:`.exercises`, benchmark
suites ``mla`` (:mod:`.bench`) and ``mla_timeline`` (:mod:`.timeline`).
"""
from ... import results

NOTEBOOK = "04_mla_decode.ipynb"
#: the advanced part: the schedule written by hand (no exercises)
EXTRA_NOTEBOOKS = ("04b_mla_hand_scheduled.ipynb",)
SUITES = {"mla": "bench:run", "mla_timeline": "timeline:run"}


def measured(record):
    """What an ``mla`` / ``mla_timeline`` record measured: the program of its schedule and config."""
    from . import op

    c, s = record["config"], record["shape"]
    program = op.program_for(s["h_q"], record["dtype"], split=c["num_split"] > 1, softmax_scale=c["softmax_scale"],
                             schedule=c["schedule"], arch=c.get("arch", "sm_90a"), num_stages=c.get("num_stages", 2))
    # records of the call a user makes also measured the op's Python code
    host = {"plan.run": [op.MLADecodePlan.run, op.MLADecodePlan._check],
            "mla_decode": [op.mla_decode, op.validate_inputs, op.MLADecodePlan.run, op.MLADecodePlan._check]}
    return [program] + host.get(c.get("path"), [])


results.register_suite("mla", measured)
results.register_suite("mla_timeline", measured)


def compile_cases():
    from .. import HOPPER, CompileCase
    from .op import build_mla_decode

    def mla(schedule):
        return lambda arch: build_mla_decode(128, "float16", split=True, schedule=schedule, arch=arch)

    small_smem = {arch: "needs at least 152 KiB" for arch in ("sm_86", "sm_89", "sm_120", "sm_120a")}
    hand = {arch: "written for sm_90a" for arch in ("sm_80", "sm_100a")}
    # sm_80 compiles the auto schedule too (one KV stage, ~45 s of nvcc): tested on demand, not in CI
    return [CompileCase("mla_decode/auto", ("sm_90a", "sm_100a"), mla("auto"), unsupported=small_smem),
            CompileCase("mla_decode/ws", HOPPER, mla("ws"), unsupported=hand),
            CompileCase("mla_decode/seesaw", HOPPER, mla("seesaw"), unsupported=hand)]


def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from . import wrong_answers as wrong
    from .solutions import combine, warp_policy

    def todo(*args):
        raise NotImplementedError

    return [
        Exercise("04 warp config", ex.check_warp_config, warp_policy.WARP_CONFIG, starter=None,
                 wrong_answers=(WrongAnswer("one warpgroup", wrong.WARP_CONFIG_ONE_WARPGROUP, "spill"),
                                WrongAnswer("FullRow", wrong.WARP_CONFIG_FULLROW, "inference split the columns"))),
        Exercise("04 combine", ex.check_combine, combine.combine, starter=todo,
                 wrong_answers=(WrongAnswer("mean", wrong.combine_mean, "relative error"),
                                WrongAnswer("overflow", wrong.combine_no_max_subtraction, "overflow"))),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import common, mqa, op, reference, exercises  # noqa: E402,F401
