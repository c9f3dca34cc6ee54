"""CPU tests of layout extraction, bank-conflict arithmetic and layout plots (no nvcc, no GPU)."""
from __future__ import annotations

import functools

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from tilelang_tutorial import layouts as L
from tilelang_tutorial.lessons.layouts import programs as D
from tilelang_tutorial.lessons.tiles.scale_copy import scale_copy_program


@functools.lru_cache(maxsize=None)
def _infer(which: str, arch: str, policy: str = "Square", threads: int = 128):
    pol = L.warp_policy(policy)
    if which == "parallel":
        prog = scale_copy_program(64, block_M=64, block_N=64, threads=threads)
    elif which == "gemm":
        prog = D.gemm_program(128, 128, 64, threads=threads, policy=pol)
    elif which == "gemm_rs":
        prog = D.gemm_rs_program(64, 64, 32, threads=threads, policy=pol)
    elif which == "chained":
        prog = D.chained_gemm_program(threads=threads, policy=pol)
    else:
        raise KeyError(which)
    return L.infer_layouts(prog, arch=arch)


CASES = [
    ("parallel", "sm_80", "Square", 128, "y_frag"),
    ("parallel", "sm_90a", "Square", 256, "y_frag"),
    ("gemm", "sm_80", "Square", 128, "C_local"),
    ("gemm", "sm_90a", "Square", 128, "C_local"),
    ("gemm_rs", "sm_80", "Square", 128, "A_local"),
    ("gemm_rs", "sm_80", "Square", 128, "C_local"),
    ("chained", "sm_90a", "FullCol", 256, "acc_h"),
    ("chained", "sm_90a", "FullCol", 256, "acc_y"),
    ("chained", "sm_80", "Square", 256, "acc_y"),
]


@pytest.mark.parametrize("which,arch,policy,threads,buf", CASES)
def test_every_element_owned_once_per_replica(which, arch, policy, threads, buf):
    info = _infer(which, arch, policy, threads)[buf]
    assert info.kind == "fragment"
    assert info.owner.shape == (info.replicate, *info.shape)
    # every element has an owner inside the fragment's thread range
    lo, hi = info.thread_offset, info.thread_offset + info.threads
    assert info.owner.min() >= lo and info.owner.max() < hi
    # (thread, register) pairs are distinct: no two elements share a register slot
    pairs = info.owner.astype(np.int64) * 100000 + info.register
    assert len(np.unique(pairs)) == pairs.size
    # every thread of the fragment holds the same number of elements
    counts = set(info.elements_per_thread().values())
    assert counts == {info.registers_per_thread}
    assert len(info.elements_per_thread()) == info.threads


@pytest.mark.parametrize("which,arch,policy,threads,buf", CASES)
def test_thread_counts_match_the_launch(which, arch, policy, threads, buf):
    info = _infer(which, arch, policy, threads)[buf]
    # the fragment spans the threads the user launched ...
    assert info.threads == threads
    # ... which are all the block's threads, or the consumers after warp specialization added a
    # producer warpgroup in front of them
    assert info.launch_threads in (threads, threads + 128)
    assert info.thread_offset == info.launch_threads - threads


def test_warp_specialization_offsets_the_accumulator_on_hopper():
    acc = _infer("gemm", "sm_90a")["C_local"]
    assert acc.launch_threads == 256 and acc.thread_offset == 128
    assert _infer("gemm", "sm_80")["C_local"].thread_offset == 0


def test_mma_operand_fragment_is_replicated_across_the_n_warps():
    a = _infer("gemm_rs", "sm_80")["A_local"]
    # Square on 64x64 with 4 warps: 2 warps along N need the same A rows
    assert a.replicate == 2
    assert len(a.owners(0, 0)) == 2


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fullcol_splits_columns_between_warpgroups(arch):
    infos = _infer("chained", arch, "FullCol", 256)
    for name in ("acc_h", "acc_y"):
        info = infos[name]
        assert info.split_axis() == "columns", name
        wg = info.warpgroup_of()
        half = info.shape[1] // 2
        assert (wg[:, :half] == 0).all() and (wg[:, half:] == 1).all()


def test_fullrow_splits_rows_when_the_tile_allows_it():
    # 128 rows: each wgmma warpgroup takes 64 rows
    rows = L.infer_layouts(D.gemm_program(128, 128, 64, threads=256, policy=L.warp_policy("FullRow")), arch="sm_90a")
    cols = L.infer_layouts(D.gemm_program(128, 128, 64, threads=256, policy=L.warp_policy("FullCol")), arch="sm_90a")
    assert rows["C_local"].split_axis() == "rows"
    assert cols["C_local"].split_axis() == "columns"
    wg = rows["C_local"].warpgroup_of()
    assert (wg[:64] == 0).all() and (wg[64:] == 1).all()


