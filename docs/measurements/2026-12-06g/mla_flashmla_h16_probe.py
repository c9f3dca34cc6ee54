"""Goal 4 probe, the memory-bound points: FlashMLA's kernel (``mla_flashmla_probe.FlashMLA``) beside
``plan.run`` at 16 heads (DeepSeek-V3 on an 8-way tensor-parallel shard: the cache is streamed), as
the ``mla`` bench's h16 points (b128, kv 8192 / 16384 / 32768), and at b64 kv 8192 and a ragged
b128 <= 16384. Checked against the fp32 reference first; three interleaved rounds of
timing.measure_or_note; printed in TB/s of cache, query and output read and written
(``bench._bytes``) and TFLOP/s.

    python3 mla_flashmla_h16_probe.py [--so PATH]     # on a GPU
"""
import ctypes, os, random, statistics, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mla_flashmla_probe import FlashMLA   # noqa: E402
from tilelang_tutorial import checks, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402

POINTS = [("h16 b128 kv 8192", 128, 8192, False), ("h16 b128 kv 16384", 128, 16384, False),
          ("h16 b128 kv 32768", 128, 32768, False), ("h16 b64 kv 8192", 64, 8192, False),
          ("h16 ragged b128 <= 16384", 128, 16384, True)]
H_Q = 16


def main():
    import torch

    so = sys.argv[sys.argv.index("--so") + 1] if "--so" in sys.argv else os.path.join(HERE, "libflashmla_peer.so")
    lib = ctypes.CDLL(so)
    lib.flashmla_decode.argtypes = [ctypes.c_int] * 5 + [ctypes.c_float] + [ctypes.c_void_p] * 6 + [ctypes.c_int] \
        + [ctypes.c_void_p] * 5
    t0 = time.time()
    print(torch.cuda.get_device_name(), flush=True)
    for pi, (label, b, kv, ragged) in enumerate(POINTS):
        rng = random.Random(40 + pi)
        seqlens = [rng.randint(1, kv) for _ in range(b)] if ragged else [kv] * b
        x = bench._inputs(b, H_Q, seqlens, "float16", seed=800 + pi)
        idx, ref = bench._reference(x)
        flops, nbytes = bench._flops(H_Q, seqlens), bench._bytes(b, H_Q, seqlens)
        the_plan = op.plan(**x)
        out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
        fm = FlashMLA(lib, x)
        runs = {"package": lambda: the_plan.run(**x, out=out), "flashmla": fm.run}
        print(f"== {label}: b={b} mean kv {sum(seqlens) / b:.0f} package num_split={the_plan.num_split} "
              f"flashmla parts={fm.parts}", flush=True)
        ok = {}
        for name, fn in runs.items():
            fn()
            torch.cuda.synchronize()
            ok[name] = bench._check(out if name == "package" else fm.out, idx, ref, "float16")
            print(f"  {name:9s} rel {ok[name]['rel_error']:.1e} unwritten {ok[name]['unwritten']} "
                  f"{'ok' if ok[name]['ok'] else 'WRONG'}", flush=True)
        got = {name: [] for name in runs if ok[name]["ok"]}
        names = list(got)
        for rnd in range(3):
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                t, why = timing.measure_or_note(runs[name])
                got[name].append(t.ms if t else None)
        med = {}
        for name in names:
            vals = [v for v in got[name] if v is not None]
            med[name] = statistics.median(vals) if vals else float("nan")
            print(f"  {name:9s} rounds " + " ".join("refused" if v is None else f"{nbytes / v / 1e9:5.2f}" for v in got[name])
                  + f" | median {nbytes / med[name] / 1e9:5.2f} TB/s {flops / med[name] / 1e9:4.0f} TFLOP/s", flush=True)
        if len(med) == 2:
            print(f"  flashmla / package {med['package'] / med['flashmla']:.3f}", flush=True)
        del x, ref, fm, the_plan, out
        torch.cuda.empty_cache()
    print(f"mla_flashmla_h16_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
