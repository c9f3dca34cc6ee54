"""Goal 4 probe: is the seesaw's KV stream limited per SM or by the memory system the SMs share?

The package's seesaw (plan.run, fp16, h_q 128, ``num_split = 1``: two CTAs per sequence, one CTA
per SM) at kv 8192 with 4 to 66 sequences, i.e. 8 to 132 busy SMs, beside the 2026-12-06
diagnostic that loads each stage's KV only in the first pair (``../2026-12-06d/mla_chunks.py``,
``skip_loads=(0, 1)``; output wrong by design, timed only). Printed per point: TFLOP/s, and
TFLOP/s per busy SM.

Read: if the rate per SM is the same with 8 busy SMs as with 128, each SM's own stream (how many
bytes it can have in flight, and how long they take) is the limit, not DRAM or L2 bandwidth shared
by the chip; if it rises as fewer SMs share the memory system, the shared part is.

Every package run is checked against the fp32 reference (16 sequences) on a poisoned output first;
timing as in the other probes: three interleaved rounds of do_bench medians with the L2 flushed
before each call, checked by CUDA events (timing.measure_or_note), the median over rounds.

    python3 mla_occupancy_probe.py            # on a GPU
    python3 mla_occupancy_probe.py --compile  # here

``--multicast``: the package beside mla_multicast.py's cluster-of-two kernel (each KV block read
from L2 once for both CTAs of a sequence, checked against the reference like the package) at 32,
64 and 66 sequences: what the cluster costs where the memory system is not the limit, against what
it saves where it is.
"""
import os, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
OTHER = os.path.join(HERE, "..", "2026-12-06d")
sys.path.insert(0, HERE)
sys.path.insert(0, OTHER)
os.environ["PYTHONPATH"] = os.pathsep.join([HERE, OTHER, os.environ.get("PYTHONPATH", "")])
import mla_chunks   # noqa: E402
import mla_multicast   # noqa: E402
from tilelang_tutorial import checks, runtime, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402


def no_loads(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
    return mla_chunks.mla_decode_seesaw_program(h_q, dtype, split=split, softmax_scale=softmax_scale,
                                                skip_loads=(0, 1))


def multicast(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
    return mla_multicast.mla_decode_multicast_program(h_q, dtype, split=split, softmax_scale=softmax_scale)


ALL = {"package": None, "no loads": no_loads, "multicast": multicast}
DIAGNOSTIC = {"no loads"}
if "--multicast" in sys.argv:
    VARIANTS = {name: ALL[name] for name in ("package", "multicast")}
    BATCHES = [32, 64, 66]
else:
    VARIANTS = {name: ALL[name] for name in ("package", "no loads")}
    BATCHES = [4, 8, 16, 32, 64, 66]
KV = 8192


def _build(job):
    from tilelang_tutorial.lessons.mla.common import default_softmax_scale
    name = job
    f = ALL[name]
    if f is None:
        return op.build_mla_decode(128, "float16", split=False, schedule="seesaw", arch="sm_90a")
    return runtime.compile_kernel(f(128, "float16", split=False, softmax_scale=default_softmax_scale()),
                                  arch="sm_90a")


def compile_here(processes=False):
    t = time.time()
    jobs = list(VARIANTS)
    if processes:
        failed = {j: e for j, e in runtime.precompile(jobs, "mla_occupancy_probe:_build").items() if e is not None}
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
    print(torch.cuda.get_device_name(), f"{op.sm_count()} SMs", flush=True)
    compile_here(processes=True)
    for pi, b in enumerate(BATCHES):
        seqlens = [KV] * b
        x = bench._inputs(b, 128, seqlens, "float16", seed=500 + pi)
        idx, ref = bench._reference(x)
        flops = bench._flops(128, seqlens)
        ctas = 2 * b
        print(f"== b{b} kv {KV}: {ctas} CTAs (one per SM), num_split=1", flush=True)
        runs = {}
        for name, f in VARIANTS.items():
            the_plan = op.plan(**x, num_split=1, program=f) if f else op.plan(**x, num_split=1, schedule="seesaw")
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
            the_plan.run(**x, out=out)
            torch.cuda.synchronize()
            if name not in DIAGNOSTIC:
                ok = bench._check(out, idx, ref, "float16")
                if not ok["ok"]:
                    print(f"  {name:9s} WRONG rel {ok['rel_error']:.1e} unwritten {ok['unwritten']}", flush=True)
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
            print(f"  {name:9s} {'--' if name in DIAGNOSTIC else 'OK'} | rounds "
                  + " ".join("refused" if v is None else f"{v:4.0f}" for v in got[name])
                  + f" | median {med:4.0f} TFLOP/s, {med / ctas:5.2f} per busy SM", flush=True)
        del x, ref, runs
        torch.cuda.empty_cache()
    print(f"mla_occupancy_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_here()
    else:
        main()
