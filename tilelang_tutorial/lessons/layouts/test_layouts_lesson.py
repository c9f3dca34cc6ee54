"""The facts notebook 03 states in its prose, checked (CPU only: layout inference, plus two small
nvcc compiles where the prose reads generated code; those are skipped without nvcc)."""
from __future__ import annotations

import difflib
import functools
import re

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from tilelang_tutorial import layouts, runtime
from tilelang_tutorial.lessons.gemm.kernel import gemm_relu_program
from tilelang_tutorial.lessons.layouts import exercises, programs
from tilelang_tutorial.lessons.mla.auto import mla_decode_program
from tilelang_tutorial.lessons.tiles.scale_copy import scale_copy_program

needs_nvcc = pytest.mark.skipif(runtime.nvcc_path() is None, reason="needs nvcc to read generated code")


@functools.lru_cache(maxsize=None)
def _two_warpgroups(arch: str, policy: str = "FullCol", threads: int = 256):
    return layouts.infer_layouts(programs.two_warpgroup_program(threads=threads, policy=layouts.warp_policy(policy)),
                                 arch=arch)


@functools.lru_cache(maxsize=None)
def _mla():
    return layouts.infer_layouts(mla_decode_program(64, "float16", split=False), arch="sm_90a")


# -- section 1 ---------------------------------------------------------------------------------

def test_parallel_fragment_gives_each_thread_16_byte_runs():
    y = layouts.infer_layouts(scale_copy_program(64, block_M=64, block_N=64), arch="sm_90a")["y_frag"]
    assert y.threads == 128 and y.registers_per_thread == 32 and y.replicate == 1
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
def test_every_policy_splits_the_64_row_tile_by_columns(arch, policy):
    infos = _two_warpgroups(arch, policy)
    assert infos["acc_s"].split_axis() == "columns" and infos["acc_o"].split_axis() == "columns"
    o = infos["acc_o"]
    assert o.region_of(o.warpgroup_of(), 0) == ((0, 64), (0, 256))


def test_one_warpgroup_would_hold_256_accumulator_values_per_thread():
    assert _two_warpgroups("sm_90a", "FullCol", 128)["acc_o"].registers_per_thread == 256
    assert _two_warpgroups("sm_90a", "FullCol", 256)["acc_o"].registers_per_thread == 128


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_scores_in_a_register_fragment_fail_layout_inference(arch):
    # the blog post's spelling: inference does not insert the exchange through shared memory
    with pytest.raises(RuntimeError, match="Layout infer conflict between acc_s and S_frag"):
        layouts.infer_layouts(programs.two_warpgroup_fragment_program(), arch=arch)


def test_mla_decode_layouts():
    mla = _mla()
    assert mla["acc_o"].launch_threads == 384
    s, o = mla["acc_s"], mla["acc_o"]
    assert s.split_axis() == "columns" and o.split_axis() == "columns"
    assert s.region_of(s.warpgroup_of(), 0) == ((0, 64), (0, 32))
    assert s.registers_per_thread == 16 and o.registers_per_thread == 128
    assert mla["m_i"].replicate == 8


def test_mla_s_shared_annotation_equals_what_inference_picks():
    inferred = _two_warpgroups("sm_90a")["S_shared"].offset_2d()
    assert np.array_equal(_mla()["S_shared"].offset_2d(), inferred)
    assert np.array_equal(inferred, layouts.swizzled_info((64, 64)).offset_2d())


# -- section 5 ---------------------------------------------------------------------------------

def test_swizzle_is_chunk_xor_row():
    chunk = layouts.swizzled_info((64, 64)).offset_2d()[:, ::8] % 64 // 8
    rows = np.arange(64)
    assert np.array_equal(chunk, np.arange(8)[None, :] ^ (rows % 8)[:, None])


def test_gemm_relu_operand_tiles_are_swizzled_by_inference():
    infos = layouts.infer_layouts(gemm_relu_program(1024, 1024, 1024), arch="sm_90a")
    assert list(infos["A_shared"].shape) == [3, 128, 64] and list(infos["B_shared"].shape) == [3, 64, 128]
    for name in ("A_shared", "B_shared"):
        shape = infos[name].offset_2d().shape
        assert layouts.bank_conflicts(infos[name], layouts.ldmatrix_reads(shape)).max() == 1


# -- section 6 ---------------------------------------------------------------------------------

def test_annotation_is_the_only_shared_layout_of_the_copy():
    assert "A_shared" not in layouts.infer_layouts(programs.annotated_copy_program(swizzle=False), arch="sm_90a")
    assert "A_shared" in layouts.infer_layouts(programs.annotated_copy_program(swizzle=True), arch="sm_90a")


@needs_nvcc
def test_swizzle_annotation_changes_only_shared_accesses_and_adds_a_barrier():
    from tilelang_tutorial.inspector import kernel_source

    src = {s: kernel_source(runtime.compile_kernel(programs.annotated_copy_program(swizzle=s), arch="sm_90a"))
           for s in (False, True)}
    changed = [line for line in difflib.unified_diff(src[False].splitlines(), src[True].splitlines(), lineterm="", n=0)
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert changed and all("A_shared" in line or "__syncthreads" in line for line in changed)
    assert src[False].count("__syncthreads") == 0 and src[True].count("__syncthreads") == 1


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
