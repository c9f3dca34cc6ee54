"""Goal 4 probe: does the KV stream cost the seesaw through the card's power limit (lower SM clocks)?

mla_occupancy_probe.py found the loads free up to 64 busy SMs and 15 % at 128-132. Here the
package's seesaw and the no-loads diagnostic (``../2026-12-06d/mla_chunks.py``, ``skip_loads=(0,
1)``; output wrong by design, timed only) each run back to back for about 4 s at 32 and 64
sequences (64 and 128 busy SMs, kv 8192, ``num_split = 1``) while ``nvidia-smi -lms 100`` samples the
SM clock, the power draw and the active clock-event reasons. Printed per run: TFLOP/s over the
loop (CUDA events), the median SM clock and power over the samples taken inside the loop, and the
clock-event reasons seen. If the package at 128 SMs runs at a lower SM clock than the diagnostic,
the power the memory system draws is what its loads cost.

    python3 mla_clocks_probe.py
    python3 mla_clocks_probe.py --dobench   # the same windows, timed as the benchmarks time

``--dobench``: each window repeats the benchmarks' own timing (timing.measure_or_note: do_bench with
the L2 flushed before each call, checked by CUDA events) for about 4 s instead of a loop of calls
back to back; printed: the median of those figures, with the clocks over the window.
"""
import os, statistics, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
OTHER = os.path.join(HERE, "..", "2026-12-06d")
sys.path.insert(0, HERE)
sys.path.insert(0, OTHER)
os.environ["PYTHONPATH"] = os.pathsep.join([HERE, OTHER, os.environ.get("PYTHONPATH", "")])
from mla_occupancy_probe import ALL, compile_here   # noqa: E402  (the same two kernels)
from tilelang_tutorial import checks, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402

FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active"
SECONDS = 4.0
DOBENCH = "--dobench" in sys.argv


def main():
    import torch

    print(torch.cuda.get_device_name(), flush=True)
    compile_here(processes=False)
    log = os.path.join(os.environ.get("OUT", "/tmp"), "mla_clocks_smi" + ("_dobench" if DOBENCH else "") + ".csv")
    fields = FIELDS
    if subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True).returncode:
        fields = fields.replace("clocks_event_reasons", "clocks_throttle_reasons")    # older drivers' name
    print("nvidia-smi fields:", fields, flush=True)
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "100"],
                           stdout=open(log, "w"), stderr=subprocess.STDOUT)
    time.sleep(1.0)
    windows = []
    try:
        for b in (32, 64):
            seqlens = [8192] * b
            x = bench._inputs(b, 128, seqlens, "float16", seed=700 + b)
            idx, ref = bench._reference(x)
            flops = bench._flops(128, seqlens)
            for name in ("package", "no loads", "package"):
                f = ALL[name]
                the_plan = op.plan(**x, num_split=1, program=f) if f else op.plan(**x, num_split=1, schedule="seesaw")
                out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
                the_plan.run(**x, out=out)
                torch.cuda.synchronize()
                if f is None:
                    ok = bench._check(out, idx, ref, "float16")
                    assert ok["ok"], ok
                # warm up 0.5 s, then the measured loop
                t_end = time.time() + 0.5
                while time.time() < t_end:
                    the_plan.run(**x, out=out)
                torch.cuda.synchronize()
                w0 = time.time()
                if DOBENCH:
                    figures = []
                    while time.time() - w0 < SECONDS:
                        t, why = timing.measure_or_note(lambda p=the_plan, o=out: p.run(**x, out=o))
                        if t is not None:
                            figures.append(flops / t.ms / 1e9)
                    w1 = time.time()
                    tf = statistics.median(figures) if figures else float("nan")
                else:
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    n = 0
                    start.record()
                    while time.time() - w0 < SECONDS:
                        for _ in range(20):
                            the_plan.run(**x, out=out)
                        n += 20
                        torch.cuda.synchronize()
                    stop.record()
                    torch.cuda.synchronize()
                    w1 = time.time()
                    tf = flops / (start.elapsed_time(stop) / n) / 1e9
                windows.append((f"b{b} ({2 * b} SMs) {name}", w0 + 0.3, w1 - 0.1, tf))
                time.sleep(1.0)    # a gap between windows, so each one's samples are its own
            del x, ref
            torch.cuda.empty_cache()
    finally:
        time.sleep(0.3)
        smi.terminate()
        smi.wait()
    rows = []
    for line in open(log):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 7:
            continue
        try:
            t = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + parts[0].split(".")[1])
            rows.append((t, float(parts[1]), float(parts[2]), float(parts[3]), float(parts[4]), float(parts[5]), parts[6]))
        except (ValueError, IndexError):
            continue
    print(f"{len(rows)} nvidia-smi samples (every 100 ms), raw in {os.path.basename(log)}", flush=True)
    for label, a, z, tf in windows:
        inside = [r for r in rows if a <= r[0] <= z]
        if not inside:
            print(f"  {label:28s} {tf:4.0f} TFLOP/s | no samples inside the window", flush=True)
            continue
        sm = statistics.median(r[1] for r in inside)
        mem = statistics.median(r[2] for r in inside)
        pw = statistics.median(r[3] for r in inside)
        lim = inside[0][4]
        temp = max(r[5] for r in inside)
        reasons = sorted({r[6] for r in inside})
        print(f"  {label:28s} {tf:4.0f} TFLOP/s | SM clock {sm:5.0f} MHz (min {min(r[1] for r in inside):4.0f}) "
              f"mem {mem:4.0f} MHz | power {pw:5.1f} W of {lim:.0f} | max {temp:.0f} C | reasons {reasons} "
              f"| {len(inside)} samples", flush=True)


if __name__ == "__main__":
    main()
