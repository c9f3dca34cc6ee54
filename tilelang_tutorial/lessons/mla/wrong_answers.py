"""Plausible wrong answers to notebook 04's exercises (``tests/test_exercises.py``): the warp
configurations as data, the combine kernels as one mistake each in the solution
(``solutions/combine_kernel.py``)."""
from ...exercise_kit import mutated
from .solutions.combine_kernel import combine_program

#: One warpgroup for the 64 x 512 accumulator: 256 registers per thread.
WARP_CONFIG_ONE_WARPGROUP = {"block_H": 64, "threads": 128, "policy": "FullCol"}
#: Rows split between warpgroups: inference cannot (64-row wgmma) and splits columns instead.
WARP_CONFIG_FULLROW = {"block_H": 64, "threads": 256, "policy": "FullRow"}
#: Four warpgroups: 64 registers of acc_o each, but 512 + 128 threads share the register file.
WARP_CONFIG_FOUR_WARPGROUPS = {"block_H": 64, "threads": 512, "policy": "FullCol"}

_WEIGHTED = "o[j] += T.exp2(lse[bx, hx, s] - lse_max) / total * o_partial[bx, hx, s, j]"

#: Every split weighted equally.
combine_kernel_mean = mutated(combine_program, (_WEIGHTED, "o[j] += o_partial[bx, hx, s, j] / num_split"))
#: Right weights, but 2^lse overflows fp32 for a large lse and underflows to 0 for a very negative one.
combine_kernel_no_max_subtraction = mutated(
    combine_program, ("total += T.exp2(lse[bx, hx, s] - lse_max)", "total += T.exp2(lse[bx, hx, s])"),
    (_WEIGHTED, "o[j] += T.exp2(lse[bx, hx, s]) / total * o_partial[bx, hx, s, j]"))
#: 2^(lse_s - lse_max) without dividing by the total.
combine_kernel_unnormalised = mutated(
    combine_program, (_WEIGHTED, "o[j] += T.exp2(lse[bx, hx, s] - lse_max) * o_partial[bx, hx, s, j]"))
#: The running max starts at 0, not -inf: when every lse is below -149, lse_max stays 0 and every
#: weight 2^(lse_s - 0) underflows to 0 (0 / 0).
combine_kernel_max_from_zero = mutated(combine_program, ('lse_max = -T.infinity("float32")', "lse_max = 0.0"))
#: Shifted by the first split's lse instead of the max over the splits: overflows when a later
#: split's lse is more than 128 above the first's.
combine_kernel_shift_by_first_split = mutated(
    combine_program, ("lse_max = T.max(lse_max, lse[bx, hx, s])", "lse_max = lse[bx, hx, 0]"))
#: The grid's extents swapped: T.Kernel(batch, heads) still binds (hx, bx), so with more heads
#: than sequences some heads are never computed.
combine_kernel_grid_swapped = mutated(combine_program, ("T.Kernel(heads, batch,", "T.Kernel(batch, heads,"))
