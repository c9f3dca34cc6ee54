"""Lesson 02's mutation targets (``python -m tilelang_tutorial mutants gemm``): notebook 02's GEMM +
ReLU kernel, checked as the notebook checks it (against the fp32 reference in the emulator, on a
ragged shape); notebook 02b's kernels, each checked as 02b checks it (the tensor-memory program,
the split-K pair, the GEMV, the last-rows kernels: against the fp32 reference in the emulator, C
poisoned, at the notebook's ragged shapes, on random inputs and on inputs that overflow an fp16
accumulator); and every exercise solution through its checker (the
T4 tile, an answer that is data, by :func:`tilelang_tutorial.mutants.data_mutants`).

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
import torch

from ... import checks, emulate, runtime
from ...mutants import Target, compare_run, exercise_target
from . import blackwell, gemv, last_rows, rule, split_k
from .kernel import gemm_relu_program, gemm_relu_reference

#: Ragged in M, N and K for the 128 x 128 x 64 tiles, with more row tiles (3) than column tiles (2)
#: so that swapped grid extents leave tiles unwritten.
GEMM_SHAPE = (300, 136, 200)


def _check_gemm_relu(factory):
    """Notebook 02's check of its kernel cell (every element within fp16 rounding, as its
    ``torch.testing.assert_close`` asks), with the output poisoned, for both ways the kernel can
    store C (straight from registers, and through shared memory)."""
    M, N, K = GEMM_SHAPE
    a = checks.random_tensor((M, K), torch.float16, "cpu")
    b = checks.random_tensor((K, N), torch.float16, "cpu")
    expected = gemm_relu_reference(a, b)
    lines = []
    for store_via_shared in (False, True):
        c = checks.poisoned((M, N), torch.float16, "cpu")
        passed, line = compare_run(factory(M, N, K, store_via_shared=store_via_shared), [a, b, c], expected,
                                   tolerance=checks.TOLERANCE["float16"])
        if passed:
            try:
                torch.testing.assert_close(c.float(), expected, rtol=2e-3, atol=2e-3)
            except AssertionError as err:
                passed, line = False, str(err).splitlines()[0]
        lines.append(f"store_via_shared={store_via_shared}: {line}")
        if not passed:
            return False, "; ".join(lines)
    return True, "; ".join(lines)


def _inputs(M, N, K):
    """Notebook 02b's two sets of inputs, by name: random normal A and B (C of ordinary size, so a
    wrong index, mask or ReLU shows), and A and B whose running sums over K pass fp16's largest
    value and cancel (:func:`tilelang_tutorial.checks.cancelling_operands`: an fp16 accumulator
    overflows). Each ``(a, b)``."""
    yield "random", (checks.random_tensor((M, K), torch.float16, "cpu"), checks.random_tensor((K, N), torch.float16, "cpu"))
    yield "cancelling", checks.cancelling_operands(M, N, K, torch.float16, "cpu")


def _on_each_input(M, N, K, run) -> tuple:
    """``run(a, b, c)`` on each of :func:`_inputs`, C poisoned, compared with the fp32 reference:
    ``(passed, the comparison's line)``, the first failure's."""
    line = ""
    for name, (a, b) in _inputs(M, N, K):
        c = checks.poisoned((M, N), torch.float16, "cpu")
        run(a, b, c)
        cmp = checks.compare(c, gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"])
        line = f"{M} x {N} x {K}, {name} inputs: {cmp}"
        if not cmp.ok:
            return False, line
    return True, line


#: notebook 02b's check of the tensor-memory program: ragged in M, N and K for its 128 x 128 x 64
#: tile, with more row tiles (3) than column tiles (2) so that swapped grid extents leave tiles unwritten
TMEM_SHAPE = (300, 136, 200)


def _check_tmem(factory):
    """Notebook 02b's check of the tensor-memory program: emulated at :data:`TMEM_SHAPE` with the
    tile :func:`.blackwell.gemm_relu_tmem_program` fixes (the variant built with its knobs)."""
    M, N, K = TMEM_SHAPE
    program = factory(M, N, K, block_M=blackwell.TMEM_LANES, block_N=128, block_K=64, num_stages=4, threads=128)
    return _on_each_input(M, N, K, lambda a, b, c: emulate.run(program, a, b, c))


#: notebook 02b's split-K check: C of 5 x 264 from K = 1000 in 3 slices, the narrow tile
SPLIT_K_CASE = (5, 264, 1000, 3)


def _check_split_k(partial_program, reduce_program):
    M, N, K, split = SPLIT_K_CASE
    narrow = rule.fitted(rule.NARROW, runtime.current_arch())
    knobs = {name: getattr(narrow, name) for name in ("block_M", "block_N", "block_K", "num_stages", "threads", "policy")}
    partial = runtime.compile_kernel(partial_program(N, K, split, **knobs))
    reduce = runtime.compile_kernel(reduce_program(N, split))

    def run(a, b, c):
        partials = checks.poisoned((split, M, N), torch.float32, "cpu")
        runtime.run(partial, a, b, partials)
        runtime.run(reduce, partials, c)

    return _on_each_input(M, N, K, run)


def _check_gemv(factory):
    """Notebook 02b's GEMV check: 3 rows of a ``max_m = 4`` kernel, N = 264, K = 1000."""
    kernel = runtime.compile_kernel(factory(264, 1000, max_m=4))
    return _on_each_input(3, 264, 1000, lambda a, b, c: runtime.run(kernel, a, b, c))


#: notebook 02b's ``check_on_a_ragged_shape``'s N and K: a partial last column of tiles, and a partial
#: last step of K for every block_K of the small-M tiles (64, 128, 256), each of them two steps or more
RAGGED_N, RAGGED_K = 200, 328


def _last_rows_check(cases):
    """Notebook 02b's ``check_on_a_ragged_shape`` at each of ``cases``: ``(config, M, N, K, knobs)``,
    the dynamic-M kernel built with the config's knobs (and ``knobs``, as the notebook binds them)."""
    def check(factory):
        line = ""
        for config, M, N, K, knobs in cases:
            kernel = runtime.compile_kernel(factory(None, N, K, in_dtype="float16", dynamic_m=True, **config.as_dict(), **knobs))
            passed, line = _on_each_input(M, N, K, lambda a, b, c: runtime.run(kernel, a, b, c))
            if not passed:
                return False, line
        return True, line

    return check


def _last_rows_targets():
    tiles = rule.SMALL_M_TILES
    N, K = RAGGED_N, RAGGED_K
    return [
        Target("clamped_program", last_rows.clamped_program,
               _last_rows_check([(tiles["m64n64k64s8"], 93, N, K, {})]), input_dtype="in_dtype"),
        # one row of tiles (the op's case), and two: the second's boxes clamped, the first's not
        Target("two_box_program", last_rows.two_box_program,
               _last_rows_check([(tiles["m128n64k64s6"], M, N, K, {}) for M in (72, 200)]), input_dtype="in_dtype"),
        # each block_K's boxes of A: one, two and four per step
        Target("short_box_program", last_rows.short_box_program,
               _last_rows_check([(tiles[name], 3, N, K, {"a_rows": 8})
                                 for name in ("m64n64k64s8", "m64n64k128s4", "m64n32k256s4")]), input_dtype="in_dtype"),
        Target("swapped_program", last_rows.swapped_program,
               _last_rows_check([(rule.swapped_config(128, 144), 300, 264, 136, {}),
                                 (rule.swapped_config(64, 48), 130, N, K, {})]), input_dtype="in_dtype"),
    ]


def targets():
    from . import exercise_cases

    kernels = [
        Target("gemm_relu_program", gemm_relu_program, _check_gemm_relu, input_dtype="in_dtype"),
        Target("tmem_variant", blackwell.tmem_variant, _check_tmem, input_dtype="in_dtype"),
        Target("gemm_partial_program", split_k.gemm_partial_program,
               lambda answer: _check_split_k(answer, split_k.splitk_reduce_relu_program), input_dtype="in_dtype"),
        Target("splitk_reduce_relu_program", split_k.splitk_reduce_relu_program,
               lambda answer: _check_split_k(split_k.gemm_partial_program, answer), input_dtype="out_dtype"),
        Target("gemv_relu_program", gemv.gemv_relu_program, _check_gemv, input_dtype="in_dtype"),
        *_last_rows_targets(),
    ]
    return kernels + [exercise_target(ex) for ex in exercise_cases()]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    "gemm_relu_program: mask L24: swizzle_panel > 0 -> swizzle_panel >= 0":
        "at the checked panel (4) `>= 0` and `> 0` both enable the swizzle, which only reorders which block computes "
        "which C tile (at panel 0 they differ: enabled, TileLang's code generator refuses it, as the last-rows "
        "kernels' checks at panel 0 show)",
    "gemm_relu_program: constant L24: 0 -> 1":
        "the swizzle only reorders which block computes which C tile: every tile's values are the same",
    "tmem_variant: mask L27: swizzle_panel > 0 -> swizzle_panel >= 0":
        "at the checked panel (4) `>= 0` and `> 0` both enable the swizzle, which only reorders which block computes "
        "which C tile (at panel 0 they differ: enabled, TileLang's code generator refuses it, as the last-rows "
        "kernels' checks at panel 0 show)",
    "tmem_variant: constant L27: 0 -> 1":
        "the swizzle only reorders which block computes which C tile: every tile's values are the same",
    "tmem_variant: narrow L21: accum_dtype -> in_dtype":
        "the epilogue's registers only take the ReLU before the in_dtype store: rounding to in_dtype first "
        "gives the same values (rounding is monotone and keeps 0 and the sign)",
    "gemv_relu_program: mask L32: k < K -> k <= K":
        "TileLang's LegalizeSafeMemoryAccess guards the load itself: the generated CUDA tests the bound again, so the "
        "element past the end reads 0, as the emulator models; the same values",
    "gemv_relu_program: mask L32: column < N -> column <= N":
        "TileLang's LegalizeSafeMemoryAccess guards the load itself: the generated CUDA tests the bound again, so the "
        "element past the end reads 0, as the emulator models; the same values",
    "gemv_relu_program: mask L34: k < K -> k <= K":
        "TileLang's LegalizeSafeMemoryAccess guards the load itself: the generated CUDA tests the bound again, so the "
        "element past the end reads 0, as the emulator models; the same values",
    "gemv_relu_program: mask L34: i < m -> i <= m":
        "TileLang's LegalizeSafeMemoryAccess guards the load itself: the generated CUDA tests the bound again, so the "
        "element past the end reads 0, as the emulator models; the same values",
    "gemv_relu_program: mask L52: i < m -> i <= m":
        "TileLang's LegalizeSafeMemoryAccess guards the store itself: the generated CUDA tests the bound again, so the "
        "element past the end is not written, as the emulator models; the same values",
    "gemv_relu_program: mask L52: bx * block_N + j < N -> bx * block_N + j <= N":
        "TileLang's LegalizeSafeMemoryAccess guards the store itself: the generated CUDA tests the bound again, so the "
        "element past the end is not written, as the emulator models; the same values",
    "gemv_relu_program: constant L32: 0 -> 1":
        "B's value 1 past K meets A's 0 there (its own guard), and past N makes only columns that are never stored",
    "gemv_relu_program: constant L34: 0 -> 1":
        "A's value 1 past K meets B's 0 there (its own guard), and past m makes only rows that are never stored",
    "clamped_program: constant L24: 0 -> 1":
        "`enable=swizzle_panel > 1` is off at the checked panel (0) as `> 0` is, and where it differs (panel 1) the swizzle only reorders which block computes which C tile",
    "clamped_program: constant L26: 0 -> 1":
        "T.max(m - block_M, 1) differs only where m <= block_M: one row of tiles, whose origin T.min(0, ...) is 0 either way",
    "two_box_program: constant L26: 0 -> 1":
        "`enable=swizzle_panel > 1` is off at the checked panel (0) as `> 0` is, and where it differs (panel 1) the swizzle only reorders which block computes which C tile",
    "two_box_program: constant L27: 0 -> 1":
        "T.max(m - 64, 1) differs only where m <= 64: the lower box then starts at row 1, not 0, and stores rows 1..64, "
        "rows the upper box stores with the same values (those past m dropped)",
    "short_box_program: constant L33: 64 -> 65":
        "block_K > 65 and block_K > 64 agree on every block_K the factory accepts (64, 128, 256)",
    "short_box_program: constant L35: 128 -> 129":
        "block_K > 129 and block_K > 128 agree on every block_K the factory accepts (64, 128, 256)",
    "02b a tile for a T4: off_by_one L0: .swizzle_panel -> .swizzle_panel = 3":
        "a right answer too: the exercise asks for block_K; the swizzle only reorders which block computes which tile",
    "02b a tile for a T4: off_by_one L0: .swizzle_panel -> .swizzle_panel = 5":
        "a right answer too: the exercise asks for block_K; the swizzle only reorders which block computes which tile",
    "02b a tile for a T4: scale L0: .swizzle_panel -> .swizzle_panel = 2":
        "a right answer too: the exercise asks for block_K; the swizzle only reorders which block computes which tile",
    "02b a tile for a T4: scale L0: .swizzle_panel -> .swizzle_panel = 8":
        "a right answer too: the exercise asks for block_K; the swizzle only reorders which block computes which tile",
    "02b a tile for a T4: flip L0: .store_via_shared -> .store_via_shared = True":
        "a right answer too: the exercise asks for block_K; C staged through shared memory reuses the pipeline's "
        "buffers (the checker reads TileLang's launch size for sm_75: within 64 KiB) and the values match",
}
