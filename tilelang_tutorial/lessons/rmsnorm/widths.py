"""The configuration the op uses for each channel width: measured, for every multiple of 32.

The suite ``rmsnorm_widths`` (``python -m tilelang_tutorial bench rmsnorm_widths``, on a GPU)
times a few layouts at every C from 32 to 8192 (:func:`candidates`: the group of lanes that leaves
each lane 1, 2, 4 or 8 vectors of its row), records the fastest with what the others reached, and
writes the choices to ``width_table.json`` beside this module: the table :func:`config_for` reads
(a file, so the op does not rebuild 256 programs to check records at its first call; a test checks
that the table is what the current records chose). A width outside it (C > 8192) falls back to
:func:`.kernel.default_config`, the rule, and :func:`source` says which one a width gets.
"""
from __future__ import annotations

import json
from pathlib import Path

from .kernel import (  # noqa: F401  (config_for, source, table, TABLE_FILE: the op's side, re-exported)
    TABLE_FILE, VEC, RMSNormSiLUConfig, check_channel_width, config_for, default_config, source, table, valid_groups,
)

SUITE = "rmsnorm_widths"
SUITE_BF16 = "rmsnorm_widths_bf16"
WIDTHS = tuple(range(32, 8192 + 1, 32))
#: vectors of its row each lane may hold in the sweep's layouts
VECTOR_TARGETS = (2, 4, 8)
#: a layout whose padding leaves more than this share of the lanes' slots empty is not tried
MAX_PADDING = 0.25


def candidates(C: int) -> list[RMSNormSiLUConfig]:
    """The layouts the sweep times for width C: for each target of vectors per lane, the smallest
    power-of-two group that meets it, with 256 threads per block (or the group, if larger),
    unless its padding wastes more than :data:`MAX_PADDING` (the rule's choice is always kept)."""
    check_channel_width(C)
    n_vec = C // VEC
    out = [default_config(C)]
    for target in VECTOR_TARGETS:
        group = next((g for g in valid_groups(C) if -(-n_vec // g) <= target), None)
        if group is None:
            continue
        slots = -(-n_vec // group) * group
        cfg = RMSNormSiLUConfig(group=group, threads=max(256, group))
        if (slots - n_vec) / slots <= MAX_PADDING and cfg not in out:
            out.append(cfg)
    return out


def table_from_records(records) -> dict:
    """``{C: RMSNormSiLUConfig}``: what each ``rmsnorm_widths`` record chose."""
    return {int(r["shape"]["C"]): RMSNormSiLUConfig(group=r["config"]["group"], threads=r["config"]["threads"])
            for r in records}


def write_table(records, provenance: str) -> Path:
    chosen = table_from_records(records)
    doc = {"written_by": "python -m tilelang_tutorial bench rmsnorm_widths", "measured": provenance,
           "configs": {str(C): [cfg.group, cfg.threads] for C, cfg in sorted(chosen.items())}}
    TABLE_FILE.write_text(json.dumps(doc, indent=0) + "\n", encoding="utf-8")
    table.cache_clear()
    return TABLE_FILE