def test_hand_made_fragment_matches_tvm_mapping():
    import tilelang.language as T
    from tilelang.cuda.intrinsics.layout.mma_layout import shared_16x16_to_mma_a_32x8_layout

    frag = T.Fragment([16, 16], forward_fn=shared_16x16_to_mma_a_32x8_layout)
    info = L.fragment_info(frag, name="mma_A", dtype="float16")
    for i, j in [(0, 0), (3, 9), (15, 15), (8, 1)]:
        t, r = shared_16x16_to_mma_a_32x8_layout(i, j)
        assert info.owner[0, i, j] == t and info.register[0, i, j] == r
    assert info.threads == 32 and info.registers_per_thread == 8


# -- bank conflicts ----------------------------------------------------------------------------


def test_phase_conflict_definition():
    assert L.phase_conflict(range(0, 128, 4)) == 1  # 32 consecutive words
    assert L.phase_conflict([0] * 32) == 1  # broadcast of one word
    assert L.phase_conflict([k * 128 for k in range(8)]) == 8  # same bank, 8 words
    assert L.phase_conflict([0, 2]) == 1  # two halves of one word


def test_ldmatrix_on_row_major_64_wide_fp16_is_8_way_and_swizzle_fixes_it():
    plain = L.row_major_info((64, 64), dtype="float16")
    swz = L.swizzled_info((64, 64), dtype="float16")
    pat = L.ldmatrix_reads((64, 64), elem_bytes=2)
    assert (L.bank_conflicts(plain, pat) == 8).all()
    assert (L.bank_conflicts(swz, pat) == 1).all()


def test_row_reads_are_conflict_free_both_ways():
    pat = L.row_reads((64, 64), elem_bytes=2)
    assert (L.bank_conflicts(L.row_major_info((64, 64)), pat) == 1).all()
    assert (L.bank_conflicts(L.swizzled_info((64, 64)), pat) == 1).all()


def test_padding_and_column_reads():
    pat = L.ldmatrix_reads((64, 64))
    assert L.bank_conflicts(L.row_major_info((64, 64), pad=8), pat).max() == 1
    col = L.column_reads((32, 32), elem_bytes=4)
    assert L.bank_conflicts(L.row_major_info((32, 32), dtype="float32"), col).max() == 32
    assert L.bank_conflicts(L.row_major_info((32, 32), dtype="float32", pad=1), col).max() == 1


def test_swizzle_is_a_permutation():
    swz = L.swizzled_info((64, 64))
    assert sorted(swz.offset_2d().ravel().tolist()) == list(range(64 * 64))


def test_inferred_gemm_shared_tiles_are_conflict_free_for_ldmatrix():
    infos = _infer("gemm", "sm_80")
    a = infos["A_shared"]
    rows, cols = a.offset_2d().shape
    assert L.bank_conflicts(a, L.ldmatrix_reads((rows, cols))).max() == 1


# -- text and plots ----------------------------------------------------------------------------


def test_layouts_text_mentions_every_buffer():
    text = L.layouts_text(D.chained_gemm_program(), arch="sm_90a")
    for name in ("acc_h", "acc_y", "W1_shared", "X_shared"):
        assert name in text
    assert "thread =" in text


def test_plots_are_produced():
    import matplotlib.pyplot as plt

    infos = _infer("chained", "sm_90a", "FullCol", 256)
    fig = L.plot_fragment(infos["acc_h"], color_by="warpgroup")
    assert fig.axes and fig.axes[0].images
    plt.close(fig)
    small = L.fragment_info(_infer("gemm_rs", "sm_80")["A_local"].layout)
    fig = L.plot_fragment(L.fragment_info(small.layout), annotate=False)
    assert fig.axes[0].images
    plt.close(fig)
    plain, swz = L.row_major_info((64, 64)), L.swizzled_info((64, 64))
    fig = L.plot_shared_layout([plain, swz])
    assert len([a for a in fig.axes if a.images]) == 2
    plt.close(fig)
    fig = L.plot_bank_conflicts([plain, swz], [L.row_reads((64, 64)), L.ldmatrix_reads((64, 64))])
    assert len([a for a in fig.axes if a.images]) == 4
    assert any(t.get_text() == "8" for a in fig.axes for t in a.texts)
    plt.close(fig)


def test_tilelang_plot_layout_writes_a_png(tmp_path):
    import tilelang.language as T
    from tilelang.cuda.intrinsics.layout.mma_layout import shared_16x16_to_mma_a_32x8_layout

    frag = T.Fragment([16, 16], forward_fn=shared_16x16_to_mma_a_32x8_layout)
    path = L.plot_with_tilelang(frag, "mma_a", str(tmp_path))
    assert path.endswith(".png") and (tmp_path / "mma_a.png").stat().st_size > 1000


