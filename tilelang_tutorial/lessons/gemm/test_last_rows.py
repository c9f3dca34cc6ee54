"""The op's kernels for the last row of tiles (last_rows.py): correct on every M around the tile
edges, chosen by the rule where measured, run by the op, and fingerprinted as what ran."""
import dataclasses
import math
import re

import pytest
import torch

from tilelang_tutorial import checks, results, runtime
from tilelang_tutorial.lessons import gemm
from tilelang_tutorial.lessons.gemm import kernel as gr
from tilelang_tutorial.lessons.gemm import op
from tilelang_tutorial.lessons.gemm import last_rows, rule
from tilelang_tutorial.lessons.gemm.rule import SMALL_M_TILES

DEVICE = runtime.mode().device          # "cuda" on a GPU; "cpu" runs the kernels in the emulator
TOL = checks.TOLERANCE["float16"]


def _run(program, config, M, N, K, dtype="float16"):
    kernel = gr.build_gemm_relu(N, K, config=config, dtype=dtype, program=program)
    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, DEVICE)
    b = checks.random_tensor((K, N), tdt, DEVICE)
    c = checks.poisoned((M, N), tdt, DEVICE)          # an element no block writes stays NaN
    runtime.run(kernel, a, b, c)
    return checks.compare(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype])


# M below one box, one box exactly, just past it, ragged inside two boxes, two tiles exactly,
# and past one 128-row tile (where a clamped origin overlaps the tile above); N = 200 leaves a
# partial column tile, K = 192 is 3 steps of 64.
@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("M", [40, 64, 65, 93, 128, 130, 200])
def test_clamped_kernel_writes_every_row_once_right(M):
    assert _run(last_rows.clamped_program, SMALL_M_TILES["m64n64k64s8"], M, 200, 192).ok


def test_a_variant_is_notebook_02s_kernel_with_the_lines_it_changes():
    diff = last_rows.changes(last_rows.clamped_program).splitlines()
    assert "-                T.copy(A[by * block_M, ko * block_K], A_shared)" in diff
    assert "+                T.copy(A[row0, ko * block_K], A_shared)" in diff
    assert all(line[:1] in "+-" for line in diff) and len(diff) < 20, "only the changed lines"
    with pytest.raises(ValueError, match="occurs 0 times"):
        last_rows.variant_of(gemm.kernel.gemm_relu_program, "broken", ("no such line", ""))


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_the_clamped_kernel_stores_through_shared_memory_at_its_clamped_rows():
    assert _run(last_rows.clamped_program, SMALL_M_TILES["m64n64k64s8"].replace(store_via_shared=True), 93, 200, 192).ok


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("M", [40, 65, 72, 88, 127, 128, 130, 300])
def test_two_box_kernel_writes_every_row_right(M):
    assert _run(last_rows.two_box_program, SMALL_M_TILES["m128n64k64s6"], M, 200, 192).ok


def _the_op_on_the_gpu(M, N, K, dtype, kinds):
    """the op through the rule, which must take one of ``kinds`` here: fresh inputs, C poisoned"""
    choice = rule.choose(M, N, K, dtype, "sm_90a")
    assert choice.last_rows in kinds, choice
    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, "cuda")
    b = checks.random_tensor((K, N), tdt, "cuda")
    out = checks.poisoned((M, N), tdt, "cuda")
    op.gemm_relu(a, b, out=out)
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype],
                        what=f"{M}x{N}x{K} {choice.label}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(65, 4096, 4096), (93, 2048, 8192), (72, 8192, 2048), (119, 8192, 1024),
                                   (3, 6112, 7728), (13, 976, 5544), (37, 4760, 1920), (5, 8192, 8192)])
def test_the_op_on_the_gpu_at_the_rules_last_row_kernels(M, N, K, dtype):
    _the_op_on_the_gpu(M, N, K, dtype, ("clamped", "two boxes", "short"))


