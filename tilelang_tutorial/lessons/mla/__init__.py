"""Lesson 04: DeepSeek MLA decode (``notebooks/04_mla_decode.ipynb``, and the advanced
``04b_mla_hand_scheduled.ipynb``).

Imports run one way: :mod:`.common` (sizes, split heuristic, signature, combine) -> the schedules
(:mod:`.auto`; the hand-written :mod:`.ws` and :mod:`.seesaw` on :mod:`.hand_scheduled`) -> the op
(:mod:`.op`). Notebook 04 builds :mod:`.auto` in checked steps: :mod:`.mqa` (the single-head-group
ramp), :mod:`.steps` (contiguous cache, then paged), then :mod:`.auto` (split-KV); notebook 04b
writes :mod:`.ws` and :mod:`.seesaw`. Also: :mod:`.reference` (torch reference, random paged
inputs), the exercises (:mod:`.exercises`, :mod:`.hand_scheduled_exercises`), the benchmark suite
``mla`` (:mod:`.bench`, with its peers :mod:`.flashinfer_peer` and :mod:`.flashmla_peer`) and
the host-cost suite ``mla_host`` (:mod:`.host_bench`).
"""
from ... import results

NOTEBOOK = "04_mla_decode.ipynb"
#: the advanced part: the schedule written by hand (no exercises)
EXTRA_NOTEBOOKS = ("04b_mla_hand_scheduled.ipynb",)
SUITES = {"mla": "bench:run", "mla_host": "host_bench:run"}


def measured(record):
    """What an ``mla`` / ``mla_host`` record measured: the program of its schedule and config."""
    from . import op

    c, s = record["config"], record["shape"]
    program = op.program_for(s["h_q"], record["dtype"], split=c["num_split"] > 1, softmax_scale=c["softmax_scale"],
                             schedule=c["schedule"], arch=c.get("arch", "sm_90a"), num_stages=c.get("num_stages", 2))
    # records of the call a user makes also measured the op's Python code
    plan_run = [op.MLADecodePlan.__init__, op.MLADecodePlan._shapes, op.MLADecodePlan._flat_view,
                op.MLADecodePlan.run, op.MLADecodePlan._check]
    one_call = [op.mla_decode, op.validate_inputs, op._validated_before, op._remember, op._state, op._chosen_split]
    host = {"plan.run": plan_run, "mla_decode": [*one_call, *plan_run], "plan.run and mla_decode": [*one_call, *plan_run]}
    return [program] + host.get(c.get("path"), [])


results.register_suite("mla", measured)
results.register_suite("mla_host", measured)     # plan.run against its bare launch: the same things


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
    from .solutions import combine_kernel, warp_policy

    def todo(*args):
        raise NotImplementedError

    cases = [
        Exercise("04 warp config", ex.check_warp_config, warp_policy.WARP_CONFIG, starter=None,
                 wrong_answers=(WrongAnswer("one warpgroup", wrong.WARP_CONFIG_ONE_WARPGROUP, "spill"),
                                WrongAnswer("four warpgroups", wrong.WARP_CONFIG_FOUR_WARPGROUPS, "at most 120"),
                                WrongAnswer("FullRow", wrong.WARP_CONFIG_FULLROW, "inference split the columns"))),
        Exercise("04 combine kernel", ex.check_combine_kernel, combine_kernel.combine_program, starter=todo,
                 wrong_answers=(WrongAnswer("mean", wrong.combine_kernel_mean, "plain mean"),
                                WrongAnswer("overflow", wrong.combine_kernel_no_max_subtraction, "overflows fp32"),
                                WrongAnswer("unnormalised", wrong.combine_kernel_unnormalised, "not normalised"),
                                WrongAnswer("max started at 0", wrong.combine_kernel_max_from_zero,
                                            "starts at -inf"),
                                WrongAnswer("shifted by the first split", wrong.combine_kernel_shift_by_first_split,
                                            "not the first split's"),
                                WrongAnswer("grid extents swapped", wrong.combine_kernel_grid_swapped,
                                            "T.Kernel(heads, batch)"))),
    ]
    from . import hand_scheduled_exercises   # notebook 04b's
    return cases + hand_scheduled_exercises.exercise_cases()


def flow_bugs():
    """Bugs a reader could type into notebook 04's kernel cells, one per checked step
    (``tests/test_reader_flow.py``); each is bounded to the section that checks its kernel."""
    from .. import FlowBug

    nb = NOTEBOOK
    bugs = [
        FlowBug(nb, "mqa_decode_program", "acc_o[i, j] *= alpha[i]", "acc_o[i, j] *= 1.0",
                what="the output is not rescaled when the running max grows", until="### A pitfall"),
        FlowBug(nb, "mla_contiguous_program", "k * block_N + j < seqlen", "k * block_N + j <= seqlen",
                what="the mask lets one token past the end in", until="## 4."),
        FlowBug(nb, "mla_paged_program", "row0 = block_table[bx, k] * PAGE_SIZE", "row0 = k * PAGE_SIZE",
                what="the block table is ignored", until="## 5."),
        FlowBug(nb, "mla_decode_program",
                "T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)",
                "pass   # the rotary part of the scores forgotten",
                what="the rotary part of the scores is left out"),
    ]
    from . import hand_scheduled_exercises   # notebook 04b's
    return bugs + hand_scheduled_exercises.flow_bugs()


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import common, mqa, op, reference, exercises, steps  # noqa: E402,F401
from . import hand_scheduled_exercises, hand_scheduled_notebook  # noqa: E402,F401  (notebook 04b's)
