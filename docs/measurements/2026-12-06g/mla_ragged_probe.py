"""Goal 4 probe: where the package loses ragged batches to FlashMLA (1.45x at the recorded b48 <= 16384
point, ``mla_flashmla_probe_h100.log``). The package's grid gives each sequence ``num_split`` CTAs
(one share of its own blocks each), dispatched in batch order; FlashMLA's scheduler cuts the batch's
blocks into equal parts. A model of the dispatch (each CTA's steps on the first free SM; printed
as "model", in block steps) says the time goes to the tail: the longest sequences' CTAs start late.

Measured at the bench's two ragged points (its seeds) and three more draws: FlashMLA; the package
at num_split 1-16 (``plan(num_split=...)``); and the package with the batch sorted longest first
(q, block table and lengths permuted outside the timed call: what an order argument in the kernel
would give, without it). Each variant checked against the fp32 reference first (the sorted one
against the permuted reference), then timed once (do_bench median with the L2 flushed, checked by
CUDA events: timing.measure_or_note).

    python3 mla_ragged_probe.py [--so PATH]     # on a GPU
"""
import heapq, math, os, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mla_flashmla_probe import load_library   # noqa: E402
from tilelang_tutorial.lessons.mla import flashmla_peer as FM   # noqa: E402
from tilelang_tutorial import checks, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402
from tilelang_tutorial.lessons.mla.common import choose_num_split   # noqa: E402

POINTS = [("varlen b37 <= 8000 (bench seed 17)", 37, 8000, 17), ("varlen b48 <= 16384 (bench seed 18)", 48, 16384, 18),
          ("varlen b64 <= 8192", 64, 8192, 5), ("varlen b16 <= 32768", 16, 32768, 6), ("varlen b128 <= 4096", 128, 4096, 7)]
SPLITS = [1, 2, 3, 4, 6, 8, 12, 16]
SORTED_SPLITS = [1, 2, 3, 4, 6, 8]


def model_steps(seqlens, split, sms=132, head_blocks=2, overhead=3):
    """the grid's CTAs (batch, then split, then head block) each on the first free SM; a CTA takes its
    share of its sequence's 64-token blocks plus ``overhead`` steps (Q, the epilogue)"""
    free, end = [0.0] * sms, 0.0
    for L in seqlens:
        n = math.ceil(L / 64)
        per = math.ceil(n / split)
        for sp in range(split):
            b0 = min(sp * per, n - 1)
            d = max(min(sp * per + per, n), b0 + 1) - b0 + overhead
            for _ in range(head_blocks):
                t = heapq.heappop(free)
                heapq.heappush(free, t + d)
                end = max(end, t + d)
    return end


def main():
    import torch

    load_library()
    t0 = time.time()
    print(torch.cuda.get_device_name(), flush=True)
    for label, b, kv, seed in POINTS:
        seqlens = bench._seqlens("varlen", b, kv, seed=seed)
        x = bench._inputs(b, 128, seqlens, "float16", seed=900 + seed)
        idx, ref = bench._reference(x)
        flops = bench._flops(128, seqlens)
        auto = choose_num_split(b, 128, max(seqlens), sm_count=torch.cuda.get_device_properties(0).multi_processor_count)
        ideal = 2 * sum(math.ceil(L / 64) + 3 for L in seqlens) / 132
        print(f"== {label}: mean kv {sum(seqlens) / b:.0f}, max {max(seqlens)}; auto num_split {auto}; "
              f"model: all SMs busy {ideal:.0f} steps", flush=True)
        order = sorted(range(b), key=lambda i: -seqlens[i])
        perm = torch.tensor(order, device="cuda")
        xs = dict(x, q_nope=x["q_nope"][perm].contiguous(), q_pe=x["q_pe"][perm].contiguous(),
                  block_table=x["block_table"][perm].contiguous(), cache_seqlens=x["cache_seqlens"][perm].contiguous())
        sorted_lens = [seqlens[i] for i in order]
        idx_sorted = torch.tensor([order.index(i) for i in idx.tolist()])

        def timed(name, fn, out, check_idx, steps):
            fn()
            torch.cuda.synchronize()
            ok = bench._check(out, check_idx, ref, "float16")
            if not ok["ok"]:
                print(f"  {name:22s} WRONG rel {ok['rel_error']:.1e} unwritten {ok['unwritten']}", flush=True)
                return
            t, why = timing.measure_or_note(fn)
            tf = None if t is None else flops / t.ms / 1e9
            print(f"  {name:22s} {'refused' if tf is None else f'{tf:4.0f}'} TFLOP/s"
                  + (f"   model {steps:4.0f} steps" if steps else "") + f"   (rel {ok['rel_error']:.1e})", flush=True)

        fm = FM.FlashMLADecode(**x)
        timed("flashmla", fm.run, fm.out, idx, None)
        del fm
        for ns in SPLITS:
            the_plan = op.plan(**x, num_split=ns)
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
            timed(f"package split {ns}" + (" (auto)" if ns == auto else ""), lambda: the_plan.run(**x, out=out),
                  out, idx, model_steps(seqlens, ns))
        for ns in SORTED_SPLITS:
            the_plan = op.plan(**xs, num_split=ns)
            out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
            timed(f"sorted split {ns}", lambda: the_plan.run(**xs, out=out), out, idx_sorted,
                  model_steps(sorted_lens, ns))
        del x, xs, ref
        torch.cuda.empty_cache()
    print(f"mla_ragged_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