def test_the_clamped_origin_reaches_the_tma_coordinates():
    """The generated code: A's TMA load starts at min(by * 64, max(m - 64, 0)), not by * 64."""
    src = gr.build_gemm_relu(4096, 4096, config=SMALL_M_TILES["m64n64k128s4"], dtype="float16",
                             arch="sm_90a", program=last_rows.clamped_program).get_kernel_source()
    a_loads = [line for line in src.splitlines() if "tma_load(A_desc" in line]
    assert a_loads and all("min(" in line and "(m - 64)" in line for line in a_loads), a_loads
    plain = gr.build_gemm_relu(4096, 4096, config=SMALL_M_TILES["m64n64k128s4"], dtype="float16",
                               arch="sm_90a").get_kernel_source()
    assert not any("min(" in line for line in plain.splitlines() if "tma_load(A_desc" in line)


def test_two_boxes_are_two_tma_loads_of_64_rows_and_one_multiply():
    src = gr.build_gemm_relu(8192, 8192, config=SMALL_M_TILES["m128n64k64s6"], dtype="bfloat16",
                             arch="sm_90a", program=last_rows.two_box_program).get_kernel_source()
    a_loads = [line for line in src.splitlines() if "tma_load(A_desc" in line]
    assert len(a_loads) == 2 and all("max((m - 64), 0)" in line for line in a_loads), a_loads
    assert "A_shared)[(((ko % 6) * 8192) + 4096)]" in a_loads[1]        # the lower half of one tile
    assert src.count("warpgroup_wait<0>") == 1                          # one multiply per step


def test_the_two_box_kernel_refuses_other_tiles_in_one_line():
    with pytest.raises(ValueError, match="block_M = 128"):
        last_rows.two_box_program(None, 256, 256, block_M=64, dynamic_m=True)
    with pytest.raises(ValueError, match="store_via_shared"):
        last_rows.two_box_program(None, 256, 256, store_via_shared=True, dynamic_m=True)
    with pytest.raises(ValueError, match="last_rows must be one of"):
        last_rows.program_for("clamp")


@pytest.mark.parametrize("M,N,K,expected", [
    (64, 4096, 4096, "filled"),          # one row of 64-row tiles: nothing past M to avoid
    (65, 4096, 4096, "clamped"), (93, 2048, 8192, "clamped"), (128, 4096, 4096, "clamped"),
    (65, 8192, 8192, "two boxes"), (88, 8192, 2048, "two boxes"), (119, 8192, 8192, "two boxes"),
    (121, 5744, 6056, "two boxes"), (93, 4352, 4096, "two boxes"),   # two rows of 64 x 64: > 132 blocks
    (100, 4224, 4096, "clamped"), (100, 3200, 4096, "clamped"),      # 132 and 100 blocks: one wave
    (80, 2560, 8192, "filled"), (100, 3072, 4096, "filled"),         # 128 x 64 tiles, K split in one wave
    (93, 2560, 2048, "clamped"),                                     # ... but not a K this short
    (300, 4096, 4096, "swapped"), (1, 4096, 4096, "filled"),         # past 128 rows; the GEMV
    (1228, 3504, 5280, "filled"),                                    # past 128 rows, too many for a swap
    (2, 4096, 4096, "short"), (56, 8192, 8192, "short"), (13, 976, 5544, "short"),   # the last one splits K
    (57, 4096, 4096, "filled"), (64, 2048, 8192, "filled"),        # a box of 64 rows: nothing to cut
])
def test_the_rule_says_which_last_row_kernel(M, N, K, expected):
    choice = rule.choose(M, N, K, "float16", "sm_90a")
    assert choice.last_rows == expected, choice
    assert ("last_rows" in choice.as_dict()) == (expected != "filled")
    assert (f"({expected}" in choice.label) == (expected != "filled")
    assert choice.a_rows == (last_rows.short_rows(M) if expected == "short" else 0)
    assert choice.a_rows == 0 or M <= choice.a_rows < 64


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_the_op_builds_the_rules_last_row_kernel_and_a_readers_own(monkeypatch):
    """gemm_relu runs last_rows.clamped_program where the rule says so, and a reader's factory
    instead where one is given (that is what flows from a notebook's kernel cell)."""
    built = []

    def spy(factory):
        def program(*args, **kwargs):
            built.append(factory.__name__)
            return factory(*args, **kwargs)
        return program

    monkeypatch.setitem(last_rows.PROGRAMS, "clamped", spy(last_rows.clamped_program))
    op.clear_plans()
    M, N, K = 70, 3144, 72                 # the rule: two rows of 64 x 64 tiles, the second clamped (test_gemm's shape)
    assert rule.choose(M, N, K, "float16").last_rows == "clamped"
    a = checks.random_tensor((M, K), torch.float16, DEVICE)
    b = checks.random_tensor((K, N), torch.float16, DEVICE)
    out = checks.poisoned((M, N), torch.float16, DEVICE)
    op.gemm_relu(a, b, out=out)
    assert built == ["clamped_program"]
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=TOL, what="the op, clamped")
    readers = spy(gr.gemm_relu_program)
    op.gemm_relu(a, b, out=out, program=readers)
    assert built == ["clamped_program", "gemm_relu_program"]
    op.clear_plans()


