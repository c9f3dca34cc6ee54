"""Mutation testing (``tilelang_tutorial.mutants``): each rule makes the expected one replacement on
a small kernel's source, a mutant builds and runs as the kernel it describes, and a fixed seeded
sample of the lessons' mutants is rejected by the checks (``python -m tilelang_tutorial mutants``
runs them all)."""
import dataclasses
import importlib
import warnings

import pytest
import tilelang.language as T
import torch

from tilelang_tutorial import checks, emulate, lessons
from tilelang_tutorial import mutants as mu


def tile_max_program(N, block_M=16, block_N=32, dtype="float16"):
    M = T.dynamic("M")

    @T.prim_func
    def tile_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32"), alpha: T.float32):
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")
            T.fill(best, -T.infinity("float32"))
            T.clear(total)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = T.if_then_else(by * block_N + j < N, X[bx * block_M + i, by * block_N + j], 0)
            T.reduce_max(tile, best, dim=1)
            for i in T.Parallel(block_M):
                total[i] += best[i] * alpha
                total[i] *= 0.5
            T.copy(total, Out[bx * block_M])

    return tile_max


def _by_rule(rule, **options):
    return [(m.old, m.new) for m in mu.generate(tile_max_program, **options) if m.rule == rule]


def test_grid_swap_swaps_the_first_two_grid_extents():
    assert _by_rule("grid_swap") == [("T.ceildiv(M, block_M), T.ceildiv(N, block_N)",
                                      "T.ceildiv(N, block_N), T.ceildiv(M, block_M)")]


def test_index_swap_swaps_two_block_indices_in_one_index_expression():
    assert _by_rule("index_swap") == [("bx * block_M + i, by * block_N + j", "by * block_M + i, bx * block_N + j")]


def test_ceildiv_becomes_a_floor_division():
    assert _by_rule("ceildiv") == [("T.ceildiv(M, block_M)", "(M // block_M)"), ("T.ceildiv(N, block_N)", "(N // block_N)")]


def test_start_values_and_numbers_are_changed():
    assert _by_rule("neg_inf") == [('-T.infinity("float32")', "0")]
    # the masked value of the select (0 -> 1) and the rescale (0.5 -> 1.0); never a shape or an option
    assert _by_rule("constant") == [("0", "1"), ("0.5", "1.0")]


def test_drop_removes_a_fill_a_clear_and_a_rescale():
    assert _by_rule("drop") == [('T.fill(best, -T.infinity("float32"))', "pass"), ("T.clear(total)", "pass"),
                                ("total[i] *= 0.5", "pass")]


def test_accumulate_becomes_an_assignment():
    assert _by_rule("accumulate") == [("total[i] += best[i] * alpha", "total[i] = best[i] * alpha")]


def test_narrow_gives_fp32_fragments_the_input_dtype():
    assert _by_rule("narrow") == [('"float32"', "dtype")] * 3
    assert _by_rule("narrow", input_dtype='"bfloat16"') == [('"float32"', '"bfloat16"')] * 3


def test_param_replaces_a_scalar_by_the_checks_value():
    assert _by_rule("param", params={"alpha": 0.5}) == [("alpha", "0.5")]
    assert _by_rule("param") == []      # only the parameters a target names


def test_mask_flips_a_strict_comparison():
    assert _by_rule("mask") == [("by * block_N + j < N", "by * block_N + j <= N")]


def test_mutants_are_ordered_and_their_ids_are_stable():
    first, second = mu.generate(tile_max_program), mu.generate(tile_max_program)
    assert [m.id for m in first] == [m.id for m in second]
    assert first == sorted(first)
    assert len({m.id for m in first}) == len(first)
    # line 6 of the factory's source (T.Kernel); at one place, the rules in alphabetical order
    assert [m.id for m in first[:2]] == [
        "ceildiv L6: T.ceildiv(M, block_M) -> (M // block_M)",
        "grid_swap L6: T.ceildiv(M, block_M), T.ceildiv(N, block_N) -> T.ceildiv(N, block_N), T.ceildiv(M, block_M)"]


def test_the_signature_and_the_factorys_python_are_never_mutated():
    lines = {m.line for m in mu.generate(tile_max_program, params={"alpha": 0.5})}
    assert min(lines) == 6       # lines 1-5: the factory's def, M, the decorator, the kernel's signature


