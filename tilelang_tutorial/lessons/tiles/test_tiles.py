"""Notebook 01's kernels: bad input (any machine) and numerics (GPU)."""
import pytest
import torch

from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.tiles import row_sum, scale_copy

from conftest import HAS_GPU


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="x must be float16 or bfloat16 or float32, got int32"):
        scale_copy.scale_copy(torch.zeros(4, 4, dtype=torch.int32), 2.0)
    with pytest.raises(ValueError, match="x must have 2 dimensions"):
        row_sum.row_sum(torch.randn(4, 4, 4))
    with pytest.raises(ValueError, match="out has shape"):
        scale_copy.scale_copy(torch.randn(4, 4), 2.0, out=torch.randn(4, 5))
    with pytest.raises(ValueError, match="dtype must be one of"):
        scale_copy.build_scale_copy(64, dtype="int8")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("M,N", [(4096, 4096), (1000, 4096), (77, 384)])
def test_scale_copy_matches_torch(dtype, M, N):
    x = checks.random_tensor((M, N), dtype, "cuda")
    y = checks.poisoned((M, N), dtype, "cuda")
    scale_copy.scale_copy(x, -1.5, out=y)
    checks.assert_close(y, scale_copy.scale_copy_reference(x, -1.5), tolerance=checks.TOLERANCE[str(dtype)[6:]])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N", [(4096, 4096), (1000, 1000), (1, 256)])
def test_row_sum_matches_torch(dtype, M, N):
    x = checks.random_tensor((M, N), dtype, "cuda")
    s = checks.poisoned((M,), torch.float32, "cuda")
    row_sum.row_sum(x, out=s)
    checks.assert_close(s, row_sum.row_sum_reference(x), tolerance=1e-5)


@pytest.mark.gpu
def test_gpu_rejects_cpu_tensors():
    with pytest.raises(ValueError, match="must be on a cuda device"):
        scale_copy.scale_copy(torch.randn(8, 64), 2.0)


# ------------------------------------------------------------------------------------------------
# Eager mode: the same kernel as the factory, through tilelang_tutorial.eager
# ------------------------------------------------------------------------------------------------

needs_nvcc = pytest.mark.skipif(runtime.nvcc_path() is None, reason="needs nvcc")


def test_eager_program_takes_its_sizes_from_the_tensors_or_by_name():
    from tilelang_tutorial import eager

    x = torch.zeros(77, 384, dtype=torch.float16)
    from_tensors = eager.program(scale_copy.scale_copy_eager, x, x, 0.5)
    by_name = eager.program(scale_copy.scale_copy_eager, M=64, N=256)
    shape = lambda p: [int(s) for s in p.buffer_map[p.params[0]].shape]   # noqa: E731
    assert shape(from_tensors) == [77, 384] and shape(by_name) == [64, 256]


def test_eager_adapter_names_a_factory_passed_by_mistake():
    from tilelang_tutorial import eager

    with pytest.raises(TypeError, match="expected a @tilelang.jit function"):
        eager.program(scale_copy.scale_copy_program, M=64, N=256)


@needs_nvcc
def test_eager_kernel_compiles_for_sm_90a_with_16_byte_accesses():
    from tilelang_tutorial import eager
    from tilelang_tutorial.inspector import KernelInspector

    kernel = eager.compile(scale_copy.scale_copy_eager, M=1000, N=4096, arch="sm_90a")
    assert kernel.target.attrs["arch"] == "sm_90a"
    src = kernel.get_kernel_source()
    assert "*(uint4*)(X +" in src and "*(uint4*)(Y +" in src
    assert "registers/thread" in KernelInspector(kernel).summary()     # the inspector takes it too


@pytest.mark.skipif(HAS_GPU, reason="the emulated mode")
def test_without_a_gpu_the_op_and_the_eager_kernel_run_in_the_emulator():
    from tilelang_tutorial import eager

    x = checks.random_tensor((77, 384), torch.float16, "cpu")
    y_factory = checks.poisoned((77, 384), torch.float16, "cpu")
    y_eager = checks.poisoned((77, 384), torch.float16, "cpu")
    scale_copy.scale_copy(x, -1.5, out=y_factory)
    assert runtime.mode().name == "emulated"
    checks.assert_close(y_factory, scale_copy.scale_copy_reference(x, -1.5), tolerance=checks.TOLERANCE["float16"])
    eager.run(scale_copy.scale_copy_eager, x, y_eager, -1.5)
    assert torch.equal(y_eager, y_factory)


