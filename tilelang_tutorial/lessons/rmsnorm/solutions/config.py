"""Reference answer for notebook 05's configuration exercise (C = 640, fp16).

C / 8 = 80 sixteen-byte vectors per row. A group must be a power of two (the sum's butterfly
pairs lanes by halves). 16 lanes divide 80 exactly: each thread holds 5 vectors (40 elements) of
its row, few registers, a 16-lane shuffle reduction, and 256 threads per block hold 16 rows.
32 lanes also work (3 vectors each, the row padded to 96 vectors, 16 of them empty); 1 lane per
row is the naive kernel's whole row per thread, and spills.
"""
from tilelang_tutorial.lessons.rmsnorm.kernel import RMSNormSiLUConfig

CONFIG_640 = RMSNormSiLUConfig(group=16, threads=256)