def test_a_mutant_builds_the_kernel_it_describes():
    mutant = next(m for m in mu.generate(tile_max_program) if m.rule == "accumulate")
    program = mu.build(tile_max_program, mutant)(64)
    x = checks.random_tensor((20, 64), torch.float16, "cpu")
    out = torch.empty(20)
    emulate.run(program, x, out, 1.0)
    # total = best * alpha, then halved: the last tile's max only (by = 1 writes last, per block)
    tiles = x.float().view(20, 2, 32).amax(dim=2)
    assert any(torch.allclose(out, tiles[:, t] * 0.5) for t in range(2))


def test_a_check_that_passes_everything_lets_every_mutant_survive():
    target = mu.Target("tile_max", tile_max_program, lambda answer: (True, "accepted"))
    report = mu.run_lesson("demo", [target], {}, sample=3, seed=1)
    assert len(report.outcomes) == 3 and len(report.survivors) == 3 and report.kill_rate == 0
    listed = {mu.key("tile_max", o.mutant): "reviewed" for o in report.outcomes}
    assert mu.run_lesson("demo", [target], listed, sample=3, seed=1).kill_rate == 1


def test_an_emulator_warning_the_right_answer_does_not_give_kills_the_mutant():
    """A dropped barrier that leaves the numbers right is still a race the reader is warned of; a
    warning the right answer gets too (a short box's reads of rows it never loads) kills nothing."""
    def warns_for_mutants(kind):
        def check(answer):
            if answer is not tile_max_program or kind is emulate.UninitialisedReadWarning:
                warnings.warn(f"{kind.__name__}: shared buffer S element [0]", kind)
            return True, "accepted"
        return check

    racy = mu.Target("tile_max", tile_max_program, warns_for_mutants(emulate.RaceWarning))
    assert mu.right_warnings(racy) == frozenset()
    killed, why = mu.judge(racy, mu.generate(tile_max_program)[0])
    assert killed and why.startswith("the emulator warned (RaceWarning)")
    by_design = mu.Target("tile_max", tile_max_program, warns_for_mutants(emulate.UninitialisedReadWarning))
    assert mu.right_warnings(by_design) == {"UninitialisedReadWarning"}
    assert mu.run_lesson("demo", [by_design], {}, sample=2, seed=0).kill_rate == 0


def test_the_sample_is_seeded():
    pairs = list(range(50))
    assert mu.select(pairs, 5, seed=3) == mu.select(pairs, 5, seed=3) == sorted(mu.select(pairs, 5, seed=3))
    assert mu.select(pairs, None, seed=3) == pairs


@dataclasses.dataclass(frozen=True)
class Knobs:
    block: int = 64
    stages: int = 3
    swizzle: bool = False

    def __post_init__(self):
        if self.block % 16:
            raise ValueError(f"block must be a multiple of 16, got {self.block}")


def test_data_mutants_change_one_entry_by_rule():
    table = [[4, 16], [1, 4]]
    wrong = {m.id: mu.build_data(table, m) for m in mu.data_mutants(table)}
    assert wrong["off_by_one L0: [0][1] -> [0][1] = 15"] == [[4, 15], [1, 4]]
    assert wrong["scale L0: [0][0] -> [0][0] = 8"] == [[8, 16], [1, 4]]
    assert wrong["swap L0: [0][0] -> [0][0] <-> [1][0]"] == [[1, 16], [4, 4]]
    assert not any(w == table for w in wrong.values())
    assert table == [[4, 16], [1, 4]]                     # the answer itself is never changed
    assert {m.rule for m in mu.data_mutants({"fits": True})} == {"flip"}


def test_a_dataclass_answer_is_rebuilt_with_its_own_checks():
    knobs = Knobs()
    mutants = {m.id: m for m in mu.data_mutants(knobs)}
    for refused in ("swap L0: .block -> .block <-> .stages", "off_by_one L0: .block -> .block = 65"):
        with pytest.raises(ValueError, match="multiple of 16"):
            mu.build_data(knobs, mutants[refused])
    assert mu.build_data(Knobs(block=48, stages=16), next(
        m for m in mu.data_mutants(Knobs(block=48, stages=16)) if m.rule == "swap")) == Knobs(block=16, stages=48)
    assert mu.build_data(knobs, mutants["scale L0: .block -> .block = 32"]) == Knobs(block=32)
    assert mu.build_data(knobs, mutants["flip L0: .swizzle -> .swizzle = True"]) == Knobs(swizzle=True)
    # a wrong value the answer's own class refuses counts as rejected
    target = mu.Target("knobs", knobs, lambda answer: (True, "accepted"))
    killed, why = mu.judge(target, mutants["off_by_one L0: .block -> .block = 63"])
    assert killed and why.startswith("ValueError")


