"""Window 1 (issue 24, goal 4): the seesaw schedule before and after the page-id prefetch and the
chunked combine, on the H200, checked against the fp32 reference before timing.

Variants: ``old`` (HEAD before the change: old_seesaw.py + old_common.py), ``old+combine`` (the old
attention kernel with the new combine), ``new`` (the package: prefetch + new combine, via plan.run),
``new+L2`` (new_l2.py: the package's kernel plus a bulk L2 prefetch of the next block's page),
``new+order`` (new_order.py: warpgroup 1 issues its Q K^T only once warpgroup 0's scores are done,
so it runs during warpgroup 0's softmax instead of competing with it), ``new+L2+order`` (both).

    python3 docs/measurements/2026-12-01/mla_prefetch/window1.py            # on a GPU
    python3 docs/measurements/2026-12-01/mla_prefetch/window1.py --compile  # here: fill the kernel cache
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import old_seesaw                     # noqa: E402
import old_seesaw_new_combine         # noqa: E402
import new_l2                         # noqa: E402
import new_l2_order                   # noqa: E402
import new_order                      # noqa: E402
from tilelang_tutorial import checks, runtime, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op, reference   # noqa: E402


def factory(module):
    def program(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
        return module.mla_decode_seesaw_program(h_q, dtype, split=split, softmax_scale=softmax_scale)
    program.__name__ = module.__name__
    return program


VARIANTS = {"old": factory(old_seesaw), "old+combine": factory(old_seesaw_new_combine), "new": None,
            "new+L2": factory(new_l2), "new+order": factory(new_order), "new+L2+order": factory(new_l2_order)}
#: (label, batch, max kv, ragged)
POINTS = [("b8 kv 20000", 8, 20000, False), ("b64 kv 8192", 64, 8192, False),
          ("ragged b48 <= 16k", 48, 16384, True), ("b128 kv 4096", 128, 4096, False),
          ("b64 kv 8192, 8 pages", 64, 8192, "l2")]
#: the diagnostic point: every block-table entry names one of 8 pages (590 KB, L2-resident), the
#: same FLOPs as b64 kv 8192: how fast the consumers run when no load waits on DRAM
#: what issue 24 quotes for plan.run (seesaw) against FlashInfer 0.7.2.post1 fa3 in the same run
#: (not measured in this window: the FlashInfer wheel is not here)
RECORDED = {"b64 kv 8192": "b64 kv 8191 571 TFLOP/s, 1.07x FlashInfer",
            "b8 kv 20000": "b8 kv 20000 435 TFLOP/s, 0.96x FlashInfer",
            "ragged b48 <= 16k": "ragged b48 <= 16k 371 TFLOP/s, 0.98x FlashInfer",
            "b128 kv 4096": "b128 kv 4000 534 TFLOP/s, 1.05x FlashInfer",
            "b64 kv 8192, 8 pages": "diagnostic, not a recorded point"}


#: other splits timed with the new kernel (the heuristic's choice is timed with every variant)
SPLITS = {"b8 kv 20000": (16,), "ragged b48 <= 16k": (2, 8)}


def _build(job):
    from tilelang_tutorial.lessons.mla.common import default_softmax_scale
    name, split = job
    f = VARIANTS[name]
    if f is None:
        return op.build_mla_decode(128, "float16", split=split, schedule="seesaw", arch="sm_90a")
    return runtime.compile_kernel(f(128, "float16", split=split, softmax_scale=default_softmax_scale()),
                                  arch="sm_90a")


def compile_here(processes=False):
    """Every kernel this script runs (from the kernel cache where it is warm). ``processes``: lower
    them in worker processes first (a cold cache on a many-core machine)."""
    t = time.time()
    jobs = [(name, split) for name in VARIANTS for split in (False, True)
            if not (name == "old+combine" and not split)]   # the same program as "old" without a split
    if processes:
        here = os.path.dirname(os.path.abspath(__file__))
        os.environ["PYTHONPATH"] = here + os.pathsep + os.environ.get("PYTHONPATH", "")
        failed = {j: e for j, e in runtime.precompile(jobs, "window1:_build").items() if e is not None}
        if failed:
            print(f"precompile failed: {failed}", flush=True)
    built = runtime.compile_parallel(jobs, _build, verbose=False)
    bad = {job: err for job, err in built.items() if isinstance(err, Exception)}
    print(f"{len(jobs)} kernels ready in {time.time() - t:.0f} s" + (f"; FAILED: {bad}" if bad else ""), flush=True)
    if bad:
        raise SystemExit(1)


def main():
    import torch

    t0 = time.time()
    compile_here(processes=True)
    print("kernel regime: do_bench median (L2 flushed before each call), check: CUDA events around a loop of "
          "(flush, call) minus the flushes; back to back: CUDA events around back-to-back plan.run calls (host "
          "time included), check: wall clock. Each run checked against the fp32 reference (16 sequences) first.",
          flush=True)
    for pi, (label, b, kv, ragged) in enumerate(POINTS):
        rng = random.Random(pi)
        seqlens = [rng.randint(1, kv) for _ in range(b)] if ragged is True else [kv] * b
        x = bench._inputs(b, 128, seqlens, "float16", seed=200 + pi)
        if ragged == "l2":
            x["block_table"] = x["block_table"] % 8
        idx, ref = bench._reference(x)
        flops = bench._flops(128, seqlens)
        ns = default_ns = op.choose_num_split(b, 128, max(seqlens), sm_count=op.sm_count())
        print(f"== {label}: b={b} mean kv {sum(seqlens) / b:.0f} max {max(seqlens)} num_split={ns} "
              f"(issue 24: {RECORDED[label]})", flush=True)
        runs = [(name, f, ns) for name, f in VARIANTS.items() if not (name == "old+combine" and ns == 1)
                and not (ragged == "l2" and "L2" in name)]
        runs += [("new", None, other) for other in SPLITS.get(label, ())]
        for name, f, ns in runs:
            the_plan = op.plan(**x, num_split=ns, program=f) if f else op.plan(**x, num_split=ns, schedule="seesaw")
            base, name = name, f"{name} split={ns}"
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
            the_plan.run(**x, out=out)
            torch.cuda.synchronize()
            ok = bench._check(out, idx, ref, "float16")
            verdict = f"{'OK' if ok['ok'] else 'FAIL'} rel {ok['rel_error']:.1e} unwritten {ok['unwritten']}"
            if not ok["ok"]:
                print(f"  {name:20s} {verdict} -- not timed", flush=True)
                continue
            def run(the_plan=the_plan, x=x, out=out):
                return the_plan.run(**x, out=out)
            kt, why = timing.measure_or_note(run)
            ct, why_c = (timing.measure_or_note(run, regime="call") if ns == default_ns and base in ("old", "new")
                         else (None, "not timed back to back here"))
            def fmt(t, why):
                if t is None:
                    return f"refused ({why[:80]})"
                return (f"{t.ms * 1e3:7.1f} us {flops / t.ms / 1e9:4.0f} TFLOP/s, check {t.check_ms * 1e3:7.1f} us "
                        f"{flops / t.check_ms / 1e9:4.0f}" + (f" [{t.regime}]" if t.regime == "call" else ""))
            print(f"  {name:20s} {verdict} | kernel regime {fmt(kt, why)} | back to back {fmt(ct, why_c)}",
                  flush=True)
        del x, ref
        torch.cuda.empty_cache()
    print(f"window 1 done in {time.time() - t0:.0f} s", flush=True)


def smoke():
    """Here, without a GPU: every variant's plan on a small ragged batch in the emulator (the
    plumbing of main(), not its timing)."""
    for ns in (1, 3):
        x = reference.make_paged_inputs(3, 128, [1, 130, 449], seed=ns)
        ref = reference.mla_decode_reference(**x)
        for name, f in VARIANTS.items():
            if "L2" in name:
                print(f"{name} split={ns}: not emulated (the emulator has no CPU version of the PTX L2 prefetch)")
                continue
            the_plan = op.plan(**x, num_split=ns, program=f) if f else op.plan(**x, num_split=ns, schedule="seesaw")
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cpu")
            the_plan.run(**x, out=out)
            print(f"{name} split={ns} (emulator): {checks.compare(out, ref, tolerance=checks.TOLERANCE['float16'])}")


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_here()
    elif "--smoke" in sys.argv:
        smoke()
    elif not runtime.gpu_available():
        print("window1.py: needs a GPU (run with --compile here to fill the kernel cache)")
        sys.exit(2)
    else:
        main()
