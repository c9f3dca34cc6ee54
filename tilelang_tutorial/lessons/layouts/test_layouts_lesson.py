"""What notebook 03's kernels compile to, checked (CPU only: layout inference, the emulator, and
small nvcc compiles where the notebook reads generated code; those are skipped without nvcc)."""
from __future__ import annotations

import functools
import re

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from tilelang_tutorial import layouts, runtime
from tilelang_tutorial.lessons.layouts import exercises, programs
from tilelang_tutorial.lessons.tiles.scale_copy import scale_copy_program

needs_nvcc = pytest.mark.skipif(runtime.nvcc_path() is None, reason="needs nvcc to read generated code")


@functools.lru_cache(maxsize=None)
def _chained(arch: str, policy: str = "FullCol", threads: int = 256):
    return layouts.infer_layouts(programs.chained_gemm_program(threads=threads, policy=layouts.warp_policy(policy)),
                                 arch=arch)


# -- section 1 ---------------------------------------------------------------------------------

def test_parallel_fragment_gives_each_thread_16_byte_runs():
    y = layouts.infer_layouts(scale_copy_program(64, block_M=64, block_N=64), arch="sm_90a")["y_frag"]
    assert y.threads == 128 and y.registers_per_thread == 32 and y.replicate == 1
    assert "32 elements/thread (16 32-bit registers)" in y.summary()
    for t in (0, 9, 127):
        rows, cols = np.nonzero(y.owner[0] == t)
        assert sorted(set(rows.tolist())) == [t // 8 + 16 * k for k in range(4)]
        assert sorted(set(cols.tolist())) == list(range(8 * (t % 8), 8 * (t % 8) + 8))


# -- section 2 ---------------------------------------------------------------------------------

def test_mma_a_operand_is_four_f16x2_registers_per_thread():
    import tilelang.language as T
    from tilelang.cuda.intrinsics.layout.mma_layout import shared_16x16_to_mma_a_32x8_layout

    info = layouts.fragment_info(T.Fragment([16, 16], forward_fn=shared_16x16_to_mma_a_32x8_layout), dtype="float16")
    assert info.threads == 32 and info.registers_per_thread == 8
    slot = {int(info.register[0, i, j]): (int(i), int(j)) for i, j in np.argwhere(info.owner[0] == 0)}
    pairs = [(slot[2 * k], slot[2 * k + 1]) for k in range(4)]
    assert pairs == [((0, 0), (0, 1)), ((8, 0), (8, 1)), ((0, 8), (0, 9)), ((8, 8), (8, 9))]


def test_register_a_operand_is_replicated_over_the_warps_that_share_rows():
    a = layouts.infer_layouts(programs.gemm_rs_program(64, 64, 32), arch="sm_80")["A_local"]
    assert a.replicate == 2 and a.registers_per_thread == 32
    assert a.owners(0, 0) == [0, 64] and a.owners(40, 17) == [32, 96]


def test_a_printed_formula_worked_term_by_term_names_the_owner():
    y = layouts.infer_layouts(scale_copy_program(64, block_M=64, block_N=64), arch="sm_90a")["y_frag"]
    assert layouts.decode(y.thread_expr, _i=17, _j=42) == f"{y.thread_expr} = 8 + 5 = 13"
    assert y.owners(17, 42) == [13] and layouts.decode(y.index_expr, _i=17, _j=42).endswith(" = 10")
    a = layouts.infer_layouts(programs.gemm_rs_program(64, 64, 32), arch="sm_80")["A_local"]
    worked = [layouts.decode(a.thread_expr, _i=40, _j=17, _rep=rep) for rep in range(2)]
    assert [int(w.rsplit(" = ", 1)[1]) for w in worked] == a.owners(40, 17)
    assert layouts.decode("_j", _j=7) == "_j = 7"
    assert layouts.decode("(_j // 32 + _i % 8 // 4) % 2 * 32 + _j", _i=5, _j=40).endswith("= 0 + 40 = 40")


@needs_nvcc
def test_mma_ptx_takes_a_in_four_32_bit_registers():
    from tilelang_tutorial.inspector import kernel_ptx, kernel_source

    kernel = runtime.compile_kernel(programs.gemm_rs_program(64, 64, 32), arch="sm_80")
    assert "half_t A_local[32];" in kernel_source(kernel)
    mma = next(line.strip() for line in kernel_ptx(kernel).splitlines() if line.strip().startswith("mma.sync"))
    assert mma.startswith("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    operands = [[r.strip() for r in group.split(",")] for group in re.findall(r"\{([^}]*)\}", mma)]
    assert [len(g) for g in operands] == [4, 4, 2, 4]          # D, A, B, C
    assert all(r.startswith("%r") for r in operands[1]) and all(r.startswith("%f") for r in operands[0])


# -- section 3 ---------------------------------------------------------------------------------

def test_mma_and_wgmma_accumulators():
    acc80 = layouts.infer_layouts(programs.gemm_program(128, 128, 64), arch="sm_80")["C_local"]
    acc90 = layouts.infer_layouts(programs.gemm_program(128, 128, 64), arch="sm_90a")["C_local"]
    assert acc80.region_of(acc80.warp_of(), 1) == ((64, 128), (0, 64))
    assert acc80.launch_threads == 128 and acc90.launch_threads == 256 and acc90.thread_offset == 128
    warps = acc90.warp_of()
    for w in range(4):
        rows = np.unique(np.nonzero(warps == w)[0]).tolist()
        assert rows == list(range(16 * w, 16 * w + 16)) + list(range(64 + 16 * w, 80 + 16 * w))
        assert np.unique(np.nonzero(warps == w)[1]).tolist() == list(range(128))


# -- section 4 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("policy", ["FullCol", "FullRow", "Square"])
def test_every_policy_splits_the_64_row_chained_gemm_by_columns(arch, policy):
    infos = _chained(arch, policy)
    assert infos["acc_h"].split_axis() == "columns" and infos["acc_y"].split_axis() == "columns"
    y = infos["acc_y"]
    assert y.region_of(y.warpgroup_of(), 0) == ((0, 64), (0, 256))
    assert y.region_of(y.warpgroup_of(), 1) == ((0, 64), (256, 512))


def test_128_rows_make_the_policy_a_choice():
    for policy, axis, region in (("FullRow", "rows", ((0, 64), (0, 128))), ("FullCol", "columns", ((0, 128), (0, 64)))):
        info = layouts.infer_layouts(programs.gemm_program(128, 128, 64, threads=256, policy=layouts.warp_policy(policy)),
                                     arch="sm_90a")["C_local"]
        assert info.split_axis() == axis and info.region_of(info.warpgroup_of(), 0) == region


def test_one_warpgroup_would_hold_256_accumulator_values_per_thread():
    assert _chained("sm_90a", "FullCol", 128)["acc_y"].registers_per_thread == 256
    assert _chained("sm_90a", "FullCol", 256)["acc_y"].registers_per_thread == 128


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_first_result_in_a_register_fragment_fails_layout_inference(arch):
    with pytest.raises(RuntimeError, match="Layout infer conflict between acc_h and H_frag") as err:
        layouts.infer_layouts(programs.chained_gemm_fragment_program(), arch=arch)
    if arch == "sm_90a":
        assert "replicate: 2" in str(err.value) and "_j // 32 * 128" in str(err.value)


# -- section 5 ---------------------------------------------------------------------------------

def test_swizzle_is_chunk_xor_row():
    chunk = layouts.swizzled_info((64, 64)).offset_2d()[:, ::8] % 64 // 8
    rows = np.arange(64)
    assert np.array_equal(chunk, np.arange(8)[None, :] ^ (rows % 8)[:, None])


def test_gemm_operand_tiles_are_swizzled_by_inference():
    infos = layouts.infer_layouts(programs.gemm_program(128, 128, 64), arch="sm_90a")
    assert list(infos["A_shared"].shape) == [2, 128, 32] and list(infos["B_shared"].shape) == [2, 32, 128]
    for name in ("A_shared", "B_shared"):
        shape = infos[name].offset_2d().shape
        assert layouts.bank_conflicts(infos[name], layouts.ldmatrix_reads(shape)).max() == 1


# -- section 6: the transpose ------------------------------------------------------------------

def test_transpose_fragment_layout_keeps_the_writes_coalesced():
    tile = layouts.infer_layouts(programs.transpose_program(200, 136), arch="sm_90a")["B_tile"]
    assert tile.thread_expr == "_i % 2 * 64 + _j" and tile.registers_per_thread == 32


@pytest.mark.parametrize("options,worst", [({}, 32), ({"swizzle": True}, 4), ({"pad": 8}, 4), ({"pad": 2}, 1),
                                           ({"pad": 1}, 2)])
def test_transpose_read_conflicts(options, worst):
    reads = layouts.shared_reads(programs.transpose_program(200, 136, **options), arch="sm_90a")
    assert len(reads) == 1 and reads[0].expression == "B_tile[i, j] = A_shared[j, i]"
    assert (reads[0].degrees == worst).all() and reads[0].degrees.size == 128


@pytest.mark.parametrize("pad,worst", [(0, 32), (1, 1), (2, 2), (4, 4)])
def test_fp32_transpose_needs_one_word_of_padding(pad, worst):
    read = layouts.shared_reads(programs.transpose_program(200, 136, pad=pad, dtype="float32"), arch="sm_90a")[0]
    assert read.worst == worst


def test_shared_reads_follow_the_kernels_own_index():
    from tilelang_tutorial.lessons.layouts import wrong_answers

    read = layouts.shared_reads(wrong_answers.transpose_untransposed_read(200, 136), arch="sm_90a")[0]
    assert read.expression == "B_tile[i, j] = A_shared[i, j]" and read.worst == 1


def test_transpose_is_exact_in_the_emulator_and_its_bug_is_caught():
    import torch

    from tilelang_tutorial import checks, emulate
    from tilelang_tutorial.lessons.layouts import wrong_answers

    for factory, ok in ((programs.transpose_program, True), (wrong_answers.transpose_blocks_not_swapped, False)):
        a = checks.random_tensor((200, 136), torch.float32, "cpu")
        b = checks.poisoned((136, 200), torch.float32, "cpu")
        emulate.run(factory(200, 136, dtype="float32"), a, b)
        assert checks.compare(b, a.float().T, tolerance=0.0).ok is ok


def test_section_6_check_passes_the_kernel_and_names_a_grid_that_drops_the_partial_tiles():
    """The notebook's check of its transpose cell (the mutation tests' too), on both ragged shapes."""
    from tilelang_tutorial import checks
    from tilelang_tutorial.lessons.layouts import exercises, wrong_answers

    res = exercises.check_transpose(programs.transpose_program, verbose=False)
    assert res.ok and res.numerics_checked, str(res)
    assert all(f"{m} x {n}" in str(res) for m, n in checks.RAGGED_SHAPES), str(res)
    res = exercises.check_transpose(wrong_answers.section6_grid_drops_partial_tiles, verbose=False)
    assert not res.ok and "drops the last, partial tile" in str(res), str(res)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("options", [{}, {"swizzle": True}, {"pad": 1}, {"pad": 2}, {"pad": 8}])
def test_every_transpose_layout_is_exact_on_the_gpu(dtype, options):
    # the emulator ignores shared layouts: only the GPU runs the padded / swizzled addressing
    import torch

    from tilelang_tutorial import checks

    kernel = runtime.compile_kernel(programs.transpose_program(200, 136, dtype=dtype, **options))
    a = checks.random_tensor((200, 136), getattr(torch, dtype), "cuda")
    b = checks.poisoned((136, 200), getattr(torch, dtype), "cuda")
    runtime.run(kernel, a, b)
    torch.cuda.synchronize()
    assert checks.compare(b, a.float().T, tolerance=0.0).ok


@needs_nvcc
def test_padding_costs_the_16_byte_copy_into_shared_memory():
    from tilelang_tutorial.inspector import kernel_source

    lines = {pad: [line.strip() for line in kernel_source(runtime.compile_kernel(programs.transpose_program(200, 136, pad=pad),
                                                                               arch="sm_90a")).splitlines()
                   if "A_shared" in line and "=" in line] for pad in (0, 2)}
    assert lines[0][0].startswith("*(uint4*)(A_shared") and lines[2][0].startswith("*(uint1*)(A_shared")
    assert "& 63) * 64)" in lines[0][1] and "& 63) * 66)" in lines[2][1]


@needs_nvcc
def test_notebook_01s_transpose_checker_turns_section_6s_design_down():
    """Section 6's transpose is the design notebook 01's exercise 2 rejects, from its generated code."""
    from tilelang_tutorial.lessons.tiles import exercises as tiles_exercises

    for options, phrase in (({}, "is written one element at a time"), ({"pad": 2}, "is not loaded with 16-byte vectors")):
        res = tiles_exercises.check_transpose(
            lambda M, N, dtype: programs.transpose_program(M, N, dtype=dtype, **options), arch="sm_90a", verbose=False)
        assert not res.ok and not res.numerics_checked and phrase in str(res), str(res)


# -- exercises ---------------------------------------------------------------------------------

def test_answer_button_draws_only_when_clicked():
    pytest.importorskip("ipywidgets")
    drawn = []
    button = exercises.answer_button(lambda: drawn.append(1))
    assert drawn == []
    button.click()
    assert drawn == [1]


def test_answer_button_without_ipywidgets_draws_nothing(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    drawn = []
    assert exercises.answer_button(lambda: drawn.append(1)) is None
    assert drawn == [] and "ipywidgets is not installed" in capsys.readouterr().out