def test_a_record_of_the_clamped_path_fingerprints_the_clamped_program():
    cfg = SMALL_M_TILES["m64n64k128s4"]
    base = {"suite": "gemm_rule", "kernel": "gemm_relu", "shape": {"M": 93, "N": 4096, "K": 4096}, "dtype": "float16"}
    config = dict(candidate="m64n64k128s4", split=1, **cfg.as_dict(), variant="rule")
    filled = results.fingerprint(gemm.measured(dict(base, config=config)))
    clamped = results.fingerprint(gemm.measured(dict(base, config=dict(config, last_rows="clamped"))))
    assert filled != clamped
    assert gemm.program_of({"last_rows": "two boxes"}) is last_rows.two_box_program
    assert gemm.program_of({}) is gr.gemm_relu_program


# 65-128 rows, N 2113-3136: two rows of 64 x 32 tiles would be a second wave; 128 x 64 tiles with K
# split as far as one wave holds instead (rule._most_blocks_in_one_wave on that one tile)
@pytest.mark.parametrize("M,N,K", [(65, 2560, 8192), (93, 2176, 4096), (128, 3072, 4096), (100, 3136, 6000)])
def test_a_narrow_b_at_65_to_128_rows_splits_k_within_one_wave(M, N, K):
    """Where two rows of 64 x 32 tiles would make a second wave (N > 2112) and K >= 4096, the rule
    takes 128 x 64 tiles with K split as far as one wave holds; at N = 2048 (128 blocks of 64 x 32,
    one wave) it keeps the 64 x 32 tiles, clamped."""
    choice = rule.choose(M, N, K, "float16", "sm_90a")
    assert (choice.name, choice.last_rows) == ("m128n64k64s6", "filled") and choice.split > 1, choice
    assert math.ceil(N / 64) * choice.split <= rule.SM_COUNT < math.ceil(N / 64) * (choice.split + 1)
    kept = rule.choose(M, 2048, K, "float16", "sm_90a")
    assert kept.label == "64x32x256-s4-t128-Square-nosw (clamped)", kept


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(65, 2560, 8192), (93, 2176, 4096), (128, 3072, 4096), (100, 3136, 6000)])
def test_the_op_on_the_gpu_at_the_narrow_split(M, N, K, dtype):
    _the_op_on_the_gpu(M, N, K, dtype, ("filled",))
    assert rule.choose(M, N, K, dtype, "sm_90a").split > 1


# ------------------------------------------------------------------------------------------------
# M <= 64: A's boxes only as tall as the rows that exist (rounded up to 8)
# ------------------------------------------------------------------------------------------------

