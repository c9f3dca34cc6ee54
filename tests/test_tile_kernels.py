"""Notebook 01's kernels: bad input (any machine) and numerics (GPU)."""
import pytest
import torch

from tilelang_tutorial import checks, runtime
from tilelang_tutorial.exercises.tile import check_row_max
from tilelang_tutorial.kernels import row_sum, scale_copy
from tilelang_tutorial.solutions.tile_row_max import row_max_program

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


@pytest.mark.skipif(HAS_GPU, reason="compile-only behaviour")
def test_cpu_tensor_without_gpu_says_so():
    with pytest.raises(runtime.NoGPUError, match="needs a CUDA GPU"):
        scale_copy.scale_copy(torch.randn(4, 4), 2.0)


def test_exercise_checker_passes_the_solution_and_rejects_wrong_answers():
    assert check_row_max(row_max_program).ok
    res = check_row_max(lambda N, dtype: None)
    assert not res.ok and "not a T.prim_func" in str(res)
    res = check_row_max(lambda N, dtype: row_sum.row_sum_program(N, dtype=dtype))
    assert not res.ok and "T.reduce_max" in str(res)  # a sum is not a max: caught by compilation alone
    res = check_row_max(_unmasked_row_max)
    if HAS_GPU:  # the classic bug: zero-filled columns win the max of an all-negative row
        assert not res.ok and "-inf" in str(res)
    else:
        assert res.ok and not res.numerics_checked and "needs a GPU" in str(res)


def _unmasked_row_max(N, dtype, block_M=64, block_N=256):
    import tilelang.language as T

    M = T.dynamic("M")

    @T.prim_func
    def row_max(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_frag = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            best = T.alloc_fragment((block_M,), "float32")
            T.fill(best, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                T.copy(X[bx * block_M, k * block_N], x_frag)
                T.reduce_max(x_frag, part, dim=1)
                for i in T.Parallel(block_M):
                    best[i] = T.max(best[i], part[i])
            T.copy(best, Out[bx * block_M])

    return row_max


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
