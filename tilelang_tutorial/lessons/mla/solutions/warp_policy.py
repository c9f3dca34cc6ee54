"""Reference answer for notebook 04's warp-configuration exercise.

64 heads per CTA (wgmma's M is 64 rows per warpgroup, so a 64-row tile cannot be split by rows),
two consumer warpgroups (256 threads), and the warpgroups split the *columns* of each GEMM
(``FullCol``): each holds a 64 x 256 slice of the fp32 output, 128 registers per thread, plus 16
for its 64 x 32 slice of the scores -- the configuration of the ``auto`` schedule (``auto.py``).
"""

WARP_CONFIG = {"block_H": 64, "threads": 256, "policy": "FullCol"}
