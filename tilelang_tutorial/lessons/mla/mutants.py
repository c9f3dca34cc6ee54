"""Lesson 04's mutation targets (``python -m tilelang_tutorial mutants mla``): notebook 04's kernels
(the MQA decode, steps 1 to 3, the shared split range and combine), each checked as the notebook
checks it (against the fp32 reference in the emulator, on the ragged batch of 1, 63, 65 and 130
tokens, the outputs poisoned); notebook 04b's hand-scheduled kernels (the warp-specialized and
seesaw schedules and the parts they share) through 04b's ``check_schedule``, at the notebook's
batch in three splits (a 1-token sequence, whose other splits are empty, and one of 740
tokens, 12 pages, whose scores are far below zero: each split goes round the KV ring twice, so a
missing release of a stage or a wrong parity shows, and the last split's fourth page is the
ragged one; three splits beside two head blocks, so swapped grid extents show);
and every exercise solution
through its checker (the answers that are data by
:func:`tilelang_tutorial.mutants.data_mutants`).

A shared macro (``split_range_macro``, ``combine_macro``, ``hand_scheduled_parts``) is checked
through a kernel that uses it, with the mutant in its place in that kernel's module.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
import contextlib
import io
import math
from unittest import mock

import tilelang
import tilelang.language as T
import torch

from ... import checks, runtime
from ...mutants import Target, exercise_target, verdict
from . import auto, common, hand_scheduled_notebook, mqa, reference, seesaw, steps, ws
from .common import DIM_NOPE, DIM_PE
from .exercises import check_combine_kernel

#: notebook 04's ragged batch: one token, a page less one, a page and one, two pages and two
LENGTHS = [1, 63, 65, 130]
#: notebook 04b's batch for the hand-scheduled schedules (see the module docstring), split in three
SCHEDULE_LENGTHS, SCHEDULE_SPLIT = [1, 740], 3


def _compare(out, inputs, dtype="float16") -> tuple:
    cmp = checks.compare(out, reference.mla_decode_reference(**inputs), tolerance=checks.TOLERANCE[dtype])
    return cmp.ok, str(cmp)


def _check_mqa(factory):
    """Notebook 04's MQA check: sequences of 1, 100 and 257 tokens, the second with scores far
    below zero, the third with scores past fp16's 65,504 and values near 8000 (its running sum
    P V passes 65,504), ``torch.testing.assert_close``."""
    lens, heads, dim = [1, 100, 257], 64, 128
    q = torch.randn(len(lens), heads, dim)
    k = torch.randn(len(lens), max(lens), dim)
    v = torch.randn(len(lens), max(lens), dim)
    q[1, :, 0], k[1, :, 0] = -181, 181
    q[2, :, 0], k[2, :, 0], v[2] = 272, 272, v[2] * 64 + 8000
    q, k, v = q.half(), k.half(), v.half()
    seqlens = torch.tensor(lens, dtype=torch.int32)
    kernel = tilelang.compile(factory(), out_idx=[4], target={"kind": "cuda", "arch": runtime.mode().arch})
    out = runtime.run(kernel, q, k, v, seqlens)
    try:
        torch.testing.assert_close(out.float(), mqa.mqa_decode_reference(q, k, v, seqlens), rtol=1e-2, atol=1e-2)
    except AssertionError as err:
        return False, str(err).splitlines()[0]
    return True, "assert_close passed"


def _check_contiguous(factory):
    """Step 1's check: h_q = 128 and 16 (fewer heads than a block's 64 rows)."""
    for heads in (128, 16):
        inputs = reference.make_paged_inputs(4, heads, LENGTHS, device="cpu", seed=heads)
        q_nope, q_pe, kv, k_pe, seqlens = steps.contiguous_view(inputs)
        out = checks.poisoned(tuple(q_nope.shape), q_nope.dtype, "cpu")
        runtime.run(runtime.compile_kernel(factory(heads)), q_nope, q_pe, kv, k_pe, seqlens, out)
        passed, line = _compare(out, inputs)
        if not passed:
            return False, f"h_q = {heads}: {line}"
    return True, line


def _check_paged(factory):
    """Step 2's check: h_q = 128 in fp16 and 16 in bf16."""
    for heads, dtype in ((128, torch.float16), (16, torch.bfloat16)):
        inputs = reference.make_paged_inputs(4, heads, LENGTHS, dtype=dtype, device="cpu", seed=heads)
        out = checks.poisoned(tuple(inputs["q_nope"].shape), dtype, "cpu")
        runtime.run(runtime.compile_kernel(factory(heads, str(dtype)[6:])), inputs["q_nope"], inputs["q_pe"],
                    inputs["kv_cache"].view(-1, DIM_NOPE), inputs["pe_cache"].view(-1, DIM_PE), inputs["block_table"],
                    inputs["cache_seqlens"], out)
        passed, line = _compare(out, inputs, str(dtype)[6:])
        if not passed:
            return False, f"h_q = {heads}, {dtype}: {line}"
    return True, line


