"""Reference answer for notebook 05's configuration exercise (C = 640, fp16).

C / 8 = 80 sixteen-byte vectors per row. A group must be a power of two that divides 80:
1, 2, 4, 8 or 16 lanes (32 does not divide 80). 16 lanes leave each thread 5 vectors (40
elements) of its row: few registers, a 16-lane shuffle reduction, and 256 threads per block hold
16 rows. Smaller groups give each thread more of the row (8 lanes: 10 vectors, 80 elements) and
shorter reductions; one lane per row is the naive kernel's whole row per thread.
This is also what ``kernel.default_config(640)`` picks.
"""
from tilelang_tutorial.lessons.rmsnorm.kernel import RMSNormSiLUConfig

CONFIG_640 = RMSNormSiLUConfig(group=16, threads=256)
