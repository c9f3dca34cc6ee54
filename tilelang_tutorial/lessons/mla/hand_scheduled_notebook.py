"""What notebook 04b's cells call where TileLang has nothing alike: run a hand-written schedule
safely against the reference (the emulator first), read facts off its generated CUDA, and
summarise the recorded figures of the three schedules.

Every function takes the reader's program or compiled kernel: a kernel cell edited in the
notebook is the one checked and read here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ... import checks, emulate, runtime
from .common import DIM_NOPE, DIM_PE


def check_schedule(name: str, program, inputs: dict, *, num_split: int):
    """Run ``program`` (a schedule's ``T.prim_func``, built with ``split=num_split > 1``) on
    ``inputs`` (:func:`.reference.make_paged_inputs`) and print its comparison with the fp32
    reference, each sequence judged on its own (the line names the worst), and with splits each
    split's log-sum-exp against :func:`.reference.split_lse_reference`, element by element: always
    in the emulator first (a wrong barrier parity is reported there instead of hanging a GPU), then
    compiled on the GPU when this machine can run it.
    Returns the last :class:`ScheduleCheck`, or None when the emulator stopped."""
    import torch

    from . import reference

    cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    where = [("in the emulator (CPU)", cpu, program)]
    if runtime.mode().can_run:
        where.append(("on the GPU", inputs, runtime.compile_kernel(program, arch="sm_90a")))
    result = None
    for place, x, kernel in where:
        batch, heads = x["q_nope"].shape[:2]
        device = x["q_nope"].device
        lse = checks.poisoned((batch, heads, num_split), torch.float32, device)
        partial = checks.poisoned((batch, heads, num_split, DIM_NOPE), torch.float32, device)
        out = checks.poisoned((batch, heads, DIM_NOPE), x["q_nope"].dtype, device)
        args = (x["q_nope"], x["q_pe"], x["kv_cache"].view(-1, DIM_NOPE), x["pe_cache"].view(-1, DIM_PE),
                x["block_table"], x["cache_seqlens"], lse, partial, out)
        try:
            if place == "on the GPU":
                runtime.run(kernel, *args)
                torch.cuda.synchronize()
            else:
                emulate.run(kernel, *args)
        except emulate.EmulationError as err:
            print(f"{name}, {place}: FAIL, the emulator stopped ({type(err).__name__}):\n{err}")
            return None
        result = ScheduleCheck(
            checks.compare(out, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"],
                           per="sequence"),
            checks.compare_lse(lse, reference.split_lse_reference(**x, num_split=num_split)) if num_split > 1 else None)
        lengths = ", ".join(str(n) for n in x["cache_seqlens"].tolist())
        print(f"{name}, {place}, sequences of {lengths} tokens, {heads} heads, num_split={num_split}: {result}")
        if not result.ok:
            return result
    return result


@dataclass
class ScheduleCheck:
    """:func:`check_schedule`'s verdict: the output's comparison and, with splits, the lse's."""
    output: checks.Comparison
    lse: checks.LseComparison | None

    @property
    def ok(self) -> bool:
        return self.output.ok and (self.lse is None or self.lse.ok)

    def __str__(self) -> str:
        return f"output {self.output}" + (f"; each split's lse {self.lse}" if self.lse else "")


def generated_code_facts(kernel) -> str:
    """One line of facts read off a compiled MLA kernel's CUDA and ptxas: the wgmma shapes
    (M, N, K), the widths of the all-reduces (256: across two warpgroups, 4: inside a quad of
    threads), the mbarrier arrays it declares, the attention kernel's registers and spills."""
    from ...inspector import resource_usage

    cuda = kernel.get_kernel_source()
    shapes = sorted({tuple(int(v) for v in m) for m in
                     re.findall(r"wgmma_ss<[^>]*?, (\d+), (\d+), (\d+), (?:false|true)", cuda)})
    widths = sorted({int(w) for w in re.findall(r"AllReduce<tl::\w+Op, (\d+)", cuda)})
    barriers = re.findall(r"uint64_t (\w+)_mem", cuda)
    usage = resource_usage(kernel)
    attention = next((u for name, u in usage.items() if not name.endswith("_1")), {})
    return (f"wgmma (M, N, K) {shapes}; all-reduce widths {widths}; mbarrier arrays {barriers}; attention "
            f"kernel {attention.get('registers', '?')} registers/thread, {attention.get('spill_stores', '?')} B spilled")


#: the record labels 04b compares: fp16 at 128 heads, bf16 at 128 heads, the 16-head shard
POINTS = {"h128": "128 heads, fp16", "bf16": "128 heads, bf16", "h16 (TP8)": "16 heads (TP8 shard), fp16"}


def recorded_ranges(records) -> dict:
    """``{(label, schedule): (lowest, highest) ratio to the ceiling}`` over the given ``mla`` records."""
    out: dict = {}
    for r in records:
        key = (r["config"]["label"], r["config"]["schedule"])
        ratio = r["ratio_to_ceiling"]
        lo, hi = out.get(key, (ratio, ratio))
        out[key] = (min(lo, ratio), max(hi, ratio))
    return out


def recorded_summary(records) -> str:
    """The recorded figures of the three schedules, one row per point and schedule: the range of
    the fraction of the ceiling reached over the recorded batches and sequence lengths."""
    if not records:
        return "no current records"
    ranges = recorded_ranges(records)
    rows = [f"{'point':28s} {'schedule':8s} {'points':>6s}  {'measured':>20s}  {'/ ceiling':12s}  ceiling"]
    for label, what in POINTS.items():
        recs = [r for r in records if r["config"]["label"] == label]
        if not recs:
            continue
        ceiling = recs[0]["ceiling"]["name"]
        for schedule in ("auto", "ws", "seesaw"):
            mine = [r for r in recs if r["config"]["schedule"] == schedule]
            if not mine:
                continue
            lo, hi = ranges[(label, schedule)]
            values = sorted(r["value"] for r in mine)
            measured = f"{values[0]:.3g} to {values[-1]:.3g} {mine[0]['unit']}"
            rows.append(f"{what:28s} {schedule:8s} {len(mine):6d}  {measured:>20s}  {lo:5.2f} to {hi:<5.2f}  {ceiling}")
    return "\n".join(rows)

