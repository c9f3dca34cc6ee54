"""A time model for GEMM tiles past 128 rows, fitted to the swapped kernel's random-shape logs, and
what it would have chosen there. Runs anywhere (reads the logs, builds nothing):

    python3 swap_model.py [LOG ...]  # fit (on the logs named, else every log below), then: the rule,
                                     # the model's swap-or-rule choice, the best measured
    python3 swap_model.py --holdout  # each random run judged by constants fitted on the other logs

The model, per launch (one wave or more of blocks that each stream their tiles of A and B):

    t = c0 + max(compute, l2, dram)
    compute = waves x (2 x rows x cols x K) / Rc       Rc: one SM's multiply rate
    l2      = blocks x K x (rows + cols) x 2 bytes / BW_l2     every block streams its A and B tiles
    dram    = (M K + K N) x 2 bytes (+ split-K partials) / BW_dram

with ``rows x cols`` the block's tile (for the swapped kernel ``block_N x width``) and ``K`` the
block's share of K. ``c0`` is a fixed cost per call (the launch, and likely the write-back of the
dirty lines a flushed-L2 ``do_bench`` leaves; not measured apart). Fitted by a grid search on log error over every swapped
measurement of ``swap_ab_random_*.log`` and ``swap_ab.log``; the rule's own picks (one time per
shape) are then predicted by the same formula, out of the fit.

In-sample only: the decision it suggests must be checked on shapes drawn afresh (``swap_rule_check.py``)
before the op's rule takes it, and the constants are an H100's.
"""
import glob, math, re, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[2]), str(HERE)]      # the package, and the probes beside this script
SM_COUNT = 132
DRAM_TBPS = 3.3          # the H100's copy bandwidth, not fitted: no point of the H100 fit was bound by it
                         # (an H200's 4.3 would bind fewer still)


def read_logs(paths=None):
    """[{M, N, K, dt, torch, rule, rule_us, swaps: {(block_N, width): us}}] from the probes' logs"""
    rows = []
    for f in paths or sorted(glob.glob(str(HERE / "swap_ab_random_*.log"))) + [str(HERE / "swap_ab.log")]:
        cur = None
        for line in open(f):
            m = re.match(r"^(\d+)x(\d+)x(\d+) (\w+): torch ([\d.]+) us; rule (.*?) (?:\d+ blocks )?([\d.]+) us "
                         r"[\d.]+x (ok|WRONG)", line)
            if m:
                M, N, K = map(int, m.groups()[:3])
                cur = dict(M=M, N=N, K=K, dt=m.group(4), torch=float(m.group(5)), rule=m.group(6),
                           rule_us=float(m.group(7)), ok=m.group(8) == "ok", swaps={}, log=Path(f).name)
                rows.append(cur)
                continue
            m = re.match(r"^\s+swap (\d+)x(\d+) s\d+\s+\d+ blocks\s+([\d.]+) us\s+[\d.]+x (ok|WRONG)", line)
            if m and cur and m.group(4) == "ok":
                key = (int(m.group(1)), int(m.group(2)))
                cur["swaps"][key] = min(float(m.group(3)), cur["swaps"].get(key, math.inf))
    return rows


def predict(M, N, K, rows, cols, split, p):
    """the model's time (us) for tiles of rows x cols over M x N (grid of ceil(M/rows) x ceil(N/cols))"""
    Rc, BW, c0 = p
    blocks = math.ceil(M / rows) * math.ceil(N / cols) * split
    k = math.ceil(K / split)
    compute = math.ceil(blocks / SM_COUNT) * 2 * rows * cols * k / 1e6 / Rc
    l2 = blocks * k * (rows + cols) * 2 / 1e6 / BW
    dram = ((M * K + K * N) * 2 + (2 * split * M * N * 4 if split > 1 else 0)) / 1e6 / DRAM_TBPS
    return c0 + max(compute, l2, dram)


def swap_candidates(M, N):
    """every swapped tile swap_ab_random.py may time at M x N: {(block_N, width)} of one wave"""
    from swap_ab_random import swap_candidates as timed

    return {(bn, w) for bn, w, _ in timed(M, N, max_count=None)}


def bound_by(M, N, K, rows, cols, p):
    """which term of the model is the largest for one unsplit tiling: compute, l2 or dram"""
    Rc, BW, _ = p
    blocks = math.ceil(M / rows) * math.ceil(N / cols)
    terms = {"compute": math.ceil(blocks / SM_COUNT) * 2 * rows * cols * K / 1e6 / Rc,
             "l2": blocks * K * (rows + cols) * 2 / 1e6 / BW,
             "dram": (M * K + K * N) * 2 / 1e6 / DRAM_TBPS}
    return max(terms, key=terms.get)


