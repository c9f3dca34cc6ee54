"""Goal 4 probe, the memory-bound points: FlashMLA's kernel (``mla_flashmla_probe.FlashMLA``) beside
``plan.run`` at 16 heads (DeepSeek-V3 on an 8-way tensor-parallel shard: the cache is streamed), as
the ``mla`` bench's h16 points (b128, kv 8192 / 16384 / 32768), and at b64 kv 8192 and a ragged
b128 <= 16384. Checked against the fp32 reference first; three interleaved rounds of
timing.measure_or_note; printed in TB/s of cache, query and output read and written
(``bench._bytes``) and TFLOP/s.

    python3 mla_flashmla_h16_probe.py [--so PATH]     # on a GPU
"""
import os, random, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mla_flashmla_probe import both_at, check_and_time, load_library   # noqa: E402
from tilelang_tutorial.lessons.mla import bench   # noqa: E402

POINTS = [("h16 b128 kv 8192", 128, 8192, False), ("h16 b128 kv 16384", 128, 16384, False),
          ("h16 b128 kv 32768", 128, 32768, False), ("h16 b64 kv 8192", 64, 8192, False),
          ("h16 ragged b128 <= 16384", 128, 16384, True)]
H_Q = 16


def main():
    import torch

    load_library()
    t0 = time.time()
    print(torch.cuda.get_device_name(), flush=True)
    for pi, (label, b, kv, ragged) in enumerate(POINTS):
        rng = random.Random(40 + pi)
        seqlens = [rng.randint(1, kv) for _ in range(b)] if ragged else [kv] * b
        flops, nbytes = bench._flops(H_Q, seqlens), bench._bytes(b, H_Q, seqlens)
        runs, outs, idx, ref = both_at(label, b, H_Q, seqlens, "float16", seed=800 + pi)
        med = check_and_time(runs, outs, idx, ref, "float16", lambda ms: nbytes / ms / 1e9, fmt="5.2f", unit="TB/s")
        print("  TFLOP/s: " + ", ".join(f"{n} {v * flops / nbytes:.0f}" for n, v in med.items()), flush=True)
        del runs, outs, ref
        torch.cuda.empty_cache()
    print(f"mla_flashmla_h16_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