def test_picker_draws_the_buffer_its_dropdown_names():
    from tilelang_tutorial.lessons.layouts.catalogue import CATALOGUE

    picker = L.LayoutPicker(CATALOGUE, kernel="two chained GEMMs (two warpgroups)", threads=256, policy="FullCol",
                            arch="sm_90a")
    assert picker.state["buffer"] in picker.infos and picker.infos[picker.state["buffer"]].kind == "fragment"
    assert picker.infos["acc_y"].split_axis() == "columns" and picker.infos["acc_h"].split_axis() == "columns"
    assert picker.select(buffer="acc_h") == "acc_h"
    fig, text = picker.figure()
    assert text.startswith("acc_h") or "acc_h" in text.splitlines()[0]
    # a kernel without that buffer: the picker moves to one it has and says which
    drawn = picker.select(kernel="gemm_relu (notebook 02)", threads=128, policy="Square")
    assert drawn in picker.infos and drawn != "acc_h" and picker.infos["C_local"].threads == 128


def test_picker_draws_the_notebooks_own_factories():
    from tilelang_tutorial.lessons.layouts import programs
    from tilelang_tutorial.lessons.layouts.catalogue import catalogue

    built = []

    def my_transpose(M, N, **kw):
        built.append((M, N))
        return programs.transpose_program(M, N, **kw)

    picker = L.LayoutPicker(catalogue(transpose_program=my_transpose), kernel="transpose (its policy is unused)",
                            threads=128, arch="sm_90a")
    assert built and picker.state["buffer"] == "B_tile"


def test_shared_reads_count_what_the_kernel_reads():
    from tilelang_tutorial.lessons.layouts import programs

    plain, padded = (L.shared_reads(programs.transpose_program(200, 136, pad=p), arch="sm_90a")[0] for p in (0, 2))
    assert plain.worst == 32 and padded.worst == 1
    assert plain.pattern.grid == (4, 32)   # 4 warps x 32 slots, one request each
    # the model agrees with the column-read pattern for this fragment layout
    assert (L.bank_conflicts(L.row_major_info((64, 64)), L.column_reads((64, 64), elem_bytes=2)) == 32).all()


def test_summary_counts_elements_and_registers():
    info = _infer("gemm", "sm_80")["C_local"]
    assert "128 elements/thread (128 32-bit registers)" in info.summary()


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="PrimFunc"):
        L.infer_layouts("not a program")
    with pytest.raises(ValueError, match="warp policy"):
        L.warp_policy("Diagonal")


def _count_picker_draws(monkeypatch):
    """Record every figure the picker draws and every line it prints above one."""
    from tilelang_tutorial.layouts import picker as picker_module

    drawn = []
    original = picker_module.LayoutPicker.figure

    def figure(self):
        fig, text = original(self)
        drawn.append((self.state["buffer"], text.splitlines()[0]))
        return fig, text

    monkeypatch.setattr(picker_module.LayoutPicker, "figure", figure)
    return drawn


def test_picker_draws_once_and_its_label_names_the_drawn_buffer(monkeypatch):
    pytest.importorskip("ipywidgets")
    from tilelang_tutorial.lessons.layouts.catalogue import CATALOGUE

    drawn = _count_picker_draws(monkeypatch)
    picker = L.layout_picker(CATALOGUE, kernel="gemm accumulator", threads=256, policy="FullCol", arch="sm_90a")
    assert drawn == [("C_local", drawn[0][1])] and drawn[0][1].startswith("C_local")
    picker.widgets["policy"].value = "FullRow"
    assert len(drawn) == 2 and picker.infos["C_local"].split_axis() == "rows"
    picker.widgets["kernel"].value = "two chained GEMMs (two warpgroups)"
    assert len(drawn) == 3 and drawn[-1][0] == picker.widgets["buffer"].value
    assert drawn[-1][1].startswith(drawn[-1][0] + ":")


def test_picker_without_ipywidgets_draws_the_initial_selection_once(monkeypatch):
    import sys

    from tilelang_tutorial.lessons.layouts.catalogue import CATALOGUE

    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    drawn = _count_picker_draws(monkeypatch)
    picker = L.layout_picker(CATALOGUE, kernel="two chained GEMMs (two warpgroups)", buffer="acc_h", arch="sm_90a")
    assert drawn == [("acc_h", drawn[0][1])] and drawn[0][1].startswith("acc_h:")
    assert not hasattr(picker, "widgets")
