"""Benchmark suite ``mla_timeline``: where the time of one batch-1 MLA decode call goes.

At batch 1 (h_q = 128, kv 32768) the kernel misses its 300 TFLOP/s goal (``results/mla.json``).
This suite records, for the default schedule, the kernels of one call as the GPU ran them
(:func:`timing.kernel_timeline`: the torch profiler after an L2 flush, medians over 30 calls)
next to the call's CUDA-event time (:func:`timing.median_ms`, as in the ``mla`` suite):

* kv 4096 / 8192 / 16384 / 32768 with 64 splits: 1, 2, 4 and 8 KV blocks per CTA, 128 CTAs;
* kv 64 without a split: one block, two CTAs -- the chain of one CTA with nothing to contend with.

:func:`summarize` fits the attention kernel's time as ``fixed + per_block * blocks``, and
:func:`figure` draws each call as launch gap, attention kernel, gap and combine kernel.
"""
from __future__ import annotations

import math
import statistics
import time

from ... import checks, results, runtime, timing
from . import bench as mla
from . import op as K
from .common import BLOCK_H, PAGE_SIZE, default_softmax_scale

SUITE = "mla_timeline"
COMMAND = "python -m tilelang_tutorial bench mla_timeline"
H_Q = 128
#: (kv_len, num_split) of the recorded calls
POINTS = ((64, 1), (4096, 64), (8192, 64), (16384, 64), (32768, 64))
QUICK_POINTS = ((64, 1), (8192, 64), (32768, 64))
#: the goal at batch 1, kv 32768 (``bench.GOALS``), for the budget line of the summary and the figure
GOAL_TFLOPS = 300


def blocks_per_cta(kv_len: int, num_split: int, block_n: int = 64) -> int:
    return math.ceil(math.ceil(kv_len / block_n) / num_split)


def _timeline_us(calls: list[list[dict]], n_kernels: int) -> dict:
    calls = [c for c in calls if len(c) == n_kernels]
    if not calls:
        raise RuntimeError(f"no profiled call had {n_kernels} kernels")
    med = lambda f: statistics.median(f(c) for c in calls)  # noqa: E731
    t = {"launch_gap": med(lambda c: c[0]["start_us"]),
         "attention": med(lambda c: c[0]["end_us"] - c[0]["start_us"])}
    if n_kernels == 2:
        t["between_kernels"] = med(lambda c: c[1]["start_us"] - c[0]["end_us"])
        t["combine"] = med(lambda c: c[1]["end_us"] - c[1]["start_us"])
    t["span"] = med(lambda c: c[-1]["end_us"])
    return t


def _measure(kv_len: int, num_split: int, schedule: str, seed: int) -> dict:
    import torch

    x = mla._inputs(1, H_Q, [kv_len], "float16", seed)
    idx, ref = mla._reference(x)
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
    the_plan = K.plan(**x, num_split=num_split, schedule=schedule)

    def call():
        the_plan.run(**x, out=out)

    call()
    torch.cuda.synchronize()
    ok = mla._check(out, idx, ref, "float16")
    t = timing.measure(call)
    event_ms = t.ms
    tl = _timeline_us(timing.kernel_timeline(call), 2 if num_split > 1 else 1)
    flops = mla._flops(H_Q, [kv_len])
    rec = results.make_record(
        suite=SUITE, kernel="mla_decode",
        config={"num_split": num_split, "schedule": schedule, "label": "b1 timeline", "path": "plan.run",
                "softmax_scale": default_softmax_scale(), "arch": runtime.current_arch()},
        shape={"batch": 1, "h_q": H_Q, "kv_len": kv_len, "page_size": PAGE_SIZE,
               "blocks_per_cta": blocks_per_cta(kv_len, num_split),
               "ctas": math.ceil(H_Q / BLOCK_H) * num_split},
        dtype="float16", metric="latency", value=event_ms * 1e3, unit="us", latency_ms=event_ms, timing=t,
        flops=flops, nbytes=mla._bytes(1, H_Q, [kv_len]), correctness=ok)
    rec["timeline_us"] = tl
    rec["tflops"] = flops / (event_ms * 1e-3) / 1e12
    print(f"kv={kv_len:<6} split={num_split:<3} blocks/CTA={rec['shape']['blocks_per_cta']:<2} "
          f"event {event_ms * 1e3:6.1f} us  " + "  ".join(f"{k} {v:5.1f}" for k, v in tl.items())
          + f"  [{'ok' if ok['ok'] else 'FAIL'} {ok['rel_error']:.1e}]", flush=True)
    return rec


def run(quick: bool = False) -> results.Run:
    """Record the timeline of each point with the default schedule on this GPU."""
    runtime.require_gpu("the mla_timeline benchmark")
    t0 = time.time()
    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    schedule = K.resolve_schedule(None)
    pts = QUICK_POINTS if quick else POINTS
    K.prebuild([dict(h_q=H_Q, split=s, schedule=schedule) for s in sorted({ns > 1 for _, ns in pts})])
    recs = [_measure(kv, ns, schedule, seed=200 + i) for i, (kv, ns) in enumerate(pts)]
    print(f"mla_timeline: {len(recs)} records in {time.time() - t0:.0f} s", flush=True)
    return results.Run(recs, prov)


