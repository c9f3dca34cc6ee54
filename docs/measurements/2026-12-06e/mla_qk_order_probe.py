"""Goal 4 probe: the seesaw MLA decode with warpgroup 1's ``Q K^T`` issued only once warpgroup
0's has finished (mla_qk_order.py), against the package's kernel (plan.run) and against the probe
file's own copy of it with the switch off ("copy": the same source as the package, so a difference
between "package" and "copy" is the noise of this run).

Every variant checked against the fp32 reference (16 sequences) on a poisoned output first, with a
watchdog (a wrong barrier deadlocks: after 20 s the probe says so and exits), then timed in three
interleaved rounds (the variants' order rotated each round): do_bench's median with the L2 flushed
before each call, checked by CUDA events around a loop of (flush, call) minus the flushes
(timing.measure_or_note). Printed: TFLOP/s per round, then the median over rounds.

    python3 mla_qk_order_probe.py            # on a GPU
    python3 mla_qk_order_probe.py --compile  # here: build every kernel (fills the kernel cache)
"""
import os, random, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
import mla_qk_order   # noqa: E402
from tilelang_tutorial import checks, runtime, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402


def factory(qk1_after_qk0):
    def program(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
        return mla_qk_order.mla_decode_qk_order_program(h_q, dtype, split=split, softmax_scale=softmax_scale,
                                                        qk1_after_qk0=qk1_after_qk0)
    program.__name__ = f"qk_order{int(qk1_after_qk0)}"
    return program


ALL = {"package": None, "copy": factory(False), "qk1 after": factory(True)}
DIAGNOSTIC = set()
VARIANTS = ALL
POINTS = [("b64 kv 8100 (odd blocks)", 64, 8100, False), ("b64 kv 8192", 64, 8192, False),
          ("b128 kv 4096", 128, 4096, False), ("b64 kv 16384", 64, 16384, False),
          ("b8 kv 20000", 8, 20000, False), ("ragged b48 <= 16k", 48, 16384, True)]


def _build(job):
    from tilelang_tutorial.lessons.mla.common import default_softmax_scale
    name, split = job
    f = ALL[name]
    if f is None:
        return op.build_mla_decode(128, "float16", split=split, schedule="seesaw", arch="sm_90a")
    return runtime.compile_kernel(f(128, "float16", split=split, softmax_scale=default_softmax_scale()),
                                  arch="sm_90a")


def compile_here(processes=False):
    t = time.time()
    jobs = [(name, split) for name in VARIANTS for split in (False, True)]
    if processes:
        failed = {j: e for j, e in runtime.precompile(jobs, "mla_qk_order_probe:_build").items() if e is not None}
        if failed:
            print(f"precompile failed: {failed}", flush=True)
    built = runtime.compile_parallel(jobs, _build, verbose=False)
    bad = {job: err for job, err in built.items() if isinstance(err, Exception)}
    print(f"{len(jobs)} kernels ready in {time.time() - t:.0f} s" + (f"; FAILED: {bad}" if bad else ""), flush=True)
    if bad:
        raise SystemExit(1)


def finished_within(seconds):
    """Wait for the GPU's work so far, at most ``seconds``; False if it has not finished."""
    import torch
    done = torch.cuda.Event()
    done.record()
    t = time.time()
    while not done.query():
        if time.time() - t > seconds:
            return False
        time.sleep(0.01)
    return True


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
            if not finished_within(20):
                print(f"  {name:10s} HANG: not finished after 20 s; the probe stops here", flush=True)
                os._exit(3)
            if name in DIAGNOSTIC:
                print(f"  {name:10s} not checked (a diagnostic: its output is wrong by design)", flush=True)
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
            print(f"  {name:10s} {'--' if name in DIAGNOSTIC else 'OK'} | rounds " + " ".join("refused" if v is None else f"{v:4.0f}" for v in got[name])
                  + f" | median {med:4.0f} TFLOP/s", flush=True)
        del x, ref, runs
        torch.cuda.empty_cache()
    print(f"mla_qk_order_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    if "--compile" in sys.argv:
        compile_here()
    else:
        main()