@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("tile", ["m64n64k64s8", "m64n64k128s4", "m64n32k256s4"])   # block_K 64, 128, 256
@pytest.mark.parametrize("M", [1, 3, 8, 13, 40])
def test_short_box_kernel_writes_every_row_right(tile, M):
    program = last_rows.program_for("short", last_rows.short_rows(M))
    kernel = gr.build_gemm_relu(200, 520, config=SMALL_M_TILES[tile], dtype="float16", program=program)
    a = checks.random_tensor((M, 520), torch.float16, DEVICE)
    b = checks.random_tensor((520, 200), torch.float16, DEVICE)
    c = checks.poisoned((M, 200), torch.float16, DEVICE)
    runtime.launcher(kernel, last_rows.EMULATOR_CHECKS["short"])(a, b, c)
    assert checks.compare(c, gr.gemm_relu_reference(a, b), tolerance=TOL).ok


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("M", [2, 30])
def test_short_box_split_k_partial_is_right(M):
    from tilelang_tutorial.lessons.gemm import split_k

    config = SMALL_M_TILES["m64n64k128s4"]
    partial, reduce = op.build_for(264, 1000, config, 3, "float16", "short", last_rows.short_rows(M))
    a = checks.random_tensor((M, 1000), torch.float16, DEVICE)
    b = checks.random_tensor((1000, 264), torch.float16, DEVICE)
    w = checks.poisoned((3, M, 264), torch.float32, DEVICE)
    c = checks.poisoned((M, 264), torch.float16, DEVICE)
    runtime.launcher(partial, last_rows.EMULATOR_CHECKS["short"])(a, b, w)
    runtime.run(reduce, w, c)
    assert checks.compare(c, gr.gemm_relu_reference(a, b), tolerance=TOL).ok
    assert "gemm_partial_short_box" in str(split_k.programs(264, 1000, 3, config, "float16",
                                                            last_rows.partial_for("short", 32))[0].attrs["global_symbol"])


def test_a_short_box_is_one_tma_load_of_a_rows_per_64_columns():
    src = gr.build_gemm_relu(4096, 4096, config=SMALL_M_TILES["m64n64k128s4"], dtype="bfloat16", arch="sm_90a",
                             program=last_rows.program_for("short", 16)).get_kernel_source()
    a_loads = [line for line in src.splitlines() if "tma_load(A_desc" in line]
    assert len(a_loads) == 2 and all(line.rstrip().endswith(", 0);") for line in a_loads), a_loads   # row 0
    assert src.count("expect_transaction(2048)") == 2          # 16 rows x 64 columns x 2 bytes each


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.skipif(DEVICE != "cpu", reason="the emulator's check")
def test_the_emulator_sees_the_unloaded_rows_and_the_op_does_not_warn_of_them():
    """The rows past a_rows are read by T.gemm without being written: the emulator's default
    checks say so (that is what they are for); the op runs the short box without that one check,
    since those rows only make rows of C that are never stored."""
    import warnings

    from tilelang_tutorial import emulate
    from tilelang_tutorial.emulate.checks import EmulatorWarning

    program = last_rows.program_for("short", 8)
    kernel = gr.build_gemm_relu(64, 64, config=SMALL_M_TILES["m64n64k64s8"], dtype="float16", program=program)
    a, b = checks.random_tensor((3, 64), torch.float16, "cpu"), checks.random_tensor((64, 64), torch.float16, "cpu")
    findings = emulate.check(kernel, a, b, checks.poisoned((3, 64), torch.float16, "cpu"), checks="uninit")
    assert any("A_shared" in f.message and "[8, 0]" in f.message for f in findings), findings
    op.clear_plans()
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmulatorWarning)
        out = op.gemm_relu(checks.random_tensor((3, 64), torch.float16, "cpu"),
                           checks.random_tensor((64, 4096), torch.float16, "cpu"))
    assert out.shape == (3, 4096) and rule.choose(3, 4096, 64, "float16").last_rows == "short"
    op.clear_plans()


def test_the_short_box_refuses_what_it_cannot_do_in_one_line():
    for bad in (dict(a_rows=12), dict(a_rows=72), dict(block_M=128), dict(block_K=96)):
        with pytest.raises(ValueError, match="a short box needs"):
            last_rows.short_box_program(None, 256, 256, dynamic_m=True, **{"a_rows": 8, **bad})


# ------------------------------------------------------------------------------------------------
# The swapped kernel (C^T = B^T A^T: M on wgmma's width), which the rule takes past 128 rows where
# its time model says so
# ------------------------------------------------------------------------------------------------

