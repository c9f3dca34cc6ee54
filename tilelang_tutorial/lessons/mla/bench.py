"""Benchmark suite ``mla``: the TileLang MLA decode schedules against FlashInfer and FlashMLA.

``run()`` measures on the GPU it runs on and returns records for ``results/mla.json``
(``python -m tilelang_tutorial bench mla``). Every point uses fresh random inputs with a
shuffled page table, checks each implementation against the fp32 reference, and reports:

* compute-bound points (h_q = 128): TFLOP/s with FLOPs = 2 * h_q * (576 + 512) * sum(seqlens),
  compared with the measured bf16/fp16 torch matmul ceiling;
* memory-bound points (h_q = 16): TB/s with bytes = KV read (576 * 2 bytes per token) + q + o,
  compared with the measured device copy bandwidth.

Each point is measured with every TileLang schedule that builds here (``auto``, the kernel
notebook 04 writes, and on sm_90a notebook 04b's hand-written ``ws`` and ``seesaw``), one record
each, through ``plan.run`` (the op's fast path); for the default schedule, ``op_path`` also times
``plan.run`` back to back against its bare launch (:func:`call_paths`; the one-shot ``mla_decode``
is timed against ``plan.run`` by the ``mla_host`` suite). The peers, measured once per point and attached
to each record: FlashInfer's MLA decode (the record's reference) and FlashMLA's own kernel
(:mod:`.flashmla_peer`, where its library is built); each records why it is missing otherwise.
"""
from __future__ import annotations

import time

from ... import checks, results, runtime, timing
from . import flashinfer_peer, flashmla_peer, op
from .common import DIM_NOPE, DIM_PE, PAGE_SIZE, default_softmax_scale
from .reference import make_paged_inputs, mla_decode_reference

SUITE = "mla"
COMMAND = "python -m tilelang_tutorial bench mla"


def _flops(h_q, seqlens) -> float:
    return 2.0 * h_q * (DIM_NOPE + DIM_PE + DIM_NOPE) * float(sum(seqlens))


def _bytes(b, h_q, seqlens, elem=2) -> float:
    kv = float(sum(seqlens)) * (DIM_NOPE + DIM_PE) * elem
    q = b * h_q * (DIM_NOPE + DIM_PE) * elem
    o = b * h_q * DIM_NOPE * elem
    return kv + q + o


def sample_reference(x, sample: int = 16):
    """The fp32 reference on at most ``sample`` sequences of the batch ``x``: ``(their index, it)``."""
    import torch

    b = x["q_nope"].shape[0]
    idx = torch.arange(b) if b <= sample else torch.linspace(0, b - 1, sample).long()
    sub = {k: (v[idx.to(v.device)] if k in ("q_nope", "q_pe", "block_table", "cache_seqlens") else v)
           for k, v in x.items()}
    return idx, mla_decode_reference(**sub)


def _check(out, idx, ref, dtype):
    cmp = checks.compare(out[idx.to(out.device)].float(), ref, tolerance=checks.TOLERANCE[dtype])
    return {"rel_error": cmp.rel_error, "max_abs_error": cmp.max_abs_error,
            "unwritten": cmp.unwritten, "tolerance": cmp.tolerance, "ok": cmp.ok,
            "checked_sequences": int(idx.numel())}


def schedules_measured() -> list[str]:
    """The TileLang schedules each point is measured with: the default here first, then the
    others that build here (the hand-written ones need sm_90a)."""
    here = op.SCHEDULES if runtime.current_arch() == "sm_90a" else ("auto",)
    return list(dict.fromkeys([op.resolve_schedule(None), *here]))


def call_paths(the_plan, x, out) -> dict:
    """``plan.run``, timed back to back (host time counted per call), next to the plan's compiled
    kernel launched directly the same way, and as a ratio to that bare launch."""
    args = (x["q_nope"], x["q_pe"], x["kv_cache"].view(-1, DIM_NOPE), x["pe_cache"].view(-1, DIM_PE),
            x["block_table"], x["cache_seqlens"], the_plan.lse, the_plan.o_partial, out)
    calls = {
        "prepared_launch": lambda: the_plan.kernel(*args),
        "plan_run": lambda: the_plan.run(**x, out=out),
    }
    paths = {}
    for name, fn in calls.items():
        t, why = timing.measure_or_note(fn, regime="call")
        paths[name] = {"latency_ms": t.ms, "timing": t.as_dict()} if t else {"error": why}
    base = paths["prepared_launch"].get("latency_ms")
    for p in paths.values():
        if base and p.get("latency_ms"):
            p["ratio_to_prepared_launch"] = p["latency_ms"] / base
    return paths