def test_a_variant_built_from_another_factorys_source_is_mutated_under_its_own_name():
    from tilelang_tutorial.lessons.gemm import last_rows

    mutant = next(m for m in mu.generate(last_rows.clamped_program) if m.rule == "ceildiv")
    rebuilt = mu.build(last_rows.clamped_program, mutant)
    assert mutant.replaced in mu.source_of(rebuilt) and "row0 = T.min" in mu.source_of(rebuilt)


def test_cancelling_operands_overflow_an_fp16_running_sum_but_not_their_product():
    a, b = checks.cancelling_operands(5, 24, 200, torch.float16, "cpu", seed=0)
    running = torch.cumsum(a.float()[:, :, None] * b.float()[None, :, :], dim=1)
    assert running.abs().amax() > 65504                       # fp16's largest finite value
    assert (a.float() @ b.float()).abs().amax() < 65504 / 4    # C itself fits fp16 with room to spare
    assert torch.isinf(running[:, :64].sum(dim=1).half()).all()  # one 64-deep step in fp16: inf


def test_a_narrowed_accumulator_passes_random_inputs_and_fails_on_cancelling_ones():
    """02b's checks run each kernel on both kinds of inputs: the random ones alone let an fp16
    accumulator through (its error is below the fp16 tolerance there)."""
    from tilelang_tutorial.lessons.gemm import mutants as gemm_mutants

    (target,) = [t for t in gemm_mutants.targets() if t.name == "gemm_partial_program"]
    (narrow,) = [m for m in target.mutants() if m.rule == "narrow"]
    killed, why = mu.judge(target, narrow)
    assert killed and "cancelling inputs: FAIL" in why, why


def test_a_combine_that_does_not_rescale_when_its_max_rises_is_rejected():
    """The combine folds the splits in chunks of 16 with a running max: the checker's 19-split case
    puts the largest lse in the last split, so the max rises in the second chunk and the sums of
    the first must be rescaled."""
    from tilelang_tutorial.lessons.mla import mutants as mla_mutants

    (target,) = [t for t in mla_mutants.targets() if t.name == "combine_macro"]
    dropped = [m for m in target.mutants() if m.rule == "drop" and "*= weight" in m.old]
    assert len(dropped) == 2
    for mutant in dropped:
        killed, why = mu.judge(target, mutant, frozenset())
        assert killed and "19 splits" in why, why


def _lesson_mutants():
    return {name: importlib.import_module(f"{lessons.__name__}.{name}.mutants") for name in lessons.lesson_names()}


def test_every_lesson_has_targets_and_its_equivalent_mutants_exist():
    """Every reviewed equivalent mutant names a mutant the rules still make (a stale entry fails)."""
    for name, module in _lesson_mutants().items():
        targets = module.targets()
        assert targets, name
        made = {mu.key(t.name, m) for t in targets for m in t.mutants()}
        stale = set(module.EQUIVALENT) - made
        assert not stale, f"{name}: listed as equivalent but no longer made: {sorted(stale)}"


#: The CI sample: a few mutants of lesson 01's kernels and exercises, drawn with a fixed seed.
SAMPLE, SEED = 4, 0


def test_every_wrong_table_and_warp_configuration_is_rejected():
    """The answers that are data and need no compile: each data mutant of notebook 03's conflict
    table and notebook 04's warp configuration is rejected by the exercise's checker."""
    modules = _lesson_mutants()
    for lesson, name in (("layouts", "03 conflict table"), ("mla", "04 warp config")):
        (target,) = [t for t in modules[lesson].targets() if t.name == name]
        report = mu.run_lesson(lesson, [target], modules[lesson].EQUIVALENT)
        assert len(report.outcomes) >= 9
        assert not report.survivors, "\n".join(f"{o.key}: the check said {o.detail}" for o in report.survivors)


def test_a_seeded_sample_of_mutants_is_rejected_by_the_checks():
    module = _lesson_mutants()["tiles"]
    report = mu.run_lesson("tiles", module.targets(), module.EQUIVALENT, sample=SAMPLE, seed=SEED)
    assert len(report.outcomes) == SAMPLE
    assert not report.survivors, "\n".join(f"{o.key}: the check said {o.detail}" for o in report.survivors)


