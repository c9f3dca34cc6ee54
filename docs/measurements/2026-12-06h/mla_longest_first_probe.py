"""Probe: the seesaw with the longest sequences first, ordered by the kernel itself
(``mla_longest_first.py``), beside the package's ``plan.run`` and FlashMLA's own kernel.

At the seventh session's five ragged batches (``../2026-12-06g/mla_ragged_probe.py``'s points, same
seeds) and four uniform ones (where the order is today's and only the ranking's cost shows):
each of the three checked against the fp32 reference (every sequence) on a poisoned output, then timed in three
interleaved rounds (``../2026-12-06g/mla_flashmla_probe.check_and_time``: do_bench's median with the
L2 flushed, checked by CUDA events). All three at the package's own split (``choose_num_split``).
Then, at the ragged batches, the ordered kernel at num_split 1-8 once each, with the dispatch
model's steps for the sorted batch (``model_steps``), to see which split it wants.

    python3 mla_longest_first_probe.py [--so PATH]     # on a GPU (FlashMLA: .gpu/libflashmla_peer.so)
    python3 mla_longest_first_probe.py --quick         # the ragged batches the package splits, package and ordered only
"""
import os, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06g"))
from mla_flashmla_probe import check_and_time, load_library   # noqa: E402
from mla_ragged_probe import POINTS as RAGGED, model_steps   # noqa: E402
from mla_longest_first import mla_decode_longest_first_program   # noqa: E402
from tilelang_tutorial import checks, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402
from tilelang_tutorial.lessons.mla import flashmla_peer as FM   # noqa: E402
from tilelang_tutorial.lessons.mla.common import choose_num_split   # noqa: E402

UNIFORM = [("b64 kv 8192", 64, 8192), ("b128 kv 4096", 128, 4096), ("b64 kv 16384", 64, 16384),
           ("b8 kv 20000", 8, 20000)]
SPLITS = [1, 2, 3, 4, 6, 8]


def main():
    import torch

    quick = "--quick" in sys.argv
    if not quick:
        load_library()
    t0 = time.time()
    print(torch.cuda.get_device_name(), flush=True)
    points = [(label, b, bench._seqlens("varlen", b, kv, seed=seed), 900 + seed) for label, b, kv, seed in RAGGED]
    points += [(label, b, [kv] * b, 950 + i) for i, (label, b, kv) in enumerate(UNIFORM)]
    if quick:   # one compiled program (the split one), no FlashMLA, no sweep
        points = [p for p in points[:len(RAGGED)] if choose_num_split(p[1], 128, max(p[2])) > 1]
    for label, b, seqlens, seed in points:
        x = bench._inputs(b, 128, seqlens, "float16", seed=seed)
        idx, ref = bench._reference(x, sample=None)   # every sequence: a wrong order cannot hide
        flops = bench._flops(128, seqlens)
        package = op.plan(**x)
        ordered = op.plan(**x, program=mla_decode_longest_first_program)
        assert ordered.num_split == package.num_split
        outs = {name: checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda") for name in ("package", "ordered")}
        runs = {"package": lambda: package.run(**x, out=outs["package"]),
                "ordered": lambda: ordered.run(**x, out=outs["ordered"])}
        fm = None if quick else FM.FlashMLADecode(**x)
        if fm is not None:
            outs["flashmla"], runs["flashmla"] = fm.out, fm.run
        print(f"== {label}: mean kv {sum(seqlens) / b:.0f}, max {max(seqlens)}; num_split {package.num_split}; "
              f"model steps in grid order {model_steps(seqlens, package.num_split):.0f}, longest first "
              f"{model_steps(sorted(seqlens, reverse=True), package.num_split):.0f}", flush=True)
        med = check_and_time(runs, outs, idx, ref, "float16", lambda ms: flops / ms / 1e9)
        if "ordered" in med and "package" in med:
            print(f"  ordered / package {med['ordered'] / med['package']:.3f}"
                  + (f"   flashmla / ordered {med['flashmla'] / med['ordered']:.3f}" if "flashmla" in med else ""), flush=True)
        if len(set(seqlens)) > 1 and not quick:
            for ns in SPLITS:
                p = op.plan(**x, num_split=ns, program=mla_decode_longest_first_program)
                out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
                p.run(**x, out=out)
                torch.cuda.synchronize()
                ok = bench._check(out, idx, ref, "float16")
                if not ok["ok"]:
                    print(f"  ordered split {ns}: WRONG rel {ok['rel_error']:.1e} unwritten {ok['unwritten']}", flush=True)
                    continue
                t, why = timing.measure_or_note(lambda: p.run(**x, out=out))
                print(f"  ordered split {ns}: " + ("refused: " + why if t is None else f"{flops / t.ms / 1e9:4.0f} TFLOP/s")
                      + f"   model {model_steps(sorted(seqlens, reverse=True), ns):4.0f} steps", flush=True)
        del x, ref, runs, outs, package, ordered, fm
        torch.cuda.empty_cache()
    print(f"mla_longest_first_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