def library_peer(availability, make, idx, ref, dtype) -> dict:
    """A peer from another library: made once (its planning), checked against the reference on
    its output (``.out``), then its ``run`` timed; or why not."""
    import torch

    ok, version = availability
    if not ok:
        return {"error": version}
    try:
        peer = make()
        peer.run()
        torch.cuda.synchronize()
        correct = _check(peer.out, idx, ref, dtype)
        t, why = timing.measure_or_note(peer.run)
        rec = {"latency_ms": t.ms, "timing": t.as_dict()} if t else {"error": why}
        rec.update(correctness=correct, version=version)
        return rec
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "version": version}


def _measure_point(*, b, h_q, seqlens, dtype, num_split, ceilings, memory_bound, label, seed) -> list[dict]:
    """One record per TileLang schedule (:func:`schedules_measured`), the peers measured once
    and attached to each. The record's figure is ``plan.run`` timed as a kernel."""
    import torch

    x = make_paged_inputs(b, h_q, seqlens, dtype=getattr(torch, dtype), device="cuda", seed=seed, extra_pages=0)
    idx, ref = sample_reference(x)
    max_len = max(seqlens)
    auto_split = num_split is None
    if auto_split:
        num_split = op.choose_num_split(b, h_q, max_len, sm_count=op.sm_count())

    measured, paths = {}, {}
    for schedule in schedules_measured():
        out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
        the_plan = op.plan(**x, num_split=num_split, schedule=schedule)
        the_plan.run(**x, out=out)
        torch.cuda.synchronize()
        measured[schedule] = (_check(out, idx, ref, dtype), timing.measure(lambda: the_plan.run(**x, out=out)))
        if schedule == op.resolve_schedule(None):      # the calls a user makes: the default schedule's
            paths[schedule] = call_paths(the_plan, x, out)
        del out, the_plan

    peers = {
        "flashinfer": library_peer(flashinfer_peer.available(), lambda: flashinfer_peer.FlashInferMLA(**x),
                                   idx, ref, dtype),
        "flashmla": library_peer(flashmla_peer.available(), lambda: flashmla_peer.FlashMLADecode(**x),
                                 idx, ref, dtype),
    }
    flops, nbytes = _flops(h_q, seqlens), _bytes(b, h_q, seqlens)
    for p in peers.values():
        if p.get("latency_ms"):
            p["tflops"] = flops / (p["latency_ms"] * 1e-3) / 1e12
            p["tbps"] = nbytes / (p["latency_ms"] * 1e-3) / 1e12

    if memory_bound:
        metric, unit, key = "bandwidth", "TB/s", "tbps"
        ceiling = {"name": "device copy bandwidth (measured)", "value": ceilings.copy_gbps / 1e3, "unit": "TB/s"}
    else:
        metric, unit, key = "throughput", "TFLOP/s", "tflops"
        ceiling = {"name": f"torch {dtype} matmul {ceilings.matmul_size}^3 (measured)",
                   "value": ceilings.matmul_tflops[dtype], "unit": "TFLOP/s"}
    fi_val = peers["flashinfer"].get(key)
    reference = ({"name": f"FlashInfer {peers['flashinfer'].get('version')} ({flashinfer_peer.BACKEND})",
                  "value": fi_val, "unit": unit} if fi_val else None)
    recs = []
    for schedule, (correct, t) in measured.items():
        value = (nbytes if memory_bound else flops) / (t.ms * 1e-3) / 1e12
        rec = results.make_record(
            suite=SUITE, kernel="mla_decode",
            config={"num_split": num_split, "auto_split": auto_split, "schedule": schedule, "path": "plan.run",
                    "label": label, "softmax_scale": default_softmax_scale(), "arch": runtime.current_arch()},
            shape={"batch": b, "h_q": h_q, "kv_len": max_len, "mean_kv_len": sum(seqlens) / b,
                   "page_size": PAGE_SIZE},
            dtype=dtype, metric=metric, value=value, unit=unit, latency_ms=t.ms, timing=t,
            reference=reference, ceiling=ceiling, peers=peers, correctness=correct,
            flops=flops, nbytes=nbytes,
        )
        rec["ceilings"] = ceilings.as_dict()
        rec["op_path"] = paths.get(schedule, {"note": "measured for the default schedule only"})
        recs.append(rec)
    del x, ref
    torch.cuda.empty_cache()

    def us(p):
        return f"{p['latency_ms'] * 1e3:8.1f} us" if p.get("latency_ms") else f"- ({p.get('error', '')[:60]})"
    print(f"{label:<18} b={b:<4} h={h_q:<4} kv={max_len:<6} {dtype:<8} split={num_split:<3} "
          + " | ".join(f"{s} {t.ms * 1e3:8.1f} us [{'ok' if ok['ok'] else 'FAIL'}]" for s, (ok, t) in measured.items())
          + " || " + " ".join(f"{n} {us(p)}" for n, p in peers.items()), flush=True)
    return recs


