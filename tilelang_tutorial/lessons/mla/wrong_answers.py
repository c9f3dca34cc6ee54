"""Plausible wrong answers to this lesson's exercises (``tests/test_exercises.py``)."""

#: One warpgroup for the 64 x 512 accumulator: 256 registers per thread.
WARP_CONFIG_ONE_WARPGROUP = {"block_H": 64, "threads": 128, "policy": "FullCol"}
#: Rows split between warpgroups: inference cannot (64-row wgmma) and splits columns instead.
WARP_CONFIG_FULLROW = {"block_H": 64, "threads": 256, "policy": "FullRow"}


def combine_mean(o_partial, lse):
    """Every split weighted equally (CPU)."""
    return o_partial.mean(dim=-2)


def combine_no_max_subtraction(o_partial, lse):
    """Right weights, but 2^lse overflows fp32 for large lse (CPU)."""
    import torch

    w = torch.exp2(lse)
    return ((w / w.sum(-1, keepdim=True))[..., None] * o_partial).sum(-2)
