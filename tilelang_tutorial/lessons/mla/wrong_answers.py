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
#: Right weights, but 2^lse overflows fp32 for lse near 200.
combine_kernel_no_max_subtraction = mutated(
    combine_program, ("total += T.exp2(lse[bx, hx, s] - lse_max)", "total += T.exp2(lse[bx, hx, s])"),
    (_WEIGHTED, "o[j] += T.exp2(lse[bx, hx, s]) / total * o_partial[bx, hx, s, j]"))
#: 2^(lse_s - lse_max) without dividing by the total.
combine_kernel_unnormalised = mutated(
    combine_program, (_WEIGHTED, "o[j] += T.exp2(lse[bx, hx, s] - lse_max) * o_partial[bx, hx, s, j]"))
