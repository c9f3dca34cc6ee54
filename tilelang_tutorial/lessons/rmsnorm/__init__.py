"""Lesson 05: a fused RMSNorm + SiLU drop-in for every channel width
(``notebooks/05_rmsnorm_silu.ipynb``).

Kernel :mod:`.kernel` (the layout-annotated kernel, the naive one it replaces, the layout rule),
the op a user calls :mod:`.op` (the layout per width, the build, the checks, the launch), the
warp-segment layout of three bf16 bands :mod:`.warp_segments`, the two-pass shared-memory design
it is compared with :mod:`.two_pass`, the pre-existing Triton path :mod:`.triton_existing`, the
dispatch :mod:`.dispatch`, a video-VAE block :mod:`.vae_block` (timed by the benchmark), the
targets TileLang builds for :mod:`.backends` (notebook 05b), exercises :mod:`.exercises` and
their :mod:`.solutions`, benchmark suites (:mod:`.bench`, :mod:`.host_bench`).
"""
from ... import results

NOTEBOOK = "05_rmsnorm_silu.ipynb"
#: the optional deep dive: the fp16 sum in a kernel, the two-pass design, what the division cost and the rule, peers,
#: timing methods, a reported speed-up reconciled, tools and backends
EXTRA_NOTEBOOKS = ("05b_rmsnorm_in_depth.ipynb",)
#: the op's layout at every width (fp16, bf16), the op and its peers, the drop-in's host cost
SUITES = {"rmsnorm_widths": "bench:run_widths", "rmsnorm_widths_bf16": "bench:run_widths_bf16", "rmsnorm": "bench:run",
          "rmsnorm_host": "host_bench:run"}


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
    return [program, op.rmsnorm_silu, op._call, op._plan]


results.register_suite("rmsnorm", measured)
results.register_suite("rmsnorm_widths", measured)
results.register_suite("rmsnorm_widths_bf16", measured)


def _host_measured(record):
    """What a ``rmsnorm_host`` record measured (:func:`.host_bench.measured`)."""
    from . import host_bench

    return host_bench.measured(record)


results.register_suite("rmsnorm_host", _host_measured)

#: the suites that store the lesson's goal (at least 0.90 of the copy bandwidth at every width): the
#: compiled kernel at every multiple of 32 up to 8192 and a few multiples of 8 (fp16, bf16), and the
#: op as a user calls it
GOAL_SUITES = ("rmsnorm_widths", "rmsnorm_widths_bf16", "rmsnorm")


def goal_status() -> None:
    """Print the goal against the current records of each of :data:`GOAL_SUITES`
    (``report.goals``): notebooks 05 and 05b state it with this one function."""
    from ... import report

    for suite in GOAL_SUITES:
        report.goals(suite)


def compile_cases():
    from .. import PORTABLE, CompileCase
    from .op import build_rmsnorm_silu

    return [CompileCase(f"rmsnorm_silu/C={C}", PORTABLE,
                        lambda arch, C=C: build_rmsnorm_silu(C, "float16", arch=arch)) for C in (640, 96)]