def test_a_batch_judged_per_sequence_names_the_worst_and_is_not_diluted():
    ref = torch.ones(4, 8, 16)
    out = ref.clone()
    out[2] *= 1.01                     # one sequence 1 % off: 0.5 % over the whole batch
    assert checks.compare(out, ref, tolerance=6e-3).ok
    cmp = checks.compare(out, ref, tolerance=6e-3, per="sequence")
    assert not cmp.ok and cmp.worst == 2 and "in sequence 2, the worst of 4" in str(cmp)
    assert str(checks.compare(ref, ref, tolerance=6e-3)) == str(checks.compare(ref, ref, tolerance=6e-3, per=""))


def test_a_softmax_denominator_narrowed_to_fp16_fails_on_the_flat_sequence():
    """The flat last sequence of ``make_paged_inputs(flat_large_last=True)`` adds 0.03 a page to a
    denominator of 64, below half of fp16's step there: an fp16 denominator drops seven pages."""
    from tilelang_tutorial.lessons.mla import mutants as mla_mutants

    (target,) = [t for t in mla_mutants.targets() if t.name == "mla_paged_program"]
    (narrow,) = [m for m in target.mutants() if m.id == "narrow L36: accum -> dtype"]
    assert "l_i" in narrow.context
    killed, why = mu.judge(target, narrow, frozenset())
    assert killed and "in sequence 4" in why, why


def test_listed_roundings_are_counted_apart_and_as_survivors_in_the_strict_rate():
    mutant = mu.Mutant(line=1, col=0, rule="narrow", old="float32", new="float16")
    outcomes = [mu.Outcome("k", mutant, True, ""), mu.Outcome("k", mutant, False, "", "padding rows are never stored"),
                mu.Outcome("k", mutant, False, "", mu.ROUNDING + ": `l_i` in fp16 ...")]
    report = mu.LessonReport("lesson", outcomes)
    assert (report.equivalent, report.roundings, report.survivors) == (2, 1, [])
    assert report.kill_rate == 1.0 and report.strict_kill_rate == 0.5
    assert "1 equivalent, 1 roundings within tolerance and 0 emulator limits" in report.summary()
    limit = mu.Outcome("k", mutant, False, "", mu.EMULATOR_LIMIT + ": the async proxy is not modelled")
    report = mu.LessonReport("lesson", outcomes + [limit])
    assert (report.emulator_limits, report.kill_rate) == (1, 1.0) and report.strict_kill_rate == pytest.approx(1 / 3)


def tma_handoff_program(wait_for_the_tile: bool, n=64):
    """A producer TMA-loads a tile (barrier ``tile_full``) and then a second one (``next_full``);
    the consumer reads the first tile after waiting ``next_full`` only, or both barriers."""
    @T.prim_func
    def tma_handoff(X: T.Tensor((2, n), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(1, threads=256) as bx:
            tile = T.alloc_shared((n,), "float16")
            next_tile = T.alloc_shared((n,), "float16")
            tile_full = T.alloc_barrier(128)
            next_full = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx < 128:
                if wait_for_the_tile:
                    T.barrier_wait(tile_full, 0)
                T.barrier_wait(next_full, 0)
                T.copy(tile, Y)
            else:
                T.tma_copy(X[0, 0:n], tile, barrier=tile_full)
                T.barrier_arrive(tile_full)
                T.tma_copy(X[1, 0:n], next_tile, barrier=next_full)
                T.barrier_arrive(next_full)

    return tma_handoff


def test_a_tma_load_is_seen_only_through_a_wait_on_its_own_barrier():
    """A TMA load lands when its barrier's phase completes: the producer's later arrival on another
    barrier does not order it (the emulator completes the copy at once, the race check does not),
    so a dropped wait on the load's barrier is a race even where the numbers come out right."""
    x = torch.randn(2, 64).half()
    for wait_for_the_tile in (True, False):
        y = torch.zeros(64).half()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", emulate.EmulatorWarning)
            emulate.run(tma_handoff_program(wait_for_the_tile), x, y)
        assert torch.equal(y, x[0])
        races = [f for f in emulate.last_findings() if f.kind == "race"]
        if wait_for_the_tile:
            assert races == []
        else:   # the consumer's read, and the copy nothing waits for as the block ends
            assert [f.buffer for f in races] == ["tile", "tile"], races
            assert all("T.tma_copy (landing on mbarrier tile_full)" in f.message for f in races), races
            assert "nothing waits for that phase" in races[1].message, races[1].message
