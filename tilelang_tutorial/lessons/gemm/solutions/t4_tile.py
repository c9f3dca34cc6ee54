"""Reference solution: the seed's 128 x 128 tile with three stages on a T4 (notebook 02b, exercise 2).
Three stages of (128 x block_K + block_K x 128) fp16 values: block_K = 32 needs 48 KiB, 48 would
need 72 KiB, more than a T4 block's 64 KiB."""
from ..configs import SEED_CONFIG

T4_TILE_SOLUTION = SEED_CONFIG.replace(block_K=32)