def exercise_cases():
    from ...exercise_kit import mutated
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from .kernel import RMSNormSiLUConfig, rmsnorm_silu_program
    from .solutions import apply_rstd, config, residual, rms_stats

    def todo(*args):
        raise NotImplementedError

    # Each wrong answer is its solution with one mistake typed in: (old, new) edits of its source.
    res = residual.residual_rmsnorm_silu_solution
    stats = rms_stats.rms_stats_solution
    apply = apply_rstd.apply_rstd_solution
    res_annotation = "T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, r, h, sq, y)})"
    res_sum = "h[i, j] = T.Cast(accum, x[i, j]) + T.Cast(accum, r[i, j])"
    res_rstd = "T.rsqrt(rstd[i] * inv_c + eps)"
    stats_rstd = "total[i] = T.rsqrt(total[i] * (1.0 / C) + eps)"
    apply_product = "v = T.Cast(accum, x[i, j]) * rstd[i] * T.Cast(accum, Gamma[j])"
    return [
        Exercise("05 config", ex.check_rmsnorm_config, config.CONFIG_640, starter=None,
                 wrong_answers=(WrongAnswer("five lanes per row", RMSNormSiLUConfig(group=5, threads=160), "power of two"),
                                WrongAnswer("one lane per row", RMSNormSiLUConfig(group=1, threads=128),
                                            "at most 5 vectors a lane"),
                                WrongAnswer("4 lanes of 20 vectors", RMSNormSiLUConfig(group=4, threads=256),
                                            "in registers from the load to the store"),
                                WrongAnswer("32 lanes of 3 vectors", RMSNormSiLUConfig(group=32, threads=256),
                                            "the smallest group"),
                                WrongAnswer("blocks of one warp", RMSNormSiLUConfig(group=16, threads=32),
                                            "at most 32 blocks"))),
        Exercise("05 residual", ex.check_residual_rmsnorm_silu, res, starter=todo,
                 wrong_answers=(
                     WrongAnswer("layout left to inference", mutated(res, (res_annotation, "")), "not annotated"),
                     WrongAnswer("4 parameters", lambda C, dtype="float16": rmsnorm_silu_program(C, dtype),
                                 "5 parameters"),
                     WrongAnswer("added after the norm", mutated(
                         res, (res_sum, "h[i, j] = T.Cast(accum, x[i, j])"),
                         ("v = h[i, j] * rstd[i] * T.Cast(accum, Gamma[j])",
                          "v = h[i, j] * rstd[i] * T.Cast(accum, Gamma[j]) + T.Cast(accum, r[i, j])")),
                                 "r is added after the norm"),
                     WrongAnswer("x + r summed in fp16", mutated(res, (res_sum, "h[i, j] = T.Cast(accum, x[i, j] + r[i, j])")),
                                 "exceeds 65504"),
                     WrongAnswer("eps left out", mutated(res, (res_rstd, "T.rsqrt(rstd[i] * inv_c)")),
                                 "eps belongs inside the square root"),
                     WrongAnswer("eps added after the root", mutated(res, (res_rstd, "T.rsqrt(rstd[i] * inv_c) + eps")),
                                 "eps belongs inside the square root"),
                     WrongAnswer("eps typed in", mutated(res, (res_rstd, "T.rsqrt(rstd[i] * inv_c + 1e-5)")),
                                 "not a value typed in"),
                     WrongAnswer("the mean over the padded tile", mutated(res, ("inv_c = 1.0 / C", "inv_c = 1.0 / width")),
                                 "padded tile"),
                     WrongAnswer("R's fragment not annotated", mutated(res, ("for buf in (x, r, h, sq, y)",
                                                                             "for buf in (x, h, sq, y)")),
                                 "r not annotated"),
                 )),
        # notebook 05b's exercises
        Exercise("05b statistics pass", ex.check_rms_stats, stats, starter=todo,
                 wrong_answers=(
                     WrongAnswer("sums kept in fp16", mutated(stats, ("part = T.alloc_fragment((block_m,), accum)",
                                                                      "part = T.alloc_fragment((block_m,), dtype)")),
                                 "16 bits"),
                     WrongAnswer("squares formed in fp16", mutated(stats, (
                         "sq[i, j] = T.Cast(accum, chunk[i, j]) * T.Cast(accum, chunk[i, j])",
                         "sq[i, j] = T.Cast(accum, chunk[i, j] * chunk[i, j])")), "16 bits"),
                     WrongAnswer("total overwritten by each chunk", mutated(stats, ("total[i] += part[i]", "total[i] = part[i]")),
                                 "overwritten by each chunk"),
                     WrongAnswer("divided by the chunk width", mutated(
                         stats, (stats_rstd, "total[i] = T.rsqrt(total[i] * (1.0 / block_C) + eps)")),
                                 "divided by the chunk width"),
                     WrongAnswer("eps left out", mutated(stats, (stats_rstd, "total[i] = T.rsqrt(total[i] * (1.0 / C))")),
                                 "without eps"),
                     WrongAnswer("eps added after the root", mutated(
                         stats, (stats_rstd, "total[i] = T.rsqrt(total[i] * (1.0 / C)) + eps")), "eps added after the root"),
                     WrongAnswer("eps typed in", mutated(
                         stats, (stats_rstd, "total[i] = T.rsqrt(total[i] * (1.0 / C) + 1e-5)")), "not a value typed in"),
                     WrongAnswer("the rms, not its inverse", mutated(
                         stats, (stats_rstd, "total[i] = T.sqrt(total[i] * (1.0 / C) + eps)")), "the rms itself"),
                     WrongAnswer("grid m // block_m", mutated(stats, ("T.Kernel(T.ceildiv(m, block_m)", "T.Kernel(m // block_m")),
                                 "T.ceildiv(m, block_m)"),
                     WrongAnswer("the whole row in one tile", mutated(
                         stats, ("block_C = next(b for b in (128, 64, 32) if C % b == 0)", "block_C = C")),
                                 "chunks of at most 128 columns"),
                 )),
        Exercise("05b output pass (bf16)", ex.check_apply_rstd, apply, starter=todo,
                 wrong_answers=(
                     WrongAnswer("products in bf16", mutated(
                         apply, (apply_product, "v = T.Cast(accum, x[i, j] * T.Cast(dtype, rstd[i]) * Gamma[j])")),
                                 "rounded to bfloat16 more than once"),
                     WrongAnswer("divides by Rstd", mutated(
                         apply, (apply_product, "v = T.Cast(accum, x[i, j]) / rstd[i] * T.Cast(accum, Gamma[j])")),
                                 "divides by Rstd"),
                     WrongAnswer("no SiLU", mutated(apply, ("y[i, j] = T.Cast(dtype, v / (1.0 + T.exp2(v * -LOG2_E)))",
                                                            "y[i, j] = T.Cast(dtype, v)")),
                                 "the SiLU is missing"),
                     WrongAnswer("Rstd never applied", mutated(
                         apply, (apply_product, "v = T.Cast(accum, x[i, j]) * T.Cast(accum, Gamma[j])")),
                                 "Rstd is not applied"),
                     WrongAnswer("layout left to inference", mutated(apply, (
                         "T.annotate_layout({buf: row_group_layout(block_m, width, group, threads) for buf in (x, y)})", "")),
                                 "not annotated"),
                 )),
    ]


def flow_bugs():
    from .. import FlowBug

    return [
        FlowBug("05_rmsnorm_silu.ipynb", "rmsnorm_silu_program",
                "rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)", "rstd[i] = T.rsqrt(rstd[i] + eps)",
                what="the mean's 1/C dropped (sum of squares, not mean)"),
        FlowBug("05_rmsnorm_silu.ipynb", "rmsnorm_silu_program",
                "rstd[i] = T.rsqrt(rstd[i] * inv_c + eps)", "rstd[i] = T.rsqrt(rstd[i] * inv_c)",
                what="eps dropped (a row of zeros divides by 0)"),
        FlowBug("05_rmsnorm_silu.ipynb", "rmsnorm_silu_program",
                "sq = T.alloc_fragment((block_m, width), accum)", "sq = T.alloc_fragment((block_m, width), dtype)",
                what="the squares kept in fp16 (beyond 65504 on large rows)"),
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


def __getattr__(name):
    """``tt.lessons.rmsnorm.<module>`` (``backends``, ``triton_existing`` ...): imported when first used."""
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import dispatch, kernel, exercises  # noqa: E402,F401
