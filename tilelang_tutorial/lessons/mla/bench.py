"""Benchmark suite ``mla``: TileLang MLA decode vs FlashInfer (the peer), eager torch, and the
tutorial's Triton kernel (a teaching contrast).

``run()`` measures on the GPU it runs on and returns records for ``results/mla.json``
(``python -m tilelang_tutorial bench mla``). Every point uses fresh random inputs with a
shuffled page table, checks each implementation against the fp32 reference, and reports:

* compute-bound points (h_q = 128): TFLOP/s with FLOPs = 2 * h_q * (576 + 512) * sum(seqlens),
  compared with the measured bf16/fp16 torch matmul ceiling;
* memory-bound points (h_q = 16): TB/s with bytes = KV read (576 * 2 bytes per token) + q + o,
  compared with the measured device copy bandwidth.

Each point is measured with every TileLang schedule (the default on sm_90a first:
``"seesaw"``, then the hand-written ``"ws"`` and ``"auto"``, the kernel notebook 04 derives),
one record each, with the same peers. A record's fingerprint is the schedule's program for its
configuration (see the lesson's ``measured``).
"""
from __future__ import annotations

import math
import time

from ... import checks, results, runtime, timing
from . import op as K
from . import flashinfer_peer as FI
from . import flashmla_peer as FM
from . import triton_baseline as KT
from .common import DIM_NOPE, DIM_PE, PAGE_SIZE, default_softmax_scale
from .reference import make_paged_inputs, mla_decode_reference

SUITE = "mla"
COMMAND = "python -m tilelang_tutorial bench mla"


