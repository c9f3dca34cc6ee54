"""Lesson 05: a fused RMSNorm + SiLU drop-in for every channel width
(``notebooks/05_rmsnorm_silu.ipynb``).

Kernel :mod:`.kernel` (the layout-annotated kernel, the naive one it replaces, the layout rule),
the op a user calls :mod:`.op` (the layout per width, the build, the checks, the launch), the
warp-segment layout of three bf16 bands :mod:`.warp_segments`, the two-pass shared-memory design
it is compared with :mod:`.two_pass`, the pre-existing Triton path :mod:`.triton_existing`, the
dispatch :mod:`.dispatch`, a video-VAE block :mod:`.vae_block`, exercises :mod:`.exercises`,
benchmark suite ``rmsnorm`` (:mod:`.bench`).
"""
from ... import results

NOTEBOOK = "05_rmsnorm_silu.ipynb"
#: the optional deep dive: the fp16 sum in a kernel, the two-pass design, what the division cost and the rule, peers,
#: timing methods, a reported speed-up reconciled, tools and backends
EXTRA_NOTEBOOKS = ("05b_rmsnorm_in_depth.ipynb",)
#: the op's layout at every width (fp16, bf16), the op and its peers, the drop-in's host cost
SUITES = {"rmsnorm_widths": "bench:run_widths", "rmsnorm_widths_bf16": "bench:run_widths_bf16", "rmsnorm": "bench:run",
          "rmsnorm_host": "host_bench:run"}
#: ``python -m tilelang_tutorial sweep NAME`` (prints, records nothing)
SWEEPS = {"rmsnorm_candidates": "sweep:main"}


def measured(record):
    """What an ``rmsnorm`` record measured: the kernel's program (and, for the op and the VAE
    block, the Python code that calls it)."""
    from . import dispatch, kernel, op, two_pass, vae_block

    c, dtype = record["config"], record["dtype"]
    C = record["shape"]["C"]
    config = op.config_from_dict          # either layout: the row-group rule's or warp segments
    if record["suite"] in ("rmsnorm_widths", "rmsnorm_widths_bf16"):
        return [op.op_program(C, dtype, config(c))]
    reference = [kernel.rmsnorm_silu_program(C, dtype, config(c["reference_config"]))] if "reference_config" in c else []
    if record["kernel"] == "rmsnorm_silu_naive":
        return [kernel.naive_rmsnorm_silu_program(C, dtype, c["block_m"], c["threads"])] + reference
    if record["kernel"] == "rmsnorm_silu_two_pass":
        return [two_pass.two_pass_rmsnorm_silu_program(C, dtype, block_m=c["block_m"], block_C=c["block_C"],
                                                       threads=c["threads"])] + reference
    cfg = config(c["kernel_config"])
    program = op.op_program(C, dtype, cfg)
    if record["kernel"] == "vae_block_e2e":
        return ([program] if c["dispatch_path"] == "tilelang" else []) + [vae_block.VAEResBlock, vae_block.fused_norm_silu, vae_block.eager_norm_silu,
                                                                            dispatch.fused_rmsnorm_silu]
    return [program, op.rmsnorm_silu, op._call]


results.register_suite("rmsnorm", measured)
results.register_suite("rmsnorm_widths", measured)
results.register_suite("rmsnorm_widths_bf16", measured)


def _host_measured(record):
    """What a ``rmsnorm_host`` record measured (:func:`.host_bench.measured`)."""
    from . import host_bench

    return host_bench.measured(record)


results.register_suite("rmsnorm_host", _host_measured)


def compile_cases():
    from .. import PORTABLE, CompileCase
    from .op import build_rmsnorm_silu

    return [CompileCase(f"rmsnorm_silu/C={C}", PORTABLE,
                        lambda arch, C=C: build_rmsnorm_silu(C, "float16", arch=arch)) for C in (640, 96)]


