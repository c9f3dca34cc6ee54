"""Goal 4 probe: FlashMLA's own Hopper decode kernel (built from its source by
``docs/measurements/runner/build_flashmla_peer.sh``, called through the package's
``lessons/mla/flashmla_peer.py``) beside the package's default (``plan.run``, the split the package picks) on the same
card, at the goal's points and the mid and ragged batches. The 620 TFLOP/s goal reads FlashMLA's
published 660 on an H800; this measures what FlashMLA does here.

FlashMLA is called as its users call it: its scheduler once per batch of lengths (``get_mla_metadata``),
then each step the kernel and its combine (``flash_mla_with_kvcache``), on the cache laid out as it
wants it (``[pages, 64, 1, 576]``: the package's two caches concatenated, the same numbers). Each is
checked against the fp32 reference (16 sequences) on a poisoned output first, then timed in three
interleaved rounds: do_bench's median with the L2 flushed, checked by CUDA events around a loop of
(flush, call) minus the flushes (timing.measure_or_note). Printed: TFLOP/s per round, the median,
and FlashMLA / package.

    python3 mla_flashmla_probe.py [--so PATH]     # on a GPU (default: .gpu/libflashmla_peer.so)
"""
import os, random, statistics, sys, time

from tilelang_tutorial import checks, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402
from tilelang_tutorial.lessons.mla import flashmla_peer as FM   # noqa: E402

POINTS = [  # label, batch, kv length (the longest when ragged), ragged, dtype
    ("b64 kv 4096", 64, 4096, False, "float16"), ("b64 kv 8192", 64, 8192, False, "float16"),
    ("b64 kv 16384", 64, 16384, False, "float16"), ("b128 kv 4096", 128, 4096, False, "float16"),
    ("b128 kv 8192", 128, 8192, False, "float16"), ("b64 kv 8192 bf16", 64, 8192, False, "bfloat16"),
    ("b8 kv 20000", 8, 20000, False, "float16"), ("b4 kv 32768", 4, 32768, False, "float16"),
    ("ragged b48 <= 16255", 48, 16255, True, "float16"), ("b1 kv 32768", 1, 32768, False, "float16"),
]


def load_library():
    """FlashMLA's peer library (``--so PATH``, else the package's default, ``.gpu/libflashmla_peer.so``),
    checked to load"""
    if "--so" in sys.argv:
        os.environ[FM.LIB_ENV] = sys.argv[sys.argv.index("--so") + 1]
    ok, what = FM.available()
    assert ok, what
    print(f"FlashMLA: {what}", flush=True)


def both_at(label, b, h_q, seqlens, dtype, seed):
    """The package's plan (its own split) and FlashMLA on one batch of fresh inputs: prints the point's
    line; returns ({name: call}, {name: its output, poisoned}, reference rows, fp32 reference)"""
    x = bench._inputs(b, h_q, seqlens, dtype, seed=seed)
    idx, ref = bench._reference(x)
    the_plan = op.plan(**x)
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
    fm = FM.FlashMLADecode(**x)
    print(f"== {label}: b={b} mean kv {sum(seqlens) / b:.0f} package num_split={the_plan.num_split} "
          f"flashmla parts={fm.parts}", flush=True)
    return ({"package": lambda: the_plan.run(**x, out=out), "flashmla": fm.run},
            {"package": out, "flashmla": fm.out}, idx, ref)


def check_and_time(runs, outs, idx, ref, dtype, rate, fmt="4.0f", unit="TFLOP/s"):
    """Each of ``runs`` (name -> call) checked against the reference on its output (``outs``), then
    the correct ones timed in three interleaved rounds (the order rotated each round); prints each
    round's ``rate(ms)`` and the median, then ``flashmla / package``; returns {name: median rate}"""
    import torch

    ok = {}
    for name, fn in runs.items():
        fn()
        torch.cuda.synchronize()
        ok[name] = bench._check(outs[name], idx, ref, dtype)
        print(f"  {name:9s} rel {ok[name]['rel_error']:.1e} unwritten {ok[name]['unwritten']} "
              f"{'ok' if ok[name]['ok'] else 'WRONG'}", flush=True)
    got = {name: [] for name in runs if ok[name]["ok"]}
    names = list(got)
    for rnd in range(3):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            t, why = timing.measure_or_note(runs[name])
            got[name].append(None if t is None else rate(t.ms))
    med = {}
    for name in names:
        vals = [v for v in got[name] if v is not None]
        med[name] = statistics.median(vals) if vals else float("nan")
        print(f"  {name:9s} rounds " + " ".join("refused" if v is None else f"{v:{fmt}}" for v in got[name])
              + f" | median {med[name]:{fmt}} {unit}", flush=True)
    if set(med) == {"flashmla", "package"}:
        print(f"  flashmla / package {med['flashmla'] / med['package']:.3f}", flush=True)
    return med


def main():
    import torch

    load_library()
    t0 = time.time()
    print(torch.cuda.get_device_name(), flush=True)
    for pi, (label, b, kv, ragged, dtype) in enumerate(POINTS):
        rng = random.Random(pi)
        seqlens = [rng.randint(1, kv) for _ in range(b)] if ragged else [kv] * b
        flops = bench._flops(128, seqlens)
        runs, outs, idx, ref = both_at(label, b, 128, seqlens, dtype, seed=700 + pi)
        check_and_time(runs, outs, idx, ref, dtype, lambda ms: flops / ms / 1e9)
        del runs, outs, ref
        torch.cuda.empty_cache()
    print(f"mla_flashmla_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
