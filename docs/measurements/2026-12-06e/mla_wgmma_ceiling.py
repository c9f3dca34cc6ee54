"""Goal 4 probe: how much tensor work per clock do the seesaw's wgmma shapes allow, with no loads,
no softmax and no barriers between warpgroups?

The seesaw does 63-65 % of the tensor peak per clock (4,096 FLOP per SM per clock) even where its
KV loads cost nothing (64 busy SMs, ``mla_occupancy_probe_h100.log``) and 68 % with no loads at all
(``mla_clocks_probe_h100.log``). Here one CTA per SM keeps a Q tile (64 x 576) and a K block
(64 x 576), a P tile (64 x 64) and a V half (64 x 256) in shared memory, loaded once, and each of
its warpgroups issues only the seesaw's products, over and over:

* ``qk``: ``S = Q K^T`` (three wgmma chains: 256 + 256 + 64 columns of K; m64n64, both operands in
  shared memory), then waits for it;
* ``pv``: ``O += P V_half`` (m64n256, both in shared memory), then waits;
* ``mix``: one ``qk`` and two ``pv``, the tensor work of one warpgroup in one pair of blocks.

With one warpgroup (128 threads) or two (256, the seesaw's consumers) per CTA, on 64 and 132 SMs.
Each configuration runs back to back for about 2 s while ``nvidia-smi -lms 100`` samples the SM
clock; printed: TFLOP/s (CUDA events over the loop), the median clock, and FLOP per SM per clock
as a share of 4,096. Every product accumulates into its warpgroup's running S or O (never cleared
in the loop) and both are stored at the end, so no product's result is dead; the values are not
checked (they are not the question here). A first form cleared S at each ``qk`` and measured
``qk`` at 164-183 % of the peak (``mla_wgmma_ceiling_cleared_h100.log``): products whose results
the next clear overwrote were not all executed.

    python3 mla_wgmma_ceiling.py            # on a GPU
    python3 mla_wgmma_ceiling.py --compile  # here
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.
import os, statistics, subprocess, sys, time

MODES = {"qk": 2 * 64 * 64 * 576, "pv": 2 * 64 * 256 * 64, "mix": 2 * 64 * 64 * 576 + 2 * (2 * 64 * 256 * 64)}
REPS = 2048


def program(mode, warpgroups, ctas):
    import tilelang  # noqa: F401
    import tilelang.language as T

    dt, acc = "float16", "float32"

    @T.macro
    def products(Q_l, Q_r, Q_pe, K_l, K_r, K_pe, P_s, V_s, acc_s, acc_o):
        T.fill(acc_o, 0)
        T.fill(acc_s, 0)
        for r in T.serial(REPS):
            if mode in ("qk", "mix"):
                T.wgmma_gemm(Q_l, K_l, acc_s, transpose_B=True)
                T.wgmma_gemm(Q_r, K_r, acc_s, transpose_B=True)
                T.wgmma_gemm(Q_pe, K_pe, acc_s, transpose_B=True)
                T.wait_wgmma(0)
            if mode in ("pv", "mix"):
                T.wgmma_gemm(P_s, V_s, acc_o)
                T.wait_wgmma(0)
            if mode == "mix":
                T.wgmma_gemm(P_s, V_s, acc_o)
                T.wait_wgmma(0)

    @T.prim_func
    def ceiling(Q: T.Tensor([64, 576], dt), K: T.Tensor([64, 576], dt),
                S_out: T.Tensor([ctas, 2, 64, 64], acc), O_out: T.Tensor([ctas, 2, 64, 256], acc)):
        with T.Kernel(ctas, threads=128 * warpgroups) as bx:
            Q_l = T.alloc_shared([64, 256], dt)
            Q_r = T.alloc_shared([64, 256], dt)
            Q_pe = T.alloc_shared([64, 64], dt)
            K_l = T.alloc_shared([64, 256], dt)
            K_r = T.alloc_shared([64, 256], dt)
            K_pe = T.alloc_shared([64, 64], dt)
            P_s = T.alloc_shared([64, 64], dt)
            V_s = T.alloc_shared([64, 256], dt)
            acc_s0 = T.alloc_fragment([64, 64], acc)
            acc_s1 = T.alloc_fragment([64, 64], acc)
            acc_o0 = T.alloc_fragment([64, 256], acc)
            acc_o1 = T.alloc_fragment([64, 256], acc)
            T.copy(Q[:, 0:256], Q_l)
            T.copy(Q[:, 256:512], Q_r)
            T.copy(Q[:, 512:576], Q_pe)
            T.copy(K[:, 0:256], K_l)
            T.copy(K[:, 256:512], K_r)
            T.copy(K[:, 512:576], K_pe)
            T.copy(Q[:, 512:576], P_s)
            T.copy(K[:, 0:256], V_s)
            tx = T.get_thread_binding()
            if tx < 128:
                products(Q_l, Q_r, Q_pe, K_l, K_r, K_pe, P_s, V_s, acc_s0, acc_o0)
                T.copy(acc_s0, S_out[bx, 0, :, :])
                T.copy(acc_o0, O_out[bx, 0, :, :])
            else:
                products(Q_l, Q_r, Q_pe, K_l, K_r, K_pe, P_s, V_s, acc_s1, acc_o1)
                T.copy(acc_s1, S_out[bx, 1, :, :])
                T.copy(acc_o1, O_out[bx, 1, :, :])

    return ceiling


CONFIGS = [(mode, wg, ctas) for ctas in (64, 132) for wg in (1, 2) for mode in MODES]


def build(job):
    from tilelang_tutorial import runtime
    return runtime.compile_kernel(program(*job), arch="sm_90a")


def compile_here():
    from tilelang_tutorial import runtime
    t = time.time()
    failed = {j: e for j, e in runtime.precompile(CONFIGS, "mla_wgmma_ceiling:build").items() if e is not None}
    if failed:
        print(f"precompile failed: {failed}", flush=True)
    built = runtime.compile_parallel(CONFIGS, build, verbose=False)
    bad = {job: err for job, err in built.items() if isinstance(err, Exception)}
    print(f"{len(CONFIGS)} kernels ready in {time.time() - t:.0f} s" + (f"; FAILED: {bad}" if bad else ""), flush=True)
    return built


def main():
    import torch

    print(torch.cuda.get_device_name(), flush=True)
    built = compile_here()
    q = torch.randn(64, 576, device="cuda", dtype=torch.float16)
    k = torch.randn(64, 576, device="cuda", dtype=torch.float16)
    log = os.path.join(os.environ.get("OUT", "/tmp"), "mla_wgmma_ceiling_smi.csv")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "100"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    time.sleep(1.0)
    windows = []
    try:
        for job in CONFIGS:
            kernel = built[job]
            if isinstance(kernel, Exception):
                continue
            mode, wg, ctas = job
            s_out = torch.empty(ctas, 2, 64, 64, device="cuda", dtype=torch.float32)
            o_out = torch.empty(ctas, 2, 64, 256, device="cuda", dtype=torch.float32)
            kernel(q, k, s_out, o_out)
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            n, w0 = 0, time.time()
            start.record()
            while time.time() - w0 < 2.0:
                for _ in range(10):
                    kernel(q, k, s_out, o_out)
                n += 10
                torch.cuda.synchronize()
            stop.record()
            torch.cuda.synchronize()
            w1 = time.time()
            flops = MODES[mode] * REPS * wg * ctas
            windows.append((job, w0 + 0.3, w1 - 0.1, flops / (start.elapsed_time(stop) / n) / 1e9))
            time.sleep(0.5)
    finally:
        time.sleep(0.3)
        smi.terminate()
        smi.wait()
    rows = []
    for line in open(log):
        parts = [p.strip() for p in line.split(",")]
        try:
            whole, frac = parts[0].split(".")
            rows.append((time.mktime(time.strptime(whole, "%Y/%m/%d %H:%M:%S")) + float("0." + frac),
                         float(parts[1]), float(parts[2]), parts[3]))
        except (ValueError, IndexError):
            continue
    print(f"{len(rows)} nvidia-smi samples, raw in {os.path.basename(log)}", flush=True)
    print("mode wgs  SMs | TFLOP/s | SM clock | power | FLOP/SM/clock (share of 4096)", flush=True)
    for (mode, wg, ctas), a, z, tf in windows:
        inside = [r for r in rows if a <= r[0] <= z]
        if not inside:
            print(f"{mode:4s} {wg:3d} {ctas:4d} | {tf:7.1f} | no samples", flush=True)
            continue
        clk = statistics.median(r[1] for r in inside)
        per = tf * 1e12 / (clk * 1e6 * ctas)
        print(f"{mode:4s} {wg:3d} {ctas:4d} | {tf:7.1f} | {clk:5.0f} MHz | {statistics.median(r[2] for r in inside):5.1f} W "
              f"| {per:6.0f} ({per / 4096:5.1%}) | reasons {sorted({r[3] for r in inside})}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if "--compile" in sys.argv:
        compile_here()
    else:
        main()
