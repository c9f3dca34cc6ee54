"""Lesson 02: GEMM with a fused ReLU (``notebooks/02_gemm_relu.ipynb``).

Kernel :mod:`.kernel` (factory, builder, reference), the op :mod:`.op`, configurations :mod:`.configs`, exercises
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
    from . import op

    progs = programs_of(record)
    if record["config"].get("variant") == "rule":
        progs += [op.gemm_relu, op._plan, op.validate_inputs]
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
            from .op import build_for

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
    from ...exercise_kit import mutated
    from .. import Exercise, WrongAnswer
    from . import exercises as ex
    from .configs import SEED_CONFIG
    from .kernel import gemm_relu_program
    from .solutions import bias_gelu, split_k_atomic, t4_tile, transpose_b

    def todo(*args):
        raise NotImplementedError

    def notebook_02s_kernel(M, N, K, in_dtype):
        """notebook 02's kernel as it is: B (K, N), three tensors"""
        return gemm_relu_program(M, N, K, in_dtype=in_dtype)

    # Each wrong answer is its solution with one mistake typed in: (old, new) edits of its source.
    bt = transpose_b.gemm_transpose_b_solution
    bt_copy = "T.copy(B[bx * block_N, ko * block_K], B_shared)"
    relu = "C_local[i, j] = T.max(C_local[i, j], 0)"
    gelu = bias_gelu.gemm_bias_gelu_solution
    gelu_line = "C_local[i, j] = 0.5 * x * (1.0 + T.erf(x * _INV_SQRT2))"
    bias_added = "x = C_local[i, j] + T.cast(Bias[col], accum_dtype)"
    sk = split_k_atomic.gemm_split_k_atomic_solution
    sk_steps = "steps_per_split = -(-(-(-K // block_K)) // split)"
    sk_add = "T.atomic_add(C[by * block_M, bx * block_N], acc)"
    sk_grid = "T.ceildiv(M, block_M), split, threads=threads"
    # the grid with its extents swapped (bx still walks N), and a K loop that drops K's partial last step
    grid = ("T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)", "T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N)")
    k_floor = ("T.Pipelined(T.ceildiv(K, block_K)", "T.Pipelined(K // block_K")
    return [
        Exercise("02 transposed B", ex.check_gemm_transposed_b, bt, starter=None,
                 wrong_answers=(
                     WrongAnswer("(K, N) B", notebook_02s_kernel, "stored (N, K)"),
                     WrongAnswer("no pipeline", mutated(bt, ("for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages)",
                                                             "for ko in T.serial(T.ceildiv(K, block_K))")), "T.Pipelined"),
                     WrongAnswer("wrong tile corner", mutated(bt, (bt_copy, "T.copy(B[ko * block_K, bx * block_N], B_shared)")),
                                 "which element each B tile copy starts at"),
                     WrongAnswer("no ReLU", mutated(bt, (relu, "C_local[i, j] = C_local[i, j]")), "negative outputs"),
                     WrongAnswer("B tiles read as (K, N)", mutated(
                         bt, ("T.alloc_shared((block_N, block_K), in_dtype)", "T.alloc_shared((block_K, block_N), in_dtype)"),
                         (bt_copy, "T.copy(B[ko * block_K, bx * block_N], B_shared)"), (", transpose_B=True)", ")")),
                                 "as if it were stored (K, N)"),
                     WrongAnswer("grid extents swapped", mutated(bt, grid), "bx walks N's tiles"),
                     WrongAnswer("K loop of K // block_K steps", mutated(bt, k_floor), "drops K's partial last step"),
                     WrongAnswer("fp16 accumulator", mutated(bt, ('accum_dtype = "float32"', "accum_dtype = in_dtype")),
                                 "summed in fewer bits than fp32"),
                 )),
        Exercise("02 bias + GELU", ex.check_gemm_epilogue, gelu, starter=todo,
                 wrong_answers=(
                     WrongAnswer("no bias parameter", notebook_02s_kernel, "4 tensors"),
                     WrongAnswer("factory raises", lambda M, N, K, dt: 1 / 0, "ZeroDivisionError"),
                     WrongAnswer("GELU before bias", mutated(gelu, (bias_added, "x = C_local[i, j]"), (
                         gelu_line, gelu_line + " + T.cast(Bias[col], accum_dtype)")), "bias is added after the activation"),
                     WrongAnswer("tanh approximation", mutated(gelu, (gelu_line, "C_local[i, j] = 0.5 * x * (1.0 + T.tanh("
                                                                      "0.7978845608028654 * (x + 0.044715 * x * x * x)))")),
                                 "tanh approximation"),
                     WrongAnswer("sigmoid approximation", mutated(gelu, (gelu_line, "C_local[i, j] = x / (1.0 + T.exp(-1.702 * x))")),
                                 "sigmoid approximation"),
                     WrongAnswer("plain ReLU", mutated(gelu, (gelu_line, "C_local[i, j] = T.max(x, 0)")), "matches ReLU(x)"),
                     WrongAnswer("erf(x / 2)", mutated(gelu, ("T.erf(x * _INV_SQRT2)", "T.erf(x * 0.5)")), "not by 2"),
                     WrongAnswer("no factor 0.5", mutated(gelu, ("0.5 * x * (1.0 + T.erf", "x * (1.0 + T.erf")), "factor 0.5"),
                     WrongAnswer("bias never added", mutated(gelu, (bias_added, "x = C_local[i, j]")), "without the bias"),
                     WrongAnswer("grid extents swapped", mutated(gelu, grid), "bx walks N's tiles"),
                     WrongAnswer("K loop of K // block_K steps", mutated(gelu, k_floor), "drops K's partial last step"),
                 )),
        Exercise("02b split-K with atomics", ex.check_gemm_split_k_atomic, sk, starter=todo,
                 wrong_answers=(
                     WrongAnswer("T.copy, not an atomic", mutated(sk, (sk_add, "T.copy(acc, C[by * block_M, bx * block_N])")),
                                 "overwrote C instead of adding"),
                     WrongAnswer("bz not in the K offset", mutated(
                         sk, ("A[by * block_M, (bz * steps_per_split + ko) * block_K]", "A[by * block_M, ko * block_K]"),
                         ("B[(bz * steps_per_split + ko) * block_K, bx * block_N]", "B[ko * block_K, bx * block_N]")),
                                 "every slice read the same part of K"),
                     WrongAnswer("steps per slice rounded down", mutated(
                         sk, (sk_steps, "steps_per_split = -(-K // block_K) // split")), "were never added"),
                     WrongAnswer("ReLU on each slice", mutated(sk, (sk_add, "for i, j in T.Parallel(block_M, block_N):\n"
                                                                    "                acc[i, j] = T.max(acc[i, j], 0)\n"
                                                                    "            " + sk_add)),
                                 "sum of each slice's ReLU"),
                     WrongAnswer("accumulator not cleared", mutated(sk, ("T.clear(acc)", "")), "never cleared"),
                     WrongAnswer("grid rounds M down", mutated(sk, (sk_grid, "M // block_M, split, threads=threads")),
                                 "no block ever added to them"),
                     WrongAnswer("grid extents swapped", mutated(sk, (
                         "T.ceildiv(N, block_N), T.ceildiv(M, block_M), split", "T.ceildiv(M, block_M), T.ceildiv(N, block_N), split")),
                                 "no block ever added to them"),
                     WrongAnswer("no split at all", mutated(sk, (sk_steps, "steps_per_split = -(-K // block_K)"),
                                                            (sk_grid, "T.ceildiv(M, block_M), 1, threads=threads")),
                                 "never reads blockIdx.z"),
                 )),
        Exercise("02b a tile for a T4", ex.check_t4_tile, t4_tile.T4_TILE_SOLUTION, starter=None,
                 wrong_answers=(
                     WrongAnswer("the seed unchanged", SEED_CONFIG, "needs 96 KiB"),
                     WrongAnswer("block_K = 48", SEED_CONFIG.replace(block_K=48), "needs 72 KiB"),
                     WrongAnswer("block_K = 16", SEED_CONFIG.replace(block_K=16), "a larger block_K also fits"),
                     WrongAnswer("two stages instead", SEED_CONFIG.replace(num_stages=2), "keep three stages"),
                     WrongAnswer("a smaller tile", SEED_CONFIG.replace(block_M=64, block_N=64), "keep the seed's 128 x 128 tile"),
                     WrongAnswer("a dict", SEED_CONFIG.replace(block_K=32).as_dict(), "not a GemmConfig"),
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
        FlowBug("02_gemm_relu.ipynb", "gemm_relu_program", old="T.Pipelined(T.ceildiv(K, block_K)",
                new="T.Pipelined(K // block_K", what="K loop of K // block_K steps: K's partial last step dropped"),
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
    ]


# the modules a notebook reaches through the lesson (lesson.exercises.check_..., ...)
from . import blackwell, configs, kernel, exercises, last_rows, op, plots, reading, rule  # noqa: E402,F401