def _run_decode(program, inputs, num_split):
    batch, heads = inputs["q_nope"].shape[:2]
    lse = checks.poisoned((batch, heads, num_split), torch.float32, "cpu")
    partial = checks.poisoned((batch, heads, num_split, DIM_NOPE), torch.float32, "cpu")
    out = checks.poisoned((batch, heads, DIM_NOPE), inputs["q_nope"].dtype, "cpu")
    runtime.run(runtime.compile_kernel(program), inputs["q_nope"], inputs["q_pe"], inputs["kv_cache"].view(-1, DIM_NOPE),
                inputs["pe_cache"].view(-1, DIM_PE), inputs["block_table"], inputs["cache_seqlens"], lse, partial, out)
    return out


def _check_step3(factory):
    """Step 3's check: one split and several (the 1-token sequence's other splits empty), fp16 and bf16."""
    line = ""
    for heads, num_split, dtype in ((128, 1, torch.float16), (16, 4, torch.float16), (128, 2, torch.bfloat16)):
        inputs = reference.make_paged_inputs(4, heads, LENGTHS, dtype=dtype, device="cpu", seed=heads)
        out = _run_decode(factory(heads, str(dtype)[6:], split=num_split > 1), inputs, num_split)
        passed, line = _compare(out, inputs, str(dtype)[6:])
        if not passed:
            return False, f"h_q = {heads}, num_split = {num_split}, {dtype}: {line}"
    return True, line


def _through(module, name, check, program):
    """The check of ``program`` with ``module.name`` (a shared macro's factory) replaced by the answer."""
    def run(answer):
        with mock.patch.object(module, name, answer):
            return check(program)

    return run


def _check_combine(factory):
    """Notebook 04's check of the package's combine: the macro in a ``T.prim_func`` of its own,
    through exercise 2's checker (as ``package_combine_program`` in the notebook)."""
    def combine_program(num_split, dim=DIM_NOPE):
        batch, heads = T.dynamic("batch"), T.dynamic("heads")
        combine = factory(heads, batch, num_split)

        @T.prim_func
        def combine_only(lse: T.Tensor([batch, heads, num_split], "float32"),
                         o_partial: T.Tensor([batch, heads, num_split, dim], "float32"),
                         Output: T.Tensor([batch, heads, dim], "float32")):
            combine(lse, o_partial, Output)

        return combine_only

    return verdict(check_combine_kernel(combine_program, verbose=False))


def _check_schedule(name):
    """Notebook 04b's ``check_schedule`` of a hand-scheduled factory (h_q = 128, fp16, split)."""
    def check(factory):
        inputs = reference.make_paged_inputs(len(SCHEDULE_LENGTHS), 128, SCHEDULE_LENGTHS, device="cpu", seed=7)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            result = hand_scheduled_notebook.check_schedule(name, factory(128, "float16", split=True), inputs,
                                                            num_split=SCHEDULE_SPLIT)
        return (result is not None and result.ok), printed.getvalue().strip()[:300]

    return check