# ------------------------------------------------------------------------------------------
# reading the records (any machine)
# ------------------------------------------------------------------------------------------
def fit_attention(records) -> tuple[float, float]:
    """Least-squares ``attention_us = fixed + per_block * blocks`` over the split records:
    returns ``(fixed, per_block)`` in microseconds."""
    pts = [(r["shape"]["blocks_per_cta"], r["timeline_us"]["attention"])
           for r in records if r["config"]["num_split"] > 1]
    if len({b for b, _ in pts}) < 2:
        raise ValueError("need split records with at least two different blocks per CTA")
    n = len(pts)
    mb, mt = sum(b for b, _ in pts) / n, sum(t for _, t in pts) / n
    per_block = sum((b - mb) * (t - mt) for b, t in pts) / sum((b - mb) ** 2 for b, _ in pts)
    return mt - per_block * mb, per_block


def goal_budget_us(kv_len: int, tflops: float = GOAL_TFLOPS) -> float:
    """The time one batch-1 call may take to reach ``tflops`` at ``kv_len``."""
    return mla._flops(H_Q, [kv_len]) / (tflops * 1e12) * 1e6


def summarize(records) -> str:
    """The recorded timelines as a table, the fit, and the goal's budget at the longest kv."""
    recs = sorted(records, key=lambda r: (r["config"]["num_split"], r["shape"]["kv_len"]))
    lines = [f"{'kv':>6} {'split':>5} {'blocks/CTA':>10} {'launch gap':>10} {'attention':>9} "
             f"{'gap':>5} {'combine':>7} {'event time':>10} {'TFLOP/s':>8}   (us)"]
    for r in recs:
        t = r["timeline_us"]
        opt = lambda k: f"{t[k]:.1f}" if k in t else "-"  # noqa: E731
        lines.append(f"{r['shape']['kv_len']:6d} {r['config']['num_split']:5d} {r['shape']['blocks_per_cta']:10d} "
                     f"{t['launch_gap']:10.1f} {t['attention']:9.1f} {opt('between_kernels'):>5} "
                     f"{opt('combine'):>7} {r['value']:10.1f} {r['tflops']:8.0f}")
    fixed, per_block = fit_attention(recs)
    longest = max((r for r in recs if r["config"]["num_split"] > 1), key=lambda r: r["shape"]["kv_len"])
    t = longest["timeline_us"]
    kv = longest["shape"]["kv_len"]
    lines += [
        "",
        f"attention kernel ~ {fixed:.1f} us + {per_block:.2f} us per KV block of each CTA "
        f"(least squares over the split rows)",
        f"kv {kv}: {GOAL_TFLOPS} TFLOP/s allows {goal_budget_us(kv):.1f} us per call; recorded: "
        f"{t['launch_gap']:.1f} launch gap + {t['attention']:.1f} attention + "
        f"{t.get('between_kernels', 0):.1f} gap + {t.get('combine', 0):.1f} combine = {t['span']:.1f} us "
        f"(CUDA events: {longest['value']:.1f} us)",
    ]
    return "\n".join(lines)


def figure(records):
    """Each recorded call as a horizontal bar: launch gap, attention, gap, combine."""
    import matplotlib.pyplot as plt

    recs = sorted(records, key=lambda r: (r["config"]["num_split"], r["shape"]["kv_len"]))
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(recs) + 1.5))
    parts = (("launch_gap", "launch gap", "#cccccc"), ("attention", "attention kernel", "#4c72b0"),
             ("between_kernels", "gap", "#eeeeee"), ("combine", "combine kernel", "#dd8452"))
    labels = []
    for i, r in enumerate(recs):
        left = 0.0
        for key, name, color in parts:
            w = r["timeline_us"].get(key)
            if w:
                ax.barh(i, w, left=left, color=color, edgecolor="k", lw=0.5, label=name)
                left += w
        labels.append(f"kv {r['shape']['kv_len']}, split {r['config']['num_split']}\n"
                      f"{r['shape']['blocks_per_cta']} block(s) per CTA")
    kv = max(r["shape"]["kv_len"] for r in recs)
    ax.axvline(goal_budget_us(kv), color="r", ls="--",
               label=f"{GOAL_TFLOPS} TFLOP/s at kv {kv}: {goal_budget_us(kv):.1f} us")
    ax.set_yticks(range(len(recs)), labels)
    ax.set_xlabel("microseconds after the L2 flush (recorded on the GPU, medians)")
    ax.set_title(f"One batch-1 MLA decode call (h_q = {H_Q}), schedule {recs[0]['config']['schedule']!r}")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))       # one legend entry per part
    ax.legend(list(unique.values()), list(unique.keys()), loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
