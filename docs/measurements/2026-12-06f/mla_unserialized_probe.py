"""Goal 4 probe: ``mla_pairmax_unserialized.py`` (FlashMLA's order of products, its ``wgmma`` no longer
serialized by ptxas) against ``../2026-12-06d/mla_pairmax.py`` as measured then (serialized) and the
package's seesaw (plan.run), all without a K split (num_split = 1 at every point: the probe kernels
are built without the split). ``../2026-12-06d/mla_pairmax_probe.py`` with a third variant.

Every variant checked against the fp32 reference (16 sequences) on a poisoned output first, then
timed in three interleaved rounds (the variants' order rotated each round): do_bench's median with
the L2 flushed before each call, checked by CUDA events around a loop of (flush, call) minus the
flushes (timing.measure_or_note). Printed: TFLOP/s per round, then the median over rounds.

    python3 mla_probe.py            # on a GPU
    python3 mla_probe.py --compile  # here: build every kernel (fills the kernel cache)
"""
import os, random, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
EARLIER = os.path.join(HERE, "..", "2026-12-06d")
sys.path[:0] = [HERE, EARLIER]
os.environ["PYTHONPATH"] = os.pathsep.join([HERE, EARLIER, os.environ.get("PYTHONPATH", "")])
import mla_pairmax   # noqa: E402
import mla_pairmax_unserialized   # noqa: E402
from tilelang_tutorial import checks, runtime, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402

def pairmax(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
    return mla_pairmax.mla_decode_pairmax_program(h_q, dtype, split=split, softmax_scale=softmax_scale)


def unserialized(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
    return mla_pairmax_unserialized.mla_decode_pairmax_program(h_q, dtype, split=split, softmax_scale=softmax_scale)


VARIANTS = {"package": None, "pairmax": pairmax, "unserialized": unserialized}
POINTS = [("b64 kv 8100 (odd blocks)", 64, 8100, False), ("ragged b64 <= 8192", 64, 8192, True),
          ("b64 kv 8192", 64, 8192, False), ("b128 kv 4096", 128, 4096, False),
          ("b64 kv 16384", 64, 16384, False)]


def _build(job):
    from tilelang_tutorial.lessons.mla.common import default_softmax_scale
    name, split = job
    f = VARIANTS[name]
    if f is None:
        return op.build_mla_decode(128, "float16", split=split, schedule="seesaw", arch="sm_90a")
    return runtime.compile_kernel(f(128, "float16", split=split, softmax_scale=default_softmax_scale()),
                                  arch="sm_90a")


def compile_here(processes=False):
    t = time.time()
    jobs = [(name, False) for name in VARIANTS]
    if processes:
        failed = {j: e for j, e in runtime.precompile(jobs, "mla_unserialized_probe:_build").items() if e is not None}
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
    print(torch.cuda.get_device_name(), flush=True)
    compile_here(processes=True)
    for pi, (label, b, kv, ragged) in enumerate(POINTS):
        rng = random.Random(pi)
        seqlens = [rng.randint(1, kv) for _ in range(b)] if ragged else [kv] * b
        x = bench._inputs(b, 128, seqlens, "float16", seed=300 + pi)
        idx, ref = bench._reference(x)
        flops = bench._flops(128, seqlens)
        ns = 1
        print(f"== {label}: b={b} mean kv {sum(seqlens) / b:.0f} num_split={ns}", flush=True)
        runs = {}
        for name, f in VARIANTS.items():
            the_plan = op.plan(**x, num_split=ns, program=f) if f else op.plan(**x, num_split=ns, schedule="seesaw")
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
            the_plan.run(**x, out=out)
            torch.cuda.synchronize()
            ok = bench._check(out, idx, ref, "float16")
            if not ok["ok"]:
                print(f"  {name:10s} WRONG rel {ok['rel_error']:.1e} unwritten {ok['unwritten']}", flush=True)
                continue
            runs[name] = (the_plan, out)
        got = {name: [] for name in runs}
        names = list(runs)
        for rnd in range(3):
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                the_plan, out = runs[name]
                t, why = timing.measure_or_note(lambda p=the_plan, o=out: p.run(**x, out=o))
                got[name].append(None if t is None else flops / t.ms / 1e9)
        for name in names:
            vals = [v for v in got[name] if v is not None]
            med = statistics.median(vals) if vals else float("nan")
            print(f"  {name:10s} OK | rounds " + " ".join("refused" if v is None else f"{v:4.0f}" for v in got[name])
                  + f" | median {med:4.0f} TFLOP/s", flush=True)
        del x, ref, runs
        torch.cuda.empty_cache()
    print(f"mla_unserialized_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_here()
    else:
        main()