def points(quick: bool = False):
    """The measured configurations: (label, b, h_q, kv, dtype, num_split, memory_bound).
    ``quick``: one point of each kind."""
    pts = []
    for b in (64, 128):
        for kv in ((8192,) if quick else (4096, 8192, 16384, 32768)):
            pts.append(("h128", b, 128, kv, "float16", None, False))
    pts.append(("mid-batch auto", 8, 128, 20000, "float16", None, False))
    pts.append(("small-batch auto", 1, 128, 32768, "float16", None, False))
    if not quick:
        pts.append(("small-batch auto", 4, 128, 32768, "float16", None, False))
        pts.append(("b1 no split", 1, 128, 8192, "float16", 1, False))
        pts.append(("b1 auto split", 1, 128, 8192, "float16", None, False))
    for kv in ((8192,) if quick else (8192, 16384, 32768)):
        pts.append(("h16 (TP8)", 128, 16, kv, "float16", None, True))
    pts.append(("bf16", 64, 128, 8192, "bfloat16", None, False))
    if not quick:
        pts.append(("varlen", 37, 128, 8000, "float16", None, False))
    pts.append(("varlen", 48, 128, 16384, "float16", None, False))
    return pts


def seqlens_of(label, b, kv, seed):
    """The sequence lengths of a point: all ``kv``, or for ``varlen`` random lengths in 1..kv."""
    if label != "varlen":
        return [kv] * b
    import random

    rng = random.Random(seed)
    return [rng.randint(1, kv) for _ in range(b)]  # ragged, not multiples of 64


def run(quick: bool = False) -> results.Run:
    """Measure every point on this GPU; returns the run (the CLI saves it)."""
    runtime.require_gpu("the mla benchmark")
    t0 = time.time()
    ceilings = timing.measure_ceilings()
    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    print(f"ceilings: copy {ceilings.copy_gbps / 1e3:.2f} TB/s, matmul "
          + ", ".join(f"{d} {v:.0f} TFLOP/s" for d, v in ceilings.matmul_tflops.items()), flush=True)
    pts = points(quick)
    need = {(h, d, (ns or op.choose_num_split(b, h, kv, sm_count=op.sm_count())) > 1)
            for _, b, h, kv, d, ns, _ in pts}
    op.prebuild([dict(h_q=h, dtype=d, split=s, schedule=sch) for h, d, s in sorted(need)
                 for sch in schedules_measured()])       # every kernel at once (threads overlap nvcc)
    recs = []
    for i, (label, b, h_q, kv, dtype, ns, memory_bound) in enumerate(pts):
        recs.extend(_measure_point(b=b, h_q=h_q, seqlens=seqlens_of(label, b, kv, seed=i), dtype=dtype,
                                   num_split=ns, ceilings=ceilings, memory_bound=memory_bound, label=label,
                                   seed=100 + i))
    print(f"mla benchmark: {len(recs)} records in {time.time() - t0:.0f} s", flush=True)
    return results.Run(recs, prov, goals=list(GOALS))


#: The goals set for this kernel (FLOPs = 2 b h s (576 + 512)), stored with each run so that a
#: reader can judge the records against them (``report.goals("mla", by="config.schedule")``).
GOALS = (
    {"name": "h_q 128, b 64/128, kv 8192-32768", "min": 500, "unit": "TFLOP/s",
     "where": {"config.label": "h128", "shape.kv_len": {">=": 8192}}},
    {"name": "h_q 128, b 64/128, kv 4096", "min": 460, "unit": "TFLOP/s",
     "where": {"config.label": "h128", "shape.kv_len": 4096}},
    {"name": "h_q 128, b 1, kv 32768, automatic split", "min": 300, "unit": "TFLOP/s",
     "where": {"config.label": "small-batch auto", "shape.batch": 1}},
    {"name": "h_q 128, b 4, kv 32768, automatic split", "min": 300, "unit": "TFLOP/s",
     "where": {"config.label": "small-batch auto", "shape.batch": 4}},
    {"name": "h_q 16 (TP8), b 128, kv 8192-32768", "min": 3.0, "unit": "TB/s",
     "where": {"config.label": "h16 (TP8)"}},
    {"name": "h_q 128, b 64/128, kv 4096-32768 (FlashMLA publishes 660 on an H800)", "min": 620,
     "unit": "TFLOP/s", "where": {"config.label": "h128"}},
    {"name": "the default schedule ahead of FlashInfer at every point", "min": 1.0, "unit": "x",
     "metric": "ratio_to_reference", "where": {"config.schedule": "seesaw"}},
    {"name": "plan.run back to back, over the prepared launch, b 64 kv 8192 and b 1 kv 32768", "max": 1.10,
     "unit": "x", "metric": "op_path.plan_run.ratio_to_prepared_launch",
     "where": {"config.path": "plan.run", "dtype": "float16", "config.schedule": "seesaw",
               "config.label": ["h128", "small-batch auto"], "shape.batch": [1, 64], "shape.kv_len": [8192, 32768]}},
)
