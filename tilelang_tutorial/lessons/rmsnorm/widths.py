"""The width suites: the op's layout (the rule, :func:`.kernel.default_config`) at every multiple
of 32 up to 8192.

``python -m tilelang_tutorial bench rmsnorm_widths`` (fp16) and ``bench rmsnorm_widths_bf16``
(bf16), on a GPU, time the layout :func:`config_for` gives each of the 256 widths on 2^27 elements
and record it against the copy bandwidth measured in the same run (:func:`.bench.run_widths`). How
the rule was chosen: the sweep ``rmsnorm_candidates`` (:mod:`.sweep`) timed it against the
layouts of the earlier measured table and other register caps at 28 widths, both dtypes.
"""
from __future__ import annotations

from .kernel import (  # noqa: F401  (re-exported: the op's side)
    VEC, RMSNormSiLUConfig, check_channel_width, default_config, valid_groups, vectors_per_thread,
)
from .op import config_for  # noqa: F401  (re-exported)

SUITE = "rmsnorm_widths"
SUITE_BF16 = "rmsnorm_widths_bf16"
WIDTHS = tuple(range(32, 8192 + 1, 32))


def empty_slots(C: int, group: int) -> int:
    """Vector slots of a row padded to whole rounds of ``group`` lanes that hold nothing."""
    return vectors_per_thread(C, group) * group - C // VEC
