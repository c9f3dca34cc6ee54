"""One device call for the next session with an H200: the swapped kernel's random shapes twice
(``swap_ab_random.py``, drawn afresh), the model refitted on those two logs alone
(``swap_model.py LOG LOG``), then ``swap_rule_check.py`` on shapes drawn afresh with the refitted
constants. Every log lands beside this script and, on the runner, in ``$OUT``.

    bash docs/measurements/runner/run.sh probe:docs/measurements/2026-12-05b/swap_h200.py   (PROBE_LIMIT=560)

Written 2026-12-05 without a device left to run it; about 7 minutes by the H100's timings (two
random runs of 40 shapes at 95 s each, the check's 48 shapes about 4 minutes).
"""
import os, re, shutil, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(args, log):
    t0 = time.time()
    with open(HERE / log, "w") as out:
        rc = subprocess.call([sys.executable, *args], cwd=HERE, stdout=out, stderr=subprocess.STDOUT)
    print(f"{' '.join(args)} -> {log}: rc {rc}, {time.time() - t0:.0f} s", flush=True)
    if os.environ.get("OUT"):
        shutil.copy(HERE / log, Path(os.environ["OUT"]) / log)
    return rc


if __name__ == "__main__":
    import torch

    gpu = torch.cuda.get_device_name(0).replace(" ", "_") if torch.cuda.is_available() else "no_gpu"
    logs = [f"swap_random_{gpu}_{k}.log" for k in "ab"]
    for log in logs:
        run(["swap_ab_random.py", "fresh", "40"], log)
    if run(["swap_model.py", *logs], f"swap_model_{gpu}.log"):
        sys.exit(1)
    constants = re.search(r"^constants: (\S+)$", (HERE / f"swap_model_{gpu}.log").read_text(), re.M).group(1)
    print(f"constants fitted on {gpu}: {constants}", flush=True)
    run(["swap_rule_check.py", "fresh", "48", constants], f"swap_rule_check_{gpu}.log")
    print((HERE / f"swap_rule_check_{gpu}.log").read_text().rsplit("\n\n", 1)[-1])
