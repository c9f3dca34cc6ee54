"""checks: poisoned outputs tell an element never written from a NaN the kernel computed."""
import pytest
import torch

from tilelang_tutorial import checks

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unwritten_and_computed_nan_are_counted_apart(dtype):
    ref = torch.randn(4, 5, dtype=torch.float64)
    out = checks.poisoned((4, 5), dtype, "cpu")
    assert torch.isnan(out).all() and checks.poison_mask(out).all()
    out[:2] = ref[:2].to(dtype)                       # written, right
    out[2, 0] = float("nan")                          # written NaN (torch's canonical one)
    out[2, 1] = torch.tensor(0.0) * float("inf")      # 0 * inf
    out[2, 2] = torch.tensor(float("inf")) - float("inf")
    cmp = checks.compare(out, ref, tolerance=1e-2)
    assert (cmp.unwritten, cmp.nan) == (7, 3) and not cmp.ok
    assert "unwritten elements = 7, NaN written = 3" in str(cmp)


def test_all_nan_from_an_uncleared_accumulator_is_not_called_unwritten():
    out = checks.poisoned((8, 8), torch.float32, "cpu")
    out[:] = torch.full((8, 8), float("nan"))        # every element written, all NaN
    cmp = checks.compare(out, torch.ones(8, 8), tolerance=1e-3)
    assert cmp.unwritten == 0 and cmp.nan == 64 and not cmp.ok


def test_a_right_answer_passes_and_mentions_no_nan():
    ref = torch.randn(16, dtype=torch.float64)
    out = checks.poisoned((16,), torch.float16, "cpu")
    out.copy_(ref.to(torch.float16))
    cmp = checks.compare(out, ref, tolerance=2e-3)
    assert cmp.ok and cmp.nan == 0 and "NaN written" not in str(cmp)