def targets():
    from . import exercise_cases, hand_scheduled

    kernels = [
        Target("mqa_decode_program", mqa.mqa_decode_program, _check_mqa),
        Target("mla_contiguous_program", steps.mla_contiguous_program, _check_contiguous),
        Target("mla_paged_program", steps.mla_paged_program, _check_paged),
        Target("mla_decode_program", auto.mla_decode_program, _check_step3),
        Target("split_range_macro", common.split_range_macro,
               _through(auto, "split_range_macro", _check_step3, auto.mla_decode_program)),
        Target("combine_macro", common.combine_macro, _check_combine),
        Target("mla_decode_ws_program", ws.mla_decode_ws_program, _check_schedule("ws")),
        Target("mla_decode_seesaw_program", seesaw.mla_decode_seesaw_program, _check_schedule("seesaw")),
        Target("hand_scheduled_parts", hand_scheduled.hand_scheduled_parts,
               _through(ws, "hand_scheduled_parts", _check_schedule("ws"), ws.mla_decode_ws_program)),
    ]
    return kernels + [exercise_target(ex) for ex in exercise_cases()]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    "combine_macro: constant L28: 0 -> 1":
        "the first chunk rescales the running total by 2^(-inf - max) = 0 before adding to it: the start value is wiped",
    "mla_paged_program: constant L50: 0 -> 1":
        "the first page rescales acc_o by alpha = 2^((-inf - m) * scale) = 0 before P V adds to it: the start value is wiped",
    "mla_decode_program: constant L103: 0 -> 1":
        "an empty split's partial output is weighed by 2^(-inf - lse_max) = 0 in the combine: its value never counts",
    "mla_decode_seesaw_program: constant L149: 2 -> 3":
        "a third `stats` barrier that nothing arrives at or waits on: the two used are the same",
    "mla_decode_program: constant L61: 0 -> 1":
        "the first page rescales acc_o by alpha = 2^((-inf - m) * scale) = 0 before P V adds to it: the start value is wiped",
    "mla_decode_program: constant L62: 0 -> 1":
        "the first page rescales l_i by alpha = 0 before adding its row sum: the start value is wiped",
    "mla_decode_seesaw_program: constant L144: 2 -> 3":
        "a third `full_l` barrier that nothing arrives at or waits on: the two used are the same",
    "mla_decode_seesaw_program: constant L146: 2 -> 3":
        "a third `empty_l` barrier that nothing arrives at or waits on: the two used are the same",
    "hand_scheduled_parts: constant L35: 0 -> 1":
        "the warp vote then always rescales: O *= alpha with alpha = 1 where it would have skipped leaves O as it was",
    "hand_scheduled_parts: constant L54: 0 -> 1":
        "an empty split's partial output is weighed by 2^(-inf - lse_max) = 0 in the combine: its value never counts",
    "hand_scheduled_parts: mask L17: tok0 + BLOCK_N > seqlen -> tok0 + BLOCK_N >= seqlen":
        "also masks a last block that ends exactly at seqlen, where every token is before the end: the mask keeps them all",
    "mqa_decode_program: narrow L27: accum -> dtype":
        "alpha rounded to fp16 multiplies acc_o and l_i alike, so their ratio, the output, is unchanged",
    "mla_paged_program: narrow L35: accum -> dtype":
        "alpha rounded to fp16 multiplies acc_o and l_i alike, so their ratio, the output, is unchanged",
    "mla_decode_seesaw_program: narrow L137: accum -> dtype":
        "warpgroup 1's lse_r1 is computed and never stored: only warpgroup 0 writes lse (store_half's writes_lse)",
    "mla_decode_ws_program: drop L36: T.fence_proxy_async() -> pass":
        "an emulator limit, not an equivalence: the emulator does not model the async proxy, so P's "
        "generic-proxy stores are always visible to the value warpgroup's wgmma there (on a GPU they may not be)",
    "04b ring repair: mask L16: tx < 128 -> tx <= 128":
        "thread 128 joins the left consumer, idle above 64 threads; the right consumer's T.Parallel is "
        "re-based on its first thread, so every element is written once and `empty` still gets 256 "
        "arrivals a phase (read in the generated CUDA)",
    "04b ring repair: constant L16: 128 -> 129": "the same mutant as `tx < 128 -> tx <= 128` (above)",
}
