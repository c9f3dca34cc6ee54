"""Lesson 02: GEMM with a fused ReLU (``notebooks/02_gemm_relu.ipynb``).

Kernel :mod:`.kernel` (factory, op, reference), configurations :mod:`.configs`, exercises
:mod:`.exercises` (transposed B, bias + GELU epilogue), benchmark suites ``gemm`` (the squares),
``gemm_rule`` (the op through its rule: random shapes drawn afresh, small M), ``gemm_sweep``
(:mod:`.bench`) and ``gemm_host`` (:mod:`.host_bench`), the reader's kernel beside the records
:mod:`.plots`, reading generated code :mod:`.reading`. The deep dive ``notebooks/02b_gemm_in_depth.ipynb`` also uses
:mod:`.rule`, :mod:`.split_k`, :mod:`.gemv` and :mod:`.blackwell`.
"""
from ... import results

NOTEBOOK = "02_gemm_relu.ipynb"
#: the optional deep dive that follows it (tuning, other architectures, the compiler's tools, split-K)
EXTRA_NOTEBOOKS = ("02b_gemm_in_depth.ipynb",)
SUITES = {"gemm": "bench:run", "gemm_rule": "bench:run_rule", "gemm_sweep": "bench:run_sweep",
          "gemm_host": "host_bench:run"}


def program_of(config: dict):
    """The kernel factory a record's single-kernel config ran: notebook 02's, or the op's kernel for
    the last row of tiles that its rule chose (``last_rows``, ``a_rows`` in the config, :mod:`.last_rows`)."""
    from . import kernel, last_rows

    return (last_rows.program_for(config.get("last_rows", "filled"), config.get("a_rows", 0))
            or kernel.gemm_relu_program)


def partial_of(config: dict):
    """The split-K partial factory a record's config ran (None: split_k's own)."""
    from . import last_rows

    return last_rows.partial_for(config.get("last_rows", "filled"), config.get("a_rows", 0))


def programs_of(record):
    """The dynamic-M program(s) a GEMM record's config ran: the split-K pair when it split K, the
    GEMV's, or the single kernel (notebook 02's, or the op's kernel for the last row of tiles)."""
    from . import split_k
    from .configs import GemmConfig

    s, c, dt = record["shape"], record["config"], record["dtype"]
    cfg = GemmConfig(**{k: c[k] for k in GemmConfig.__dataclass_fields__})
    if c.get("gemv"):
        from . import gemv

        return [gemv.gemv_relu_program(s["N"], s["K"], in_dtype=dt, **c["gemv"])]
    if c.get("split", 1) > 1:
        return split_k.programs(s["N"], s["K"], c["split"], cfg, dt, partial_of(c))
    return [program_of(c)(None, s["N"], s["K"], in_dtype=dt, dynamic_m=True, **cfg.as_dict())]


def measured(record):
    """What a ``gemm`` / ``gemm_sweep`` / ``gemm_rule`` record measured: its
    config's program(s) (:func:`programs_of`), and for records of the op, the op's Python."""
    from . import kernel

    progs = programs_of(record)
    if record["config"].get("variant") == "rule":
        progs += [kernel.gemm_relu, kernel._plan, kernel.validate_inputs]
    return progs


results.register_suite("gemm", measured)
results.register_suite("gemm_sweep", measured)
results.register_suite("gemm_rule", measured)


def _host_measured(record):
    """What a ``gemm_host`` record measured (:func:`.host_bench.measured`)."""
    from . import host_bench

    return host_bench.measured(record)