# M under one tile, one tile exactly, a ragged second tile, several tiles; N = 200 and 264 leave a
# partial column tile, K = 136 a partial step of 64; widths 32 (the narrowest the rule takes), 48
# and 144 (not powers of two), 256 (the widest); one and two consumer warpgroups (block_N 64, 128);
# fp16 or bf16 by width (the cases of one width share their kernel)
SWAPPED_CASES = [(5, 200, 136, 64, 32, "float16"), (48, 200, 136, 64, 48, "bfloat16"), (130, 200, 136, 64, 48, "bfloat16"),
                 (37, 264, 136, 128, 144, "float16"), (300, 264, 136, 128, 144, "float16"),
                 (260, 200, 136, 64, 256, "bfloat16")]


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("M,N,K,block_N,width,dtype", SWAPPED_CASES, ids=lambda v: str(v))
def test_swapped_kernel_writes_every_element_right(M, N, K, block_N, width, dtype):
    assert _run(last_rows.swapped_program, rule.swapped_config(block_N, width), M, N, K, dtype).ok


def test_the_swap_is_in_the_instruction():
    """M is wgmma's n (144 here), B's tile the A operand read MN-major, A's tile the B operand
    K-major; two consumer warpgroups of 64 rows of N each; C leaves by one TMA store."""
    src = gr.build_gemm_relu(7176, 6528, config=rule.swapped_config(128, 144), dtype="float16", arch="sm_90a",
                             program=last_rows.program_for("swapped")).get_kernel_source()
    assert set(re.findall(r"wgmma_ss<[^>]*>", src)) == {
        "wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 144, 16, true, false, 1, 1>"}
    assert "tma_store(C_desc" in src


def test_the_swapped_kernel_refuses_what_it_cannot_do_in_one_line():
    with pytest.raises(ValueError, match="store_via_shared must be True"):
        last_rows.swapped_program(None, 256, 256, store_via_shared=False, dynamic_m=True)
    with pytest.raises(ValueError, match="swizzle_panel 0"):
        last_rows.swapped_program(None, 256, 256, swizzle_panel=4, dynamic_m=True)


def test_swapped_tiles_are_one_wave_and_within_wgmma_widths():
    # (1536, 8192) and (4096, 4096): even 256-wide tiles make more than one wave
    for M, N, some in [(129, 1024, True), (275, 7176, True), (781, 1464, True), (1536, 8192, False),
                       (2048, 2048, True), (4096, 4096, False)]:
        tiles = rule.swapped_tiles(M, N)
        for block_N, width in tiles:
            blocks = -(-M // width) * -(-N // block_N)
            assert width % 16 == 0 and 32 <= width <= 256 and 24 <= blocks <= 132, (M, N, block_N, width)
            cfg = rule.swapped_config(block_N, width)
            assert cfg.threads == 2 * block_N and rule.smem_bytes(cfg) <= 216 * 1024 and cfg.num_stages >= 2
        assert bool(tiles) == some, (M, N, tiles)
    assert (128, 144) in rule.swapped_tiles(275, 7176)             # two tiles of 144: 5 % padding


@pytest.mark.parametrize("M,N,K,dtype,expected", [
    (279, 6144, 5104, "bfloat16", (128, 144)),   # the swapped tile predicted faster than the rule's pick
    (136, 7696, 8008, "float16", (128, 144)),
    (879, 6304, 2680, "float16", None),          # the rule's 128 x 256 tiles kept
    (1465, 8176, 5104, "float16", None),         # too many rows x columns for one wave of swapped tiles
    (128, 4096, 4096, "float16", None),          # up to 128 rows the small-M path
])
def test_the_rule_swaps_where_its_model_says(M, N, K, dtype, expected):
    choice = rule.choose(M, N, K, dtype, "sm_90a")
    got = (choice.config.block_N, choice.config.block_M) if choice.last_rows == "swapped" else None
    assert got == expected, choice
    if expected:
        assert choice.label.endswith("(swapped)") and choice.as_dict()["last_rows"] == "swapped"
        assert "swapped kernel" in choice.why and choice.predicted_us > 0


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_the_op_runs_the_swapped_kernel_where_the_rule_says(monkeypatch):
    built = []

    def spy(*args, **kwargs):
        built.append("swapped_program")
        return last_rows.swapped_program(*args, **kwargs)

    monkeypatch.setitem(last_rows.PROGRAMS, "swapped", spy)
    op.clear_plans()
    M, N, K = 300, 264, 200                # test_gemm's shape of the swapped path
    assert rule.choose(M, N, K, "float16").last_rows == "swapped"
    a = checks.random_tensor((M, K), torch.float16, DEVICE)
    b = checks.random_tensor((K, N), torch.float16, DEVICE)
    out = checks.poisoned((M, N), torch.float16, DEVICE)
    op.gemm_relu(a, b, out=out)
    assert built == ["swapped_program"]
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=TOL, what="the op, swapped")
    op.clear_plans()


