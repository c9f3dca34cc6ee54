"""Goal 4: the same per-instruction profile as ``../2026-12-06e/mla_ncu_source.py``, of
``../2026-12-06d/mla_pairmax.py`` (FlashMLA's order of products: each warpgroup's own ``P V`` first,
each half of a block freed as its last product finishes), which was correct and 19-27 % slower than
the seesaw. Why slower: where its warps wait, beside the seesaw's (``mla_ncu_regions_h100.log``).

One ``plan.run`` at b64 kv 8192 (fp16, h_q 128, ``num_split = 1``: the probe kernel has no split
form), after warm-up and a check against the fp32 reference, between ``cudaProfilerStart/Stop``.

    python3 mla_ncu_pairmax.py [unserialized|selfload]   # on a GPU with ncu: profiles itself (or
                                            # the form in mla_pairmax_<that>.py here), writes to $OUT
    python3 mla_ncu_pairmax.py --child  # the workload alone (what ncu runs)
"""
import os, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06d"))


# which form of the probe kernel: ../2026-12-06d/mla_pairmax.py, or mla_pairmax_<VARIANT>.py here
VARIANT = next((v for v in ("unserialized", "selfload") if v in sys.argv), "pairmax")
sys.path.insert(0, HERE)


def child():
    import torch
    import importlib
    mla_pairmax = importlib.import_module("mla_pairmax" if VARIANT == "pairmax" else "mla_pairmax_" + VARIANT)
    from tilelang_tutorial.lessons.mla import op, reference

    def pairmax(h_q, dtype, *, split, softmax_scale=None, num_stages=2):
        return mla_pairmax.mla_decode_pairmax_program(h_q, dtype, split=split, softmax_scale=softmax_scale)

    x = reference.make_paged_inputs(64, 128, [8192] * 64, dtype=torch.float16, device="cuda", seed=1)
    the_plan = op.plan(**x, num_split=1, program=pairmax)
    print(f"b64 kv 8192 h_q 128 fp16: {VARIANT}, num_split {the_plan.num_split}", flush=True)
    for _ in range(3):
        out = the_plan.run(**x)
    torch.cuda.synchronize()
    ref = reference.mla_decode_reference(**x)
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    print(f"rel error {err:.2e}", flush=True)
    assert err < 1e-2, err
    torch.cuda.cudart().cudaProfilerStart()
    the_plan.run(**x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main():
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
                                       if os.path.exists(p)), None)
    if ncu is None:
        print("no ncu on this machine: nothing profiled")
        return 2
    out = os.environ.get("OUT", "/tmp")
    rep = os.path.join(out, "mla_" + VARIANT)
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--set", "full",
           "--import-source", "yes", "-f", "-o", rep, sys.executable, os.path.abspath(__file__), "--child", VARIANT]
    print(" ".join(cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    print(f"ncu rc={rc}", flush=True)
    for page, args, name in (("details", [], f"mla_{VARIANT}_details.txt"),
                             ("source", ["--csv", "--print-source", "sass"], f"mla_{VARIANT}_source_sass.csv")):
        with open(os.path.join(out, name), "w") as f:
            r = subprocess.run([ncu, "--import", rep + ".ncu-rep", "--page", page, *args], stdout=f,
                               stderr=subprocess.STDOUT)
        print(f"{page}: rc={r.returncode} -> {name}", flush=True)
    return rc


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