results.register_suite("gemm_host", _host_measured)


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
            from .kernel import build_for

            return build_for(4096, 4096, choice.config, choice.split, "float16", choice.last_rows,
                             choice.a_rows, arch)[0]
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
    from .solutions import bias_gelu, split_k_atomic, t4_tile, transpose_b

    def todo(*args):
        raise NotImplementedError

    return [
        Exercise("02 transposed B", ex.check_gemm_transposed_b, transpose_b.gemm_transpose_b_solution, starter=None,
                 wrong_answers=(
                     WrongAnswer("(K, N) B", wrong.gemm_bt_untransposed_shape, "stored (N, K)"),
                     WrongAnswer("no pipeline", wrong.gemm_bt_serial, "T.Pipelined"),
                     WrongAnswer("wrong tile corner", wrong.gemm_bt_wrong_tile, "which element each B tile copy starts at"),
                     WrongAnswer("no ReLU", wrong.gemm_bt_no_relu, "negative outputs"),
                     WrongAnswer("B tiles read as (K, N)", wrong.gemm_bt_read_as_k_by_n, "as if it were stored (K, N)"),
                 )),
        Exercise("02 bias + GELU", ex.check_gemm_epilogue, bias_gelu.gemm_bias_gelu_solution, starter=todo,
                 wrong_answers=(
                     WrongAnswer("no bias parameter", wrong.gemm_bias_gelu_no_bias, "4 tensors"),
                     WrongAnswer("factory raises", lambda M, N, K, dt: 1 / 0, "ZeroDivisionError"),
                     WrongAnswer("GELU before bias", wrong.gemm_bias_gelu_wrong_order, "bias is added after the activation"),
                     WrongAnswer("tanh approximation", wrong.gemm_bias_gelu_tanh, "tanh approximation"),
                     WrongAnswer("sigmoid approximation", wrong.gemm_bias_gelu_sigmoid, "sigmoid approximation"),
                     WrongAnswer("plain ReLU", wrong.gemm_bias_gelu_relu, "matches ReLU(x)"),
                     WrongAnswer("erf(x / 2)", wrong.gemm_bias_gelu_erf_of_half_x, "not by 2"),
                     WrongAnswer("no factor 0.5", wrong.gemm_bias_gelu_no_half, "factor 0.5"),
                     WrongAnswer("bias never added", wrong.gemm_bias_gelu_bias_not_added, "without the bias"),
                 )),
        Exercise("02b split-K with atomics", ex.check_gemm_split_k_atomic, split_k_atomic.gemm_split_k_atomic_solution,
                 starter=todo,
                 wrong_answers=(
                     WrongAnswer("T.copy, not an atomic", wrong.split_k_copy_not_atomic, "overwrote C instead of adding"),
                     WrongAnswer("bz not in the K offset", wrong.split_k_same_slice, "every slice read the same part of K"),
                     WrongAnswer("steps per slice rounded down", wrong.split_k_floor_steps, "were never added"),
                     WrongAnswer("ReLU on each slice", wrong.split_k_relu_per_slice, "sum of each slice's ReLU"),
                     WrongAnswer("accumulator not cleared", wrong.split_k_no_clear, "never cleared"),
                     WrongAnswer("grid rounds M down", wrong.split_k_grid_floor, "no block ever added to them"),
                     WrongAnswer("no split at all", wrong.split_k_no_split, "never reads blockIdx.z"),
                 )),
        Exercise("02b a tile for a T4", ex.check_t4_tile, t4_tile.T4_TILE_SOLUTION, starter=None,
                 wrong_answers=(
                     WrongAnswer("the seed unchanged", wrong.T4_SEED_UNCHANGED, "needs 96 KiB"),
                     WrongAnswer("block_K = 48", wrong.T4_BLOCK_K_48, "needs 72 KiB"),
                     WrongAnswer("block_K = 16", wrong.T4_BLOCK_K_16, "a larger block_K also fits"),
                     WrongAnswer("two stages instead", wrong.T4_TWO_STAGES, "keep three stages"),
                     WrongAnswer("a smaller tile", wrong.T4_SMALLER_TILE, "keep the seed's 128 x 128 tile"),
                     WrongAnswer("a dict", wrong.T4_AS_DICT, "not a GemmConfig"),
                 )),
    ]


def flow_bugs():
    """Bugs a reader could type into the kernel cells (``tests/test_reader_flow.py``)."""
    from .. import FlowBug

    return [
        FlowBug("02_gemm_relu.ipynb", "gemm_relu_program", old="T.copy(B[ko * block_K, bx * block_N], B_shared)",
                new="T.copy(B[ko * block_K, by * block_N], B_shared)", what="B tile indexed by the row block"),
        FlowBug("02_gemm_relu.ipynb", "gemm_relu_program", old="C_local[i, j] = T.max(C_local[i, j], 0)",
                new="C_local[i, j] = C_local[i, j]", what="ReLU left out"),
        FlowBug("02b_gemm_in_depth.ipynb", "gemm_relu_program", old="T.copy(A[by * block_M, ko * block_K], A_shared)",
                new="T.copy(A[by * block_M, ko], A_shared)", what="A tile's K corner not scaled by block_K",
                until="## 7"),
        FlowBug("02b_gemm_in_depth.ipynb", "gemm_partial_program",
                old="T.copy(B[(bz * steps_per_split + ko) * block_K, bx * block_N], B_shared)",
                new="T.copy(B[ko * block_K, bx * block_N], B_shared)", what="split-K: every slice reads B's first slice",
                until="### One row"),
        FlowBug("02b_gemm_in_depth.ipynb", "gemv_relu_program",
                old="acc[i, v] += T.cast(a_vals[u, i], accum_dtype) * T.cast(b_rows[u, v], accum_dtype)",
                new="acc[i, v] += T.cast(a_vals[u, i], accum_dtype) * T.cast(b_rows[0, v], accum_dtype)",
                what="GEMV: every unrolled row multiplied by the first row's B", until="### The last row"),
        FlowBug("02b_gemm_in_depth.ipynb", "clamped_program", old="row0 = T.min(by * block_M, T.max(m - block_M, 0))",
                new="row0 = T.min(by * block_M, T.max(m - block_M - 8, 0))",
                what="clamped: the last row of tiles moved 8 rows too far up", until="#### Two boxes"),
        FlowBug("02b_gemm_in_depth.ipynb", "two_box_program",
                old="T.copy(C_local[SLICE:2 * SLICE, 0:block_N], C[bottom:bottom + SLICE, bx * block_N:(bx + 1) * block_N])",
                new="T.copy(C_local[SLICE:2 * SLICE, 0:block_N], C[top:top + SLICE, bx * block_N:(bx + 1) * block_N])",
                what="two boxes: the lower half of C stored at the upper box's rows", until="#### Short box"),
        FlowBug("02b_gemm_in_depth.ipynb", "short_box_program",
                old="T.copy(A[0:a_rows, k0:k0 + 64], A_shared[0:a_rows, 0:64])",
                new="T.copy(A[0:a_rows, k0 + 64:k0 + 128], A_shared[0:a_rows, 0:64])",
                what="short box: the first 64 columns of each step read from the second", until="#### Swapped"),
        FlowBug("02b_gemm_in_depth.ipynb", "swapped_program", old="T.copy(B[ko * block_K, bx * block_N], B_shared)",
                new="T.copy(B[ko * block_K, by * block_N], B_shared)",
                what="swapped: B's tile taken from M's block index"),
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import configs, kernel, exercises, plots, reading, rule  # noqa: E402,F401