def test_a_record_of_the_swapped_path_fingerprints_the_swapped_program():
    cfg = rule.swapped_config(128, 144)
    base = {"suite": "gemm_rule", "kernel": "gemm_relu", "shape": {"M": 279, "N": 6144, "K": 5104}, "dtype": "bfloat16"}
    config = dict(candidate="swap128x144", split=1, **cfg.as_dict(), variant="rule")
    assert gemm.program_of({"last_rows": "swapped"}) is last_rows.swapped_program
    filled = results.fingerprint(gemm.measured(dict(base, config=config)))
    swapped = results.fingerprint(gemm.measured(dict(base, config=dict(config, last_rows="swapped"))))
    assert filled != swapped


def test_a_swapped_record_is_timed_beside_the_rules_pick_without_the_swap(monkeypatch):
    """gemm_rule's contrast for the swapped kernel is what the op ran before it (never notebook 02's
    kernel on the swapped tile, which is not a tile that kernel can run), and it is compiled with
    the op's kernels; other kernels of the last row keep notebook 02's on the same tile."""
    from tilelang_tutorial.lessons.gemm import bench

    swapped = rule.choose(279, 6144, 5104, "bfloat16", "sm_90a")
    clamped = rule.choose(93, 2048, 8192, "float16", "sm_90a")
    assert swapped.last_rows == "swapped" and clamped.last_rows == "clamped"
    key, peer = bench.contrast_choice(swapped, 279, 6144, 5104, "bfloat16")
    assert key == "unswapped" and peer.last_rows == "filled"
    assert peer == rule.measured_choice(279, 6144, 5104, "bfloat16", swap=False)
    assert bench.contrast_choice(clamped, 93, 2048, 8192, "float16") == (
        "filled_rows", dataclasses.replace(clamped, last_rows="filled"))
    jobs = []
    monkeypatch.setattr(runtime, "precompile", lambda js, name: {})
    monkeypatch.setattr(runtime, "compile_parallel", lambda js, build, verbose: jobs.extend(js) or {})
    bench.prebuild_rule({(279, 6144, 5104, "bfloat16"): swapped, (93, 2048, 8192, "float16"): clamped})
    assert sorted(jobs, key=str) == sorted([
        (6144, 5104, swapped.config, 1, "bfloat16", "swapped", 0),
        (6144, 5104, peer.config, peer.split, "bfloat16", "filled", 0),
        (2048, 8192, clamped.config, clamped.split, "float16", "clamped", 0),
        (2048, 8192, clamped.config, clamped.split, "float16", "filled", 0)], key=str)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(279, 6144, 5104), (129, 2648, 1920), (1441, 2568, 5040), (331, 1072, 2456),
                                   (143, 7808, 1744)])
def test_the_op_on_the_gpu_at_the_swapped_kernel(M, N, K, dtype):
    """widths 48 to 256 (one and two warpgroups of N), M ragged against every one of them"""
    _the_op_on_the_gpu(M, N, K, dtype, ("swapped",))


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("split", [1, 3])
def test_a_contrast_is_called_directly_and_right(split):
    """bench.direct_call, the contrast's call in gemm_rule and the probes: the choice's kernel, or its
    split-K pair with a workspace of its own, into a poisoned C"""
    from tilelang_tutorial.lessons.gemm import bench

    M, N, K = 70, 200, 680
    choice = rule.GemmChoice("narrow", rule.NARROW, split, None, "a test's choice")
    a = checks.random_tensor((M, K), torch.float16, DEVICE)
    b = checks.random_tensor((K, N), torch.float16, DEVICE)
    out = checks.poisoned((M, N), torch.float16, DEVICE)
    bench.direct_call(choice, N, K, "float16", a, b, out)()
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=TOL, what=f"direct call, split {split}")