def fit(rows):
    pts = [(r["M"], r["N"], r["K"], bn, w, us) for r in rows for (bn, w), us in r["swaps"].items()]
    best = None
    for Rc in [3.0 + 0.25 * i for i in range(21)]:           # TFLOP/s per SM
        for BW in [3.0 + 0.5 * i for i in range(19)]:         # TB/s, L2 to the SMs
            for c0 in range(0, 14, 2):                        # us
                err = [math.log(predict(M, N, K, w, bn, 1, (Rc, BW, c0)) / us) for M, N, K, bn, w, us in pts]
                rms = math.sqrt(sum(e * e for e in err) / len(err))
                if best is None or rms < best[0]:
                    best = (rms, (Rc, BW, c0))
    return best[1], best[0], len(pts)


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v))


def summary(xs):
    return (f"geomean {geomean(xs):.3f}x torch, min {min(xs):.2f}, below 0.80: {sum(x < 0.8 for x in xs)}, "
            f"below 0.90: {sum(x < 0.9 for x in xs)} of {len(xs)}")


def choose_and_time(r, p):
    """the rule's time at a logged shape, or the swapped tile's where the model prefers it (None: the
    model's pick was not among the tiles timed there)"""
    from tilelang_tutorial.lessons.gemm import rule

    M, N, K = r["M"], r["N"], r["K"]
    ch = rule.choose(M, N, K, r["dt"], "sm_90a")
    rule_pred = predict(M, N, K, ch.config.block_M, ch.config.block_N, ch.split, p)
    cands = swap_candidates(M, N)
    if cands:
        c = min(cands, key=lambda k: predict(M, N, K, k[1], k[0], 1, p))
        if predict(M, N, K, c[1], c[0], 1, p) < rule_pred:
            return r["swaps"].get(c)
    return r["rule_us"]


def holdout():
    """each random run's log judged by constants fitted on the other logs alone"""
    logs = sorted(glob.glob(str(HERE / "swap_ab_random_*.log"))) + [str(HERE / "swap_ab.log")]
    for held in logs[:-1]:
        p, rms, n = fit([r for r in read_logs([f for f in logs if f != held]) if r["ok"]])
        test = [r for r in read_logs([held]) if r["ok"]]
        times = [choose_and_time(r, p) for r in test]
        print(f"{Path(held).name}, constants fitted on the other logs {p}:")
        print(f"   the rule:                        {summary([r['torch'] / r['rule_us'] for r in test])}")
        print(f"   the model's swap-or-rule choice: "
              f"{summary([r['torch'] / (t or r['rule_us']) for r, t in zip(test, times)])} "
              f"({sum(t is None for t in times)} picks not timed, counted as the rule)")


if __name__ == "__main__":
    from tilelang_tutorial.lessons.gemm import rule

    if sys.argv[1:] == ["--holdout"]:
        holdout()
        sys.exit(0)
    rows = [r for r in read_logs(sys.argv[1:] or None) if r["ok"]]
    p, rms, n = fit(rows)
    print(f"fit on {n} swapped measurements at {len(rows)} shapes: Rc = {p[0]:.2f} TFLOP/s per SM, "
          f"L2 {p[1]:.1f} TB/s, c0 = {p[2]} us; rms log error {rms:.3f}")
    bound = [bound_by(r["M"], r["N"], r["K"], w, bn, p) for r in rows for bn, w in r["swaps"]]
    print("the largest term at those points: " + ", ".join(f"{k} {bound.count(k)}" for k in ("compute", "l2", "dram")))
    print(f"constants: {p[0]},{p[1]},{p[2]}")
    errs, chosen, best, old = [], [], [], []
    unmeasured = 0
    for r in rows:
        ch = rule.choose(r["M"], r["N"], r["K"], r["dt"], "sm_90a")
        rule_pred = predict(r["M"], r["N"], r["K"], ch.config.block_M, ch.config.block_N, ch.split, p)
        errs.append(math.log(rule_pred / r["rule_us"]))
        t = choose_and_time(r, p)
        unmeasured += t is None                     # counted at the rule's time
        old.append(r["torch"] / r["rule_us"])
        chosen.append(r["torch"] / (t or r["rule_us"]))
        best.append(r["torch"] / min([r["rule_us"]] + list(r["swaps"].values())))
    rms_rule = math.sqrt(sum(e * e for e in errs) / len(errs))
    print(f"the rule's picks under the same model: median log error {sorted(errs)[len(errs) // 2]:+.3f}, rms {rms_rule:.3f}")
    print(f"the rule:                         {summary(old)}")
    print(f"the model's swap-or-rule choice:  {summary(chosen)} ({unmeasured} picks not measured, counted as the rule)")
    print(f"the best measured at each shape:  {summary(best)}")