@pytest.mark.gpu
def test_eager_call_on_the_gpu_equals_the_factory():
    x = checks.random_tensor((1000, 4096), torch.float16, "cuda")
    y_factory = checks.poisoned((1000, 4096), torch.float16, "cuda")
    y_eager = checks.poisoned((1000, 4096), torch.float16, "cuda")
    scale_copy.scale_copy(x, 0.5, out=y_factory)
    scale_copy.scale_copy_eager(x, y_eager, 0.5)          # the plain eager call: compiles and runs
    torch.cuda.synchronize()
    assert torch.equal(y_eager, y_factory)


def test_checkers_accept_an_eager_solution():
    from tilelang_tutorial.lessons.tiles import exercises
    from tilelang_tutorial.lessons.tiles.solutions import row_max

    res = exercises.check_row_max(row_max.row_max_eager, verbose=False)
    assert res.ok and res.numerics_checked, str(res)


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_the_kernel_cells_checks_pass_the_kernels_and_reject_alpha_typed_in():
    """The notebook's check of its copy-and-scale cell (the mutation tests' too): both styles pass
    on both ragged shapes with a random alpha; the kernel with 0.5 typed in for alpha fails."""
    from tilelang_tutorial.lessons.tiles import exercises, wrong_answers

    for kernel in (scale_copy.scale_copy_program, scale_copy.scale_copy_eager):
        res = exercises.check_scale_copy(kernel, verbose=False)
        assert res.ok and res.numerics_checked and "drawn at random" in str(res), str(res)
        assert all(f"{m} x {n}" in str(res) for m, n in checks.RAGGED_SHAPES), str(res)
    res = exercises.check_scale_copy(wrong_answers.scale_copy_alpha_typed_in, verbose=False)
    assert not res.ok and "its\nalpha argument" not in str(res) and "alpha argument" in str(res), str(res)
    res = exercises.check_row_sum(row_sum.row_sum_program, verbose=False)
    assert res.ok and res.numerics_checked, str(res)


# ------------------------------------------------------------------------------------------------
# Exercise hints (the symptom each wrong answer gets: tests/test_exercises.py)
# ------------------------------------------------------------------------------------------------

@needs_nvcc
def test_a_fragment_read_down_shared_columns_is_stored_one_element_at_a_time():
    """What the transpose checker's explanation says, read off the generated CUDA."""
    from tilelang_tutorial.lessons.tiles import exercises, wrong_answers

    src = runtime.compile_kernel(wrong_answers.transpose_scattered(256, 384), arch="sm_90a").get_kernel_source()
    assert exercises._vector_accesses(src, "A") == (True, False)      # A: 16-byte loads
    assert exercises._vector_accesses(src, "B") == (False, False)     # B: no 16-byte stores
    assert "tma_store" not in src and "half_t b_tile[32];" in src     # a register array, stored element-wise


# ------------------------------------------------------------------------------------------------
# The notebook's figures follow the reader's program
# ------------------------------------------------------------------------------------------------

@pytest.mark.skipif(HAS_GPU, reason="the emulated mode (recorded figures)")
def test_a_recorded_figure_is_shown_only_for_an_identical_program():
    from tilelang_tutorial.lessons.tiles import bench

    if bench.matching_record(scale_copy.scale_copy_program(8192), "scale_copy", 8192, 8192) is None:
        pytest.skip("no current scale_copy record (re-measure: python -m tilelang_tutorial bench tile)")
    assert "recorded for a program identical to yours" in bench.figure(scale_copy.scale_copy_program(8192), "scale_copy")
    edited = scale_copy.scale_copy_program(8192, block_M=32)          # what a reader's edit looks like
    assert bench.matching_record(edited, "scale_copy", 8192, 8192) is None
    assert bench.figure(edited, "scale_copy").startswith("○")


@pytest.mark.gpu
def test_the_figure_measures_the_given_program_on_the_gpu():
    from tilelang_tutorial.lessons.tiles import bench

    # measured now, or -- on a GPU busy with other test workers, where a call's two timing methods
    # disagree -- checked and then said not to be timed, with the reason: never a doubtful figure,
    # never an exception in the reader's cell
    for program, kernel in ((scale_copy.scale_copy_program(4096), "scale_copy"), (row_sum.row_sum_program(4096), "row_sum")):
        text = bench.figure(program, kernel, M=4096, N=4096)
        assert "measured now" in text or ("checked, but not timed" in text and "disagree" in text), text
    panel = bench.latency(scale_copy.scale_copy_program(4096), "scale_copy", M=4096, N=4096)
    assert panel.source == "measured" or "disagree" in panel.text(), panel.text()
