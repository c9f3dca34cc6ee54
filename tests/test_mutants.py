"""Mutation testing (``tilelang_tutorial.mutants``): each rule makes the expected one replacement on
a small kernel's source, a mutant builds and runs as the kernel it describes, and a fixed seeded
sample of the lessons' mutants is rejected by the checks (``python -m tilelang_tutorial mutants``
runs them all)."""
import importlib

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


def test_the_sample_is_seeded():
    pairs = list(range(50))
    assert mu.select(pairs, 5, seed=3) == mu.select(pairs, 5, seed=3) == sorted(mu.select(pairs, 5, seed=3))
    assert mu.select(pairs, None, seed=3) == pairs


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


def test_a_seeded_sample_of_mutants_is_rejected_by_the_checks():
    module = _lesson_mutants()["tiles"]
    report = mu.run_lesson("tiles", module.targets(), module.EQUIVALENT, sample=SAMPLE, seed=SEED)
    assert len(report.outcomes) == SAMPLE
    assert not report.survivors, "\n".join(f"{o.key}: the check said {o.detail}" for o in report.survivors)
