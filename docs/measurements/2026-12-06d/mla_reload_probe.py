"""Goal 4 diagnostic: the seesaw MLA decode with the KV loads of one stage (or both) made only in the
first pair (mla_chunks.py, ``skip_loads``), against the package's kernel (plan.run). The
diagnostics' outputs are wrong by design and are not checked: each time bounds what freeing that
stage earlier could gain. The package is checked against the fp32 reference first.

Every variant checked against the fp32 reference (16 sequences) on a poisoned output first, then
timed in three interleaved rounds (the variants' order rotated each round): do_bench's median with
the L2 flushed before each call, checked by CUDA events around a loop of (flush, call) minus the
flushes (timing.measure_or_note). Printed: TFLOP/s per round, then the median over rounds.

    python3 mla_reload_probe.py [--release | --halves]            # on a GPU
    python3 mla_reload_probe.py [--release | --halves] --compile  # here: build every kernel
"""
import os, random, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
import mla_chunks   # noqa: E402
from tilelang_tutorial import checks, runtime, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402

def factory(name, **switches):
    def program(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
        return mla_chunks.mla_decode_seesaw_program(h_q, dtype, split=split, softmax_scale=softmax_scale,
                                                    **switches)
    program.__name__ = name
    return program


# the second run: the switches the diagnostic suggested (the environment carries the choice to
# the compile workers, which import this module without the command line)
RELEASE = "--release" in sys.argv or os.environ.get("MLA_PROBE_RELEASE") == "1"
os.environ["MLA_PROBE_RELEASE"] = "1" if RELEASE else "0"
if RELEASE:
    VARIANTS = {"package": None, "early": factory("early", early_release=True),
                "ev_first": factory("ev_first", eviction="evict_first"),
                "ev_last": factory("ev_last", eviction="evict_last"),
                "early+last": factory("early_last", early_release=True, eviction="evict_last")}
    DIAGNOSTIC = set()
elif "--halves" in sys.argv or os.environ.get("MLA_PROBE_HALVES") == "1":   # the third: which half
    os.environ["MLA_PROBE_HALVES"] = "1"
    VARIANTS = {"package": None, **{f"{part} kept": factory(f"skip{part}", skip_loads=(part,))
                                    for part in ("0l", "0r", "1l", "1r")}}
    DIAGNOSTIC = {name for name in VARIANTS if name != "package"}
    POINTS_KEPT = 2
else:
    VARIANTS = {"package": None, "odd kept": factory("skip1", skip_loads=(1,)),
                "even kept": factory("skip0", skip_loads=(0,)), "both kept": factory("skip01", skip_loads=(0, 1))}
    DIAGNOSTIC = {"odd kept", "even kept", "both kept"}
POINTS = [("b64 kv 8192", 64, 8192, False), ("b128 kv 4096", 128, 4096, False),
          ("b64 kv 16384", 64, 16384, False)]
POINTS = POINTS[:globals().get("POINTS_KEPT", len(POINTS))]


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
    jobs = [(name, split) for name in VARIANTS for split in (False, True)]
    if processes:
        failed = {j: e for j, e in runtime.precompile(jobs, "mla_reload_probe:_build").items() if e is not None}
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
        ns = op.choose_num_split(b, 128, max(seqlens), sm_count=op.sm_count())
        print(f"== {label}: b={b} mean kv {sum(seqlens) / b:.0f} num_split={ns}", flush=True)
        runs = {}
        for name, f in VARIANTS.items():
            the_plan = op.plan(**x, num_split=ns, program=f) if f else op.plan(**x, num_split=ns, schedule="seesaw")
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
            the_plan.run(**x, out=out)
            torch.cuda.synchronize()
            if name in DIAGNOSTIC:     # wrong by design: timed, never checked
                runs[name] = (the_plan, out)
                continue
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
            print(f"  {name:10s} {'diag' if name in DIAGNOSTIC else 'OK  '} | rounds " + " ".join("refused" if v is None else f"{v:4.0f}" for v in got[name])
                  + f" | median {med:4.0f} TFLOP/s", flush=True)
        del x, ref, runs
        torch.cuda.empty_cache()
    print(f"mla_reload_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_here()
    else:
        main()