def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from . import wrong_answers as wrong
    from .kernel import RMSNormSiLUConfig, rmsnorm_silu_program
    from .solutions import apply_rstd, config, residual, rms_stats

    def todo(*args):
        raise NotImplementedError

    return [
        Exercise("05 config", ex.check_rmsnorm_config, config.CONFIG_640, starter=None,
                 wrong_answers=(WrongAnswer("five lanes per row", wrong.rmsnorm_config_five_lanes(), "power of two"),
                                WrongAnswer("one lane per row", wrong.rmsnorm_config_one_lane_per_row(), "spilled"),
                                WrongAnswer("128 lanes, 38 % padding", RMSNormSiLUConfig(group=128, threads=256), "pads the row"),
                                WrongAnswer("32 lanes of 3 vectors, 17 % padding", RMSNormSiLUConfig(group=32, threads=256),
                                            "16 per row (17%) empty"))),
        Exercise("05 residual", ex.check_residual_rmsnorm_silu, residual.residual_rmsnorm_silu_solution,
                 starter=todo,
                 wrong_answers=(
                     WrongAnswer("layout left to inference", wrong.wrong_residual_no_layout, "not annotated"),
                     WrongAnswer("4 parameters", lambda C, dtype="float16": rmsnorm_silu_program(C, dtype),
                                 "5 parameters"),
                     WrongAnswer("added after the norm", wrong.wrong_residual_after_norm, "r is added after the norm"),
                     WrongAnswer("x + r summed in fp16", wrong.wrong_residual_fp16_sum, "exceeds 65504"),
                     WrongAnswer("eps left out", wrong.wrong_residual_no_eps, "eps belongs inside the square root"),
                     WrongAnswer("eps added after the root", wrong.wrong_residual_eps_outside_the_root,
                                 "eps belongs inside the square root"),
                     WrongAnswer("R's fragment not annotated", wrong.wrong_residual_r_not_annotated, "r not annotated"),
                 )),
        # notebook 05b's exercises
        Exercise("05b statistics pass", ex.check_rms_stats, rms_stats.rms_stats_solution, starter=todo,
                 wrong_answers=(
                     WrongAnswer("sums kept in fp16", wrong.wrong_stats_fp16_sum, "16 bits"),
                     WrongAnswer("squares formed in fp16", wrong.wrong_stats_fp16_square, "16 bits"),
                     WrongAnswer("total overwritten by each chunk", wrong.wrong_stats_last_chunk, "overwritten by each chunk"),
                     WrongAnswer("divided by the chunk width", wrong.wrong_stats_chunk_mean, "divided by the chunk width"),
                     WrongAnswer("eps left out", wrong.wrong_stats_no_eps, "without eps"),
                     WrongAnswer("eps added after the root", wrong.wrong_stats_eps_outside_the_root, "eps added after the root"),
                     WrongAnswer("the rms, not its inverse", wrong.wrong_stats_rms_not_inverse, "the rms itself"),
                     WrongAnswer("grid m // block_m", wrong.wrong_stats_floor_grid, "T.ceildiv(m, block_m)"),
                     WrongAnswer("the whole row in one tile", wrong.wrong_stats_whole_row, "chunks of at most 128 columns"),
                 )),
        Exercise("05b output pass (bf16)", ex.check_apply_rstd, apply_rstd.apply_rstd_solution, starter=todo,
                 wrong_answers=(
                     WrongAnswer("products in bf16", wrong.wrong_apply_bf16_math, "rounded to bfloat16 more than once"),
                     WrongAnswer("divides by Rstd", wrong.wrong_apply_divides, "divides by Rstd"),
                     WrongAnswer("no SiLU", wrong.wrong_apply_no_silu, "the SiLU is missing"),
                     WrongAnswer("Rstd never applied", wrong.wrong_apply_rstd_not_applied, "Rstd is not applied"),
                     WrongAnswer("layout left to inference", wrong.wrong_apply_no_layout, "not annotated"),
                 )),
    ]


def flow_bugs():
    from .. import FlowBug

    return [
        FlowBug("05_rmsnorm_silu.ipynb", "rmsnorm_silu_program",
                "rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)", "rstd[i] = T.rsqrt(rstd[i] + eps)",
                what="the mean's 1/C dropped (sum of squares, not mean)"),
        FlowBug("05_rmsnorm_silu.ipynb", "rmsnorm_silu_program",
                "return (i % rows_per_pass) * group + (j // VEC) % group",
                "return (i % rows_per_pass) * group + (j // VEC) % (group // 2)",
                what="the layout maps two vectors of a row to one lane"),
        FlowBug("05_rmsnorm_silu.ipynb", "naive_rmsnorm_silu_program",
                "v = x[i, j] * rstd[i] * T.Cast(accum, Gamma[j])", "v = x[i, j] * T.Cast(accum, Gamma[j])",
                what="the naive kernel forgets the 1/rms scale", until="## 3."),
        FlowBug("05b_rmsnorm_in_depth.ipynb", "two_pass_rmsnorm_silu_program",
                "rstd[i] += part[i]", "rstd[i] = part[i]",
                what="the two-pass sum keeps only the last chunk", until="## 3."),
        FlowBug("05b_rmsnorm_in_depth.ipynb", "warp_segment_rmsnorm_silu_program",
                "rstd[i] += warp_sums_shared[i, w]", "rstd[i] = warp_sums_shared[i, w]",
                what="the warp-segment sum keeps only the row's last warp", until="## 4."),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import dispatch, kernel, exercises  # noqa: E402,F401
