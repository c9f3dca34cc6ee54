"""Goal 4, next step (prepared, not yet run): where the seesaw's clocks between products go, per
instruction. Nsight Compute's warp-state samples by program counter (the source page, SASS) for one
``plan.run`` at b64 kv 8192 (fp16, h_q 128, the package's default schedule), after warm-up, between
``cudaProfilerStart/Stop``.

The seesaw's products alone keep the tensor pipe 94-98 % busy per clock, the kernel 63-68 %
(``mla_wgmma_ceiling_h100.log``, ``mla_clocks_probe_h100.log``): the samples that are not waiting on a
``wgmma`` say which instructions hold the two consumer warpgroups (the softmax, the waits on the
other warpgroup's barriers, P's stores, the rescales).

    python3 mla_ncu_source.py          # on a GPU with ncu: profiles itself, writes to $OUT
    python3 mla_ncu_source.py --child  # the workload alone (what ncu runs)

Writes ``mla_seesaw.ncu-rep``, ``mla_seesaw_details.txt`` (every section) and
``mla_seesaw_source_sass.csv`` (per-instruction samples) under ``$OUT``.
"""
import os, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def child():
    import torch
    from tilelang_tutorial.lessons.mla import op, reference

    x = reference.make_paged_inputs(64, 128, [8192] * 64, dtype=torch.float16, device="cuda", seed=1)
    the_plan = op.plan(**x)
    print(f"b64 kv 8192 h_q 128 fp16: schedule {the_plan.schedule}, num_split {the_plan.num_split}", flush=True)
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
    rep = os.path.join(out, "mla_seesaw")
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--set", "full",
           "--import-source", "yes", "--kernel-name", "regex:mla_decode", "-f", "-o", rep,
           sys.executable, os.path.abspath(__file__), "--child"]
    print(" ".join(cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    print(f"ncu rc={rc}", flush=True)
    for page, args, name in (("details", [], "mla_seesaw_details.txt"),
                             ("source", ["--csv", "--print-source", "sass"], "mla_seesaw_source_sass.csv")):
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
