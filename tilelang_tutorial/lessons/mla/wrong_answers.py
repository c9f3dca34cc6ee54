"""Plausible wrong answers to this lesson's exercises (``tests/test_exercises.py``)."""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

#: One warpgroup for the 64 x 512 accumulator: 256 registers per thread.
WARP_CONFIG_ONE_WARPGROUP = {"block_H": 64, "threads": 128, "policy": "FullCol"}
#: Rows split between warpgroups: inference cannot (64-row wgmma) and splits columns instead.
WARP_CONFIG_FULLROW = {"block_H": 64, "threads": 256, "policy": "FullRow"}
#: Four warpgroups: 64 registers of acc_o each, but 512 + 128 threads share the register file.
WARP_CONFIG_FOUR_WARPGROUPS = {"block_H": 64, "threads": 512, "policy": "FullCol"}


def _combine(num_split, dim, *, weight):
    """A combine kernel in the solution's shape whose weight of split ``s`` is ``weight``."""
    import tilelang.language as T

    batch, heads = T.dynamic("batch"), T.dynamic("heads")

    @T.prim_func
    def combine(lse: T.Tensor([batch, heads, num_split], "float32"),
                o_partial: T.Tensor([batch, heads, num_split, dim], "float32"),
                Output: T.Tensor([batch, heads, dim], "float32")):
        with T.Kernel(heads, batch, threads=128) as (hx, bx):
            lse_max = T.alloc_var("float32")
            total = T.alloc_var("float32")
            o = T.alloc_fragment([dim], "float32")
            lse_max = -T.infinity("float32")
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, lse[bx, hx, s])
            total = 0
            for s in T.serial(num_split):
                total += T.exp2(lse[bx, hx, s] - lse_max)
            T.clear(o)
            for s in T.serial(num_split):
                for j in T.Parallel(dim):
                    if weight == "mean":
                        o[j] += o_partial[bx, hx, s, j] / num_split
                    elif weight == "no max":   # 2^lse / sum 2^lse, without subtracting the max
                        o[j] += T.exp2(lse[bx, hx, s]) * o_partial[bx, hx, s, j]
                    else:                      # "unnormalised": the weights do not add up to 1
                        o[j] += T.exp2(lse[bx, hx, s] - lse_max) * o_partial[bx, hx, s, j]
            if weight == "no max":
                total = 0
                for s in T.serial(num_split):
                    total += T.exp2(lse[bx, hx, s])
                for j in T.Parallel(dim):
                    o[j] = o[j] / total
            T.copy(o, Output[bx, hx, :])

    return combine


def combine_kernel_mean(num_split, dim=512):
    """Every split weighted equally."""
    return _combine(num_split, dim, weight="mean")


def combine_kernel_no_max_subtraction(num_split, dim=512):
    """Right weights, but 2^lse overflows fp32 for lse near 200."""
    return _combine(num_split, dim, weight="no max")


def combine_kernel_unnormalised(num_split, dim=512):
    """2^(lse_s - lse_max) without dividing by the total."""
    return _combine(num_split, dim, weight="unnormalised")
