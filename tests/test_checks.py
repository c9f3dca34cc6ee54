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


def test_a_random_scalar_stays_below_its_upper_end_after_rounding():
    """Rounded to 4 significant digits, a draw just below ``high`` would print as ``high`` itself."""
    drawn = [checks.random_scalar(3.99, 4.0, seed=s) for s in range(400)]   # 1 in 20 draws rounds to 4.0
    assert all(3.99 <= v < 4.0 for v in drawn), sorted(drawn)[-3:]


def test_compare_lse_holds_a_log_sum_exp_to_fp32_and_rejects_an_fp16_denominator():
    ref = torch.tensor([[3.2, -1000.5, 9000.25, -float("inf")]], dtype=torch.float64)
    out = checks.poisoned((1, 4), torch.float32, "cpu")
    out.copy_(ref.float())                                    # fp32's own rounding of the reference
    cmp = checks.compare_lse(out, ref)
    assert cmp.ok and cmp.worst < 0.5, str(cmp)
    off = out.clone()
    off[0, 0] += 2.0 ** -11 / 0.6931                          # a sum off by 2^-11 relative: 7e-4 in log2 units
    assert not checks.compare_lse(off, ref).ok
    empty = out.clone()
    empty[0, 3] = 0.0                                         # an empty split that wrote a finite lse
    assert checks.compare_lse(empty, ref).infinite == 1 and not checks.compare_lse(empty, ref).ok
    unwritten = checks.poisoned((1, 4), torch.float32, "cpu")
    unwritten[0, :3] = ref[0, :3].float()
    cmp = checks.compare_lse(unwritten, ref)
    assert (cmp.unwritten, cmp.infinite, cmp.ok) == (1, 0, False), str(cmp)


# -- inputs that expose the classic bugs -------------------------------------------------------

def test_ragged_shapes_leave_a_partial_tile_for_every_block_and_keep_16_byte_rows():
    assert len(checks.RAGGED_SHAPES) == 2
    (m1, n1), (m2, n2) = checks.RAGGED_SHAPES
    assert m1 > n1 and m2 < n2                                 # one tall, one wide: no square
    for m, n in checks.RAGGED_SHAPES:
        assert checks.is_ragged(m) and checks.is_ragged(n) and m % 8 == 0 and n % 8 == 0
        for block in checks.BLOCK_SIZES:                       # n // block blocks miss a tile
            assert m // block * block < m and n // block * block < n
    assert not checks.is_ragged(1024) and checks.is_ragged(1000)


def test_a_random_scalar_is_never_a_typical_value_and_varies():
    drawn = {checks.random_scalar(seed=s) for s in range(200)}
    assert len(drawn) > 150
    for value in drawn:
        assert 0.25 <= value < 4.0
        assert all(abs(value - t) > 0.1 * max(abs(t), 0.1) for t in checks.TYPICAL_SCALARS), value
    assert checks.random_scalar(seed=3) == checks.random_scalar(seed=3)


def test_negative_rows_have_maxima_far_below_minus_one_and_below_minus_1e4():
    x = checks.negative_rows((30, 1000), torch.float16, "cpu", seed=0)
    row_max = x.float().amax(dim=1)
    assert (x < 0).all() and torch.isfinite(x).all()
    assert row_max.max() <= -1.9 and row_max.min() < -2e4
    assert (row_max < -1e4).sum() >= 3 and ((row_max > -10)).sum() >= 3    # spread: both ends populated
    # a running max started at -1, -2 or -1e4 is wrong in some rows
    for start in (0.0, -1.0, -2.0, -1e4):
        assert (torch.maximum(row_max, torch.tensor(start)) != row_max).any(), start


def test_large_rows_overflow_fp16_squares_and_fp32_does_not():
    x = checks.large_rows((16, 256), torch.float16, "cpu", seed=0)
    assert torch.isfinite(x).all()
    assert torch.isinf((x * x).sum(dim=1)).all()                         # fp16 squares: inf in every row
    assert torch.isfinite((x.float() ** 2).sum(dim=1)).all()


def test_near_zero_rows_make_eps_matter():
    x = checks.near_zero_rows((16, 256), torch.float16, "cpu", seed=0)
    mean_square = x.double().pow(2).mean(dim=1)
    assert mean_square[0] == 0 and (mean_square[1:] > 0).all()
    eps = 1e-6
    effect = (mean_square + eps).rsqrt() / mean_square.clamp(min=1e-30).rsqrt()
    assert (effect[1:] < 0.99).any()                                      # eps changes some rows by > 1 %


def test_lse_values_are_very_negative_spread_by_hundreds_and_underflow_exp():
    lse = checks.lse_values((4, 6), "cpu", seed=0)
    assert lse.dtype == torch.float32 and (lse <= -120).all()
    assert ((lse.amax(dim=1) - lse.amin(dim=1)) >= 400).all()
    assert (lse.exp() == 0).all()                                        # exponentiated directly: 0 / 0
    weights = (lse - lse.amax(dim=1, keepdim=True)).exp()
    assert (weights == 0).any() and (weights == 1).any()


def test_padded_and_unpadded_widths():
    unpadded, padded = checks.padded_and_unpadded_widths(32, 256)
    assert unpadded % 256 == 0 and padded % 32 == 0 and padded % 256
    with pytest.raises(ValueError):
        checks.padded_and_unpadded_widths(32, 32)