# ------------------------------------------------------------------------------------------
# the eager torch peer (batched; not the fp32 reference, which loops over sequences)
# ------------------------------------------------------------------------------------------
def mla_decode_torch(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, softmax_scale=None):
    """Eager torch MLA decode in the input dtype: gather pages, pad, mask, two batched matmuls."""
    import torch

    scale = softmax_scale if softmax_scale is not None else default_softmax_scale()
    b, h_q, dv = q_nope.shape
    page = kv_cache.shape[1]
    max_len = int(cache_seqlens.max())
    n_pages = math.ceil(max_len / page)
    bt = block_table[:, :n_pages].long()
    c = kv_cache[bt].reshape(b, n_pages * page, dv)                  # (b, L, 512)
    k_pe = pe_cache[bt].reshape(b, n_pages * page, -1)               # (b, L, 64)
    s = (torch.bmm(q_nope, c.transpose(1, 2)) + torch.bmm(q_pe, k_pe.transpose(1, 2))).float() * scale
    mask = torch.arange(n_pages * page, device=s.device)[None, :] >= cache_seqlens[:, None]
    s.masked_fill_(mask[:, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1).to(q_nope.dtype)
    return torch.bmm(p, c)


def _flops(h_q, seqlens) -> float:
    return 2.0 * h_q * (DIM_NOPE + DIM_PE + DIM_NOPE) * float(sum(seqlens))


def _bytes(b, h_q, seqlens, elem=2) -> float:
    kv = float(sum(seqlens)) * (DIM_NOPE + DIM_PE) * elem
    q = b * h_q * (DIM_NOPE + DIM_PE) * elem
    o = b * h_q * DIM_NOPE * elem
    return kv + q + o


def _inputs(b, h_q, seqlens, dtype, seed):
    import torch

    return make_paged_inputs(b, h_q, seqlens, dtype=getattr(torch, dtype), device="cuda",
                             seed=seed, extra_pages=0)


def _reference(x, sample: int | None = 16):
    """fp32 reference on (at most ``sample``) sequences; returns (index, ref)."""
    import torch

    b = x["q_nope"].shape[0]
    idx = torch.arange(b) if sample is None or b <= sample else torch.linspace(0, b - 1, sample).long()
    sub = {k: (v[idx.to(v.device)] if k in ("q_nope", "q_pe", "block_table", "cache_seqlens") else v)
           for k, v in x.items()}
    return idx, mla_decode_reference(**sub)


def _check(out, idx, ref, dtype):
    cmp = checks.compare(out[idx.to(out.device)].float(), ref, tolerance=checks.TOLERANCE[dtype])
    return {"rel_error": cmp.rel_error, "max_abs_error": cmp.max_abs_error,
            "unwritten": cmp.unwritten, "tolerance": cmp.tolerance, "ok": cmp.ok,
            "checked_sequences": int(idx.numel())}


def schedules_measured() -> list[str]:
    """The TileLang schedules each point is measured with: the default here, then the others
    that build here (the hand-written ones need sm_90a)."""
    here = K.SCHEDULES if runtime.current_arch() == "sm_90a" else ("auto",)
    return list(dict.fromkeys([K.resolve_schedule(None), *here]))


def _graph_of(fn):
    """Capture ``fn()`` in a CUDA graph (after a warm-up on a side stream); returns the graph."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def _op_path(the_plan, x, out, num_split, schedule) -> dict:
    """The calls a user makes, timed back to back (host time counted per call) next to the
    prepared launch timed the same way: plan.run, the simple mla_decode (validates every call,
    a host sync), and plan.run replayed from a CUDA graph."""
    args = (x["q_nope"], x["q_pe"], x["kv_cache"].view(-1, DIM_NOPE), x["pe_cache"].view(-1, DIM_PE),
            x["block_table"], x["cache_seqlens"], the_plan.lse, the_plan.o_partial, out)
    calls = {
        "prepared_launch": lambda: the_plan.kernel(*args),
        "plan_run": lambda: the_plan.run(**x, out=out),
        "simple_call": lambda: K.mla_decode(**x, num_split=num_split, out=out, schedule=schedule),
    }
    try:
        graph = _graph_of(lambda: the_plan.run(**x, out=out))
        calls["graph_replay"] = graph.replay
    except Exception as exc:                                  # recorded, not hidden
        calls["graph_replay"] = None
        graph_error = f"{type(exc).__name__}: {str(exc)[:200]}"
    path = {}
    for name, fn in calls.items():
        if fn is None:
            path[name] = {"error": graph_error}
            continue
        t, why = timing.measure_or_note(fn, regime="call")
        path[name] = {"latency_ms": t.ms, "timing": t.as_dict()} if t else {"error": why}
    base = path["prepared_launch"].get("latency_ms")
    for name, p in path.items():
        if base and p.get("latency_ms"):
            p["ratio_to_prepared_launch"] = p["latency_ms"] / base
    return path


def _library_peer(availability, make, idx, ref, dtype, **about) -> dict:
    """A peer from another library (optional): made once (its planning), checked against the
    reference on its output (``.out``), then its ``run`` timed as a kernel and back to back; or why not."""
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
        rec.update(correctness=correct, version=version, **about)
        tb, _ = timing.measure_or_note(peer.run, regime="call")
        if tb:
            rec["back_to_back_ms"] = tb.ms
        return rec
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "version": version}


def _measure_point(*, b, h_q, seqlens, dtype, num_split, ceilings, memory_bound, label,
                   torch_peer=True, seed=0) -> list[dict]:
    """One record per TileLang schedule (:func:`schedules_measured`), the peers measured once
    and attached to each. The record's figure is ``plan.run`` -- the fast path of the public
    API -- timed as a kernel (two methods, L2 flushed); ``op_path`` holds the back-to-back
    timings of every way of calling it."""
    import torch

    x = _inputs(b, h_q, seqlens, dtype, seed)
    idx, ref = _reference(x)
    max_len = max(seqlens)
    auto = num_split is None
    if auto:
        num_split = K.choose_num_split(b, h_q, max_len, sm_count=K.sm_count())

    tilelang = {}
    for schedule in schedules_measured():
        out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
        the_plan = K.plan(**x, num_split=num_split, schedule=schedule)
        the_plan.run(**x, out=out)
        torch.cuda.synchronize()
        ok = _check(out, idx, ref, dtype)
        t = timing.measure(lambda: the_plan.run(**x, out=out))
        # every way of calling it, for the schedule a user gets by default (time: the others share the op)
        path = (_op_path(the_plan, x, out, num_split, schedule) if schedule == K.resolve_schedule(None)
                else {"note": "measured for the default schedule only"})
        tilelang[schedule] = (ok, t, path)
        del out, the_plan

    peers = {
        "flashinfer": _library_peer(FI.available(), lambda: FI.FlashInferMLA(**x), idx, ref, dtype,
                                    backend=FI.BACKEND,
                                    note="FlashInfer BatchMLAPagedAttentionWrapper: plan once, run timed"),
        "flashmla": _library_peer(FM.available(), lambda: FM.FlashMLADecode(**x), idx, ref, dtype,
                                  note="FlashMLA's Hopper decode kernel and combine (flash_mla_with_kvcache), "
                                       "its scheduler run once; the cache concatenated to its layout"),
    }

    tri_split = KT.choose_num_split_triton(b, h_q, max_len)
    tout = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
    tri = KT.TritonMLADecodeLaunch(**x, num_split=tri_split, out=tout)
    tri.launch()
    torch.cuda.synchronize()
    t, why = timing.measure_or_note(tri.launch)
    peers["triton_tutorial"] = ({"latency_ms": t.ms, "timing": t.as_dict()} if t else {"error": why})
    peers["triton_tutorial"].update(num_split=tri_split, correctness=_check(tout, idx, ref, dtype),
                                    note="this tutorial's Triton kernel: a teaching contrast, not a peer")

    if torch_peer:
        try:
            pout = mla_decode_torch(**x)
            t_ok = _check(pout, idx, ref, dtype)
            t, why = timing.measure_or_note(lambda: mla_decode_torch(**x))
            peers["torch"] = ({"latency_ms": t.ms, "timing": t.as_dict()} if t else {"error": why})
            peers["torch"].update(correctness=t_ok, note="eager torch: page gather + padded bmm + softmax")
            del pout
        except torch.cuda.OutOfMemoryError:
            peers["torch"] = {"error": "out of memory at this size"}
    else:
        peers["torch"] = {"error": "not measured at this size (time/memory)"}

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
    reference = ({"name": f"FlashInfer {peers['flashinfer'].get('version')} ({FI.BACKEND})", "value": fi_val,
                  "unit": unit} if fi_val else None)
    recs = []
    for schedule, (tl_ok, t, path) in tilelang.items():
        value = (nbytes if memory_bound else flops) / (t.ms * 1e-3) / 1e12
        rec = results.make_record(
            suite=SUITE, kernel="mla_decode",
            config={"num_split": num_split, "auto_split": auto, "schedule": schedule, "path": "plan.run",
                    "label": label, "softmax_scale": default_softmax_scale(), "arch": runtime.current_arch()},
            shape={"batch": b, "h_q": h_q, "kv_len": max_len, "mean_kv_len": sum(seqlens) / b,
                   "page_size": PAGE_SIZE},
            dtype=dtype, metric=metric, value=value, unit=unit, latency_ms=t.ms, timing=t,
            reference=reference, ceiling=ceiling, peers=peers, correctness=tl_ok,
            flops=flops, nbytes=nbytes,
        )
        rec["call"] = "plan.run (the fast path of the public API)"
        rec["op_path"] = path
        rec["tflops"] = flops / (t.ms * 1e-3) / 1e12
        rec["tbps"] = nbytes / (t.ms * 1e-3) / 1e12
        rec["ceilings"] = ceilings.as_dict()
        recs.append(rec)
    del x, ref, tout
    torch.cuda.empty_cache()

    def fmt(p):
        return f"{p['latency_ms'] * 1e3:8.1f} us" if p and p.get("latency_ms") else "   -   "
    tl_txt = " | ".join(
        f"{s} {t.ms * 1e3:8.1f} us {flops / t.ms / 1e9:6.1f} TFLOP/s {nbytes / t.ms / 1e9:5.2f} TB/s "
        f"[{'ok' if ok['ok'] else 'FAIL'} {ok['rel_error']:.1e}] b2b launch {fmt(path.get('prepared_launch'))} "
        f"run {fmt(path.get('plan_run'))} simple {fmt(path.get('simple_call'))} graph {fmt(path.get('graph_replay'))}"
        for s, (ok, t, path) in tilelang.items())
    print(f"{label:<18} b={b:<4} h={h_q:<4} kv={max_len:<6} {dtype:<8} split={num_split:<3} {tl_txt} || "
          + " ".join(f"{n} {fmt(p)}" + (f" ({p['error'][:60]})" if p.get("error") else "")
                     for n, p in peers.items()), flush=True)
    return recs


def points(quick: bool = False):
    """The measured configurations: (label, b, h_q, kv, dtype, num_split, memory_bound, torch).
    ``quick``: one point of each kind (128 heads at b64 kv 8192 and b128 kv 4096, a mid batch
    with a long context, batch 1, a ragged batch, 16 heads, bf16)."""
    pts = []
    if quick:
        pts += [("h128", 64, 128, 8192, "float16", None, False, True),
                ("h128", 128, 128, 4096, "float16", None, False, True)]
    else:
        for b in (64, 128):
            for kv in (4096, 8192, 16384, 32768):
                pts.append(("h128", b, 128, kv, "float16", None, False, True))
    pts.append(("mid-batch auto", 8, 128, 20000, "float16", None, False, True))
    pts.append(("small-batch auto", 1, 128, 32768, "float16", None, False, True))
    if not quick:
        pts.append(("small-batch auto", 4, 128, 32768, "float16", None, False, True))
        pts.append(("b1 no split", 1, 128, 8192, "float16", 1, False, False))
        pts.append(("b1 auto split", 1, 128, 8192, "float16", None, False, False))
    for kv in ((8192,) if quick else (8192, 16384, 32768)):
        pts.append(("h16 (TP8)", 128, 16, kv, "float16", None, True, True))
    pts.append(("bf16", 64, 128, 8192, "bfloat16", None, False, True))
    if not quick:
        pts.append(("varlen", 37, 128, 8000, "float16", None, False, True))
    pts.append(("varlen", 48, 128, 16384, "float16", None, False, True))
    return pts


def _seqlens(label, b, kv, seed):
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
    # compile every kernel the points need at once (threads overlap lowering and nvcc)
    pts = points(quick)
    need = {(h, d, (ns or K.choose_num_split(b, h, kv, sm_count=K.sm_count())) > 1)
            for _, b, h, kv, d, ns, _, _ in pts}
    t = time.time()
    K.prebuild([dict(h_q=h, dtype=d, split=s, schedule=sch) for h, d, s in sorted(need)
                for sch in schedules_measured()])
    print(f"compiled {len(need)} TileLang kernels in {time.time() - t:.0f} s", flush=True)
    recs = []
    for i, (label, b, h_q, kv, dtype, ns, mem, tp) in enumerate(pts):
        seqlens = _seqlens(label, b, kv, seed=i)
        recs.extend(_measure_point(b=b, h_q=h_q, seqlens=seqlens, dtype=dtype, num_split=ns,
                                   ceilings=ceilings, memory_bound=mem, label=label,
                                   torch_peer=tp, seed=100 + i))
    print(f"mla benchmark: {len(recs)} records in {time.time() - t0:.0f} s", flush=True)
    return results.Run(recs, prov, goals=list(GOALS))


#: The goals set for this kernel (FLOPs = 2 b h s (576 + 512)), stored with each run so the
#: notebook judges the records it shows against them (``report.goals("mla", by="config.schedule")``).
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
    {"name": "issue 17: h_q 128, b 64/128, kv 4096-32768 (FlashMLA publishes 660 on an H800)", "min": 620,
     "unit": "TFLOP/s", "where": {"config.label": "h128"}},
    {"name": "issue 24: the default schedule ahead of FlashInfer at every point", "min": 1.0, "unit": "x",
     "metric": "ratio_to_reference", "where": {"config.schedule": "seesaw"}},
    {"name": "issue 17: plan.run back to back, over the prepared launch, b 64 kv 8192 and b 1 kv 32768", "max": 1.10,
     "unit": "x", "metric": "op_path.plan_run.ratio_to_prepared_launch",
     "where": {"config.path": "plan.run", "dtype": "float16", "config.schedule": "seesaw",
               "config.label": ["h128", "small-batch auto"], "shape.batch": [1, 64], "shape.kv_len": [8192, 32768]}},
)
