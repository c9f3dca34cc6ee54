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


@pytest.mark.skipif(HAS_GPU, reason="the emulated mode")
def test_without_a_gpu_the_ops_run_in_the_emulator():
    x = checks.random_tensor((77, 384), torch.float16, "cpu")
    y = checks.poisoned((77, 384), torch.float16, "cpu")
    scale_copy.scale_copy(x, -1.5, out=y)
    checks.assert_close(y, scale_copy.scale_copy_reference(x, -1.5), tolerance=checks.TOLERANCE["float16"])
    assert runtime.mode().name == "emulated"


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
