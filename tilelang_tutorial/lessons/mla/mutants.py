"""Lesson 04's mutation targets (``python -m tilelang_tutorial mutants mla``): notebook 04's kernels
(the MQA decode, steps 1 to 3, the shared split range and combine), each checked as the notebook
checks it (against the fp32 reference in the emulator, on the ragged batch of 1, 63, 65 and 130
tokens and a flat 512-token sequence, each sequence judged on its own, the outputs poisoned, and
with splits each split's lse element by element);
notebook 04b's hand-scheduled kernels (the warp-specialized and seesaw schedules and the parts
they share) through 04b's ``check_schedule``, at the notebook's batch in three splits (a 1-token
sequence, whose other splits are empty; one of 1,300 tokens, 21 pages, whose scores are far
below zero: each split goes round the KV ring more than three times, so a missing release of a
stage or a wrong parity shows, and the last split's last page is the ragged one; 447 tokens of
plain scores, three pages a split, so both of the seesaw's warpgroups sum a share of each split's
denominator (checked through the lse); 130
tokens whose scores pass fp16's 65,504; and a flat 1,344-token sequence; three splits beside two
head blocks, so swapped grid extents show), then at 16 heads unsplit; and every exercise
solution through its checker (the answers that are data by
:func:`tilelang_tutorial.mutants.data_mutants`).

The flat sequences (``make_paged_inputs(flat_large_last=True)``) weigh their first page 1 and
every later token 4.7e-4, over values near 1,500: an output accumulator narrowed to fp16
overflows, and a softmax denominator narrowed to fp16 drops the later pages (past the tolerance
after five in one split).

A shared macro (``split_range_macro``, ``combine_macro``, ``hand_scheduled_parts``) is checked
through a kernel that uses it, with the mutant in its place in that kernel's module.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`), and the fp16 roundings whose error stays within
fp16's tolerance on every input the emulator can afford, each with its measured error."""
import contextlib
import io
import math
from unittest import mock

import tilelang
import tilelang.language as T
import torch

from ... import checks, runtime
from ...mutants import EMULATOR_LIMIT, ROUNDING, Target, exercise_target, verdict
from . import auto, common, hand_scheduled_notebook, mqa, reference, seesaw, steps, ws
from .common import DIM_NOPE, DIM_PE
from .exercises import check_combine_kernel

#: notebook 04's ragged batch: one token, a page less one, a page and one, two pages and two, and
#: a last sequence of flat scores over large values (``make_paged_inputs(flat_large_last=True)``)
LENGTHS = [1, 63, 65, 130, 512]
#: notebook 04b's batch for the hand-scheduled schedules (see the module docstring), split in three
SCHEDULE_LENGTHS, SCHEDULE_SPLIT = [1, 1300, 447, 130, 1344], 3
#: the hand-scheduled kernels' second check: 16 heads (a head block's padding rows), no splits
FEW_HEADS_LENGTHS = [63, 65]


def _compare(out, inputs, dtype="float16") -> tuple:
    cmp = checks.compare(out, reference.mla_decode_reference(**inputs), tolerance=checks.TOLERANCE[dtype],
                         per="sequence")
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
    lines = []
    for heads in (128, 16):
        inputs = reference.make_paged_inputs(len(LENGTHS), heads, LENGTHS, device="cpu", seed=heads,
                                             flat_large_last=True)
        q_nope, q_pe, kv, k_pe, seqlens = steps.contiguous_view(inputs)
        out = checks.poisoned(tuple(q_nope.shape), q_nope.dtype, "cpu")
        runtime.run(runtime.compile_kernel(factory(heads)), q_nope, q_pe, kv, k_pe, seqlens, out)
        passed, line = _compare(out, inputs)
        if not passed:
            return False, f"h_q = {heads}: {line}"
        lines.append(f"h_q = {heads}: {line}")
    return True, " | ".join(lines)


def _check_paged(factory):
    """Step 2's check: h_q = 128 in fp16 and 16 in bf16."""
    lines = []
    for heads, dtype in ((128, torch.float16), (16, torch.bfloat16)):
        inputs = reference.make_paged_inputs(len(LENGTHS), heads, LENGTHS, dtype=dtype, device="cpu", seed=heads,
                                             flat_large_last=True)
        out = checks.poisoned(tuple(inputs["q_nope"].shape), dtype, "cpu")
        runtime.run(runtime.compile_kernel(factory(heads, str(dtype)[6:])), inputs["q_nope"], inputs["q_pe"],
                    inputs["kv_cache"].view(-1, DIM_NOPE), inputs["pe_cache"].view(-1, DIM_PE), inputs["block_table"],
                    inputs["cache_seqlens"], out)
        passed, line = _compare(out, inputs, str(dtype)[6:])
        if not passed:
            return False, f"h_q = {heads}, {dtype}: {line}"
        lines.append(f"h_q = {heads}, {dtype}: {line}")
    return True, " | ".join(lines)


def _run_decode(program, inputs, num_split):
    batch, heads = inputs["q_nope"].shape[:2]
    lse = checks.poisoned((batch, heads, num_split), torch.float32, "cpu")
    partial = checks.poisoned((batch, heads, num_split, DIM_NOPE), torch.float32, "cpu")
    out = checks.poisoned((batch, heads, DIM_NOPE), inputs["q_nope"].dtype, "cpu")
    runtime.run(runtime.compile_kernel(program), inputs["q_nope"], inputs["q_pe"], inputs["kv_cache"].view(-1, DIM_NOPE),
                inputs["pe_cache"].view(-1, DIM_PE), inputs["block_table"], inputs["cache_seqlens"], lse, partial, out)
    return out, lse


def _check_step3(factory):
    """Step 3's check: one split and several (the 1-token sequence's other splits empty), fp16 and
    bf16; with splits, each split's lse too."""
    lines = []
    for heads, num_split, dtype in ((128, 1, torch.float16), (16, 4, torch.float16), (128, 2, torch.bfloat16)):
        inputs = reference.make_paged_inputs(len(LENGTHS), heads, LENGTHS, dtype=dtype, device="cpu", seed=heads,
                                             flat_large_last=True)
        out, lse = _run_decode(factory(heads, str(dtype)[6:], split=num_split > 1), inputs, num_split)
        passed, line = _compare(out, inputs, str(dtype)[6:])
        if passed and num_split > 1:
            lse_cmp = checks.compare_lse(lse, reference.split_lse_reference(**inputs, num_split=num_split))
            passed, line = lse_cmp.ok, f"{line}; each split's lse {lse_cmp}"
        if not passed:
            return False, f"h_q = {heads}, num_split = {num_split}, {dtype}: {line}"
        lines.append(f"h_q = {heads}, num_split = {num_split}, {dtype}: {line}")
    return True, " | ".join(lines)


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
    """Notebook 04b's ``check_schedule`` of a hand-scheduled factory (h_q = 128, fp16, split), then
    the same check at h_q = 16 without splits (:data:`FEW_HEADS_LENGTHS`): the Q loads that zero
    the padding rows of a head block and the unsplit store, which the notebook's 128 heads in
    splits never reach."""
    def check(factory):
        cases = [(128, SCHEDULE_LENGTHS, SCHEDULE_SPLIT, True), (16, FEW_HEADS_LENGTHS, 1, False)]
        lines = []
        for heads, lengths, num_split, flat_large_last in cases:
            inputs = reference.make_paged_inputs(len(lengths), heads, lengths, device="cpu", seed=7,
                                                 flat_large_last=flat_large_last)
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                result = hand_scheduled_notebook.check_schedule(
                    name, factory(heads, "float16", split=num_split > 1), inputs, num_split=num_split)
            if result is None or not result.ok:
                return False, printed.getvalue().strip()[:300]
            lines.append(printed.getvalue().strip())
        return True, " | ".join(lines)

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


_PADDING_LOAD = ("changes only a padding row of the head block (there are some only where h_q < 64): each row's "
                 "softmax and P V are its own, and padding rows are never stored")
_PADDING_STORE = ("the extra row, valid_h, exists only where h_q < 64, and is then row h_q: past the heads dimension, "
                  "so TileLang's bound guard drops the store (read in the generated CUDA at h_q = 16; the emulator "
                  "drops it too)")


def _rounding(name: str, tolerance: str = "2e-3", note: str = "") -> str:
    """The reason of an fp16 rounding that no affordable input tells apart from the fp32 kernel."""
    return (f"{ROUNDING}: `{name}` in fp16 is off by at most 2^-11 = 4.9e-4 relative a step, "
            f"within the tolerance of {tolerance} on every input the checks run" + (f" ({note})" if note else ""))


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    "combine_macro: constant L28: 0 -> 1":
        "the first chunk rescales the running total by 2^(-inf - max) = 0 before adding to it: the start value is wiped",
    "combine_macro: constant L30: 0 -> 1":
        "the first chunk rescales the running output by 2^(-inf - max) = 0 before adding to it: the start value is wiped",
    "mla_contiguous_program: constant L48: 0 -> 1":
        "the first page rescales acc_o by alpha = 2^((-inf - m) * scale) = 0 before P V adds to it: the start value is wiped",
    "mla_paged_program: constant L50: 0 -> 1":
        "the first page rescales acc_o by alpha = 2^((-inf - m) * scale) = 0 before P V adds to it: the start value is wiped",
    "mla_decode_program: constant L103: 0 -> 1":
        "an empty split's partial output is weighed by 2^(-inf - lse_max) = 0 in the combine: its value never counts",
    "mla_decode_seesaw_program: constant L148: 2 -> 3":
        "a third `p_full` barrier that nothing arrives at or waits on: the two used are the same",
    "mla_decode_seesaw_program: constant L149: 2 -> 3":
        "a third `stats` barrier that nothing arrives at or waits on: the two used are the same",
    "mla_decode_seesaw_program: constant L106: 0 -> 1":
        "warpgroup 1 stores lse in place of warpgroup 0, the same value bit for bit: both end with the same running "
        "max (each adopts the other's through M_shared) and the same l_i0 + l_i1 (fp32 addition commutes)",
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
    "hand_scheduled_parts: constant L37: 1 -> 2":
        "alpha = 2^((m_prev - m) * scale) is at most 1, never 2, so the warp vote always rescales: O *= alpha with "
        "alpha = 1 where it would have skipped leaves O as it was",
    "hand_scheduled_parts: constant L38: 1 -> 2":
        "the flag only feeds T.any_sync, which tells zero from nonzero: 2 votes as 1 does",
    "mqa_decode_program: constant L33: 0 -> 1":
        "the first block rescales acc_o by alpha = 2^((-inf - m) * scale) = 0 before P V adds to it: the start "
        "value is wiped",
    "mla_contiguous_program: constant L49: 0 -> 1":
        "the first page rescales l_i by alpha = 0 before adding its row sum: the start value is wiped",
    "mla_paged_program: constant L51: 0 -> 1":
        "the first page rescales l_i by alpha = 0 before adding its row sum: the start value is wiped",
    "combine_macro: constant L19: 4 -> 5":
        "a longer `part` whose extra chunk entries nothing reads or writes: the chunk's 4 columns a split fill "
        "part[u * 4 + c] < chunk * 4",
    "mla_decode_ws_program: constant L107: 0 -> 1":
        "the first page's alpha is 0 in every row, so the value warpgroup's warp vote rescales acc_o_r by 0 before "
        "P V adds to it: the start value is wiped",
    "mla_decode_ws_program: mask L32: k > 0 -> k >= 0":
        "at k = 0 the score warpgroup also waits on p_empty with parity (k - 1) % 2 = 1, which a fresh barrier "
        "passes at once (the producer's first-pass idiom; the CUDA waits on parity (k + 1) & 1)",
    "mla_decode_seesaw_program: constant L47: 0 -> 1":
        "each warpgroup's first rescale of acc_o (its own first block's, or adopting block 0's max) has alpha = "
        "2^(-inf - m) = 0 before P V adds to it: the start value is wiped",
    "mla_decode_seesaw_program: constant L49: 0 -> 1":
        "each warpgroup's first rescale of l_i (its own first block's, or adopting block 0's max) has alpha = "
        "2^(-inf - m) = 0 before a row sum adds to it: the start value is wiped",
    "mla_decode_seesaw_program: constant L145: 2 -> 3":
        "a third `full_r` barrier that is initialised and nothing arrives at or waits on (read in the generated "
        "CUDA): the two used are the same",
    "mla_decode_seesaw_program: constant L147: 2 -> 3":
        "a third `empty_r` barrier that is initialised and nothing arrives at or waits on (read in the generated "
        "CUDA): the two used are the same",
    "mla_decode_seesaw_program: drop L87: T.barrier_arrive(empty_r[0]) -> pass":
        "this branch runs only on the last pair of an odd number of blocks: the stage it releases is one the "
        "producer never waits for again",
    "mla_decode_seesaw_program: drop L38: T.fence_proxy_async() -> pass":
        EMULATOR_LIMIT + ": the emulator does not model the async proxy, so P's generic-proxy stores into K_pe_s "
        "are always visible to the wgmma that reads them there (on a GPU they may not be)",
    "hand_scheduled_parts: constant L54: 0 -> 1":
        "an empty split's partial output is weighed by 2^(-inf - lse_max) = 0 in the combine: its value never counts",
    "hand_scheduled_parts: mask L17: tok0 + BLOCK_N > seqlen -> tok0 + BLOCK_N >= seqlen":
        "also masks a last block that ends exactly at seqlen, where every token is before the end: the mask keeps them all",
    "mqa_decode_program: constant L34: 0 -> 1":
        "the first block rescales l_i by alpha = 2^((-inf - m) * scale) = 0 before adding its row sum: the start "
        "value is wiped",
    "mla_decode_ws_program: constant L83: 0 -> 1":
        "the first page's alpha is 0 in every row, so the warp vote rescales acc_o_l by 0 before P V adds to it: "
        "the start value is wiped",
    "mla_decode_ws_program: constant L85: 0 -> 1":
        "the first page rescales l_i by alpha = 0 before adding its row sum (an empty split runs one page too): "
        "the start value is wiped",
    "mqa_decode_program: narrow L27: accum -> dtype":
        "alpha rounded to fp16 multiplies acc_o and l_i alike, so their ratio, the output, is unchanged",
    "mla_paged_program: narrow L35: accum -> dtype":
        "alpha rounded to fp16 multiplies acc_o and l_i alike, so their ratio, the output, is unchanged",
    "mla_decode_seesaw_program: narrow L137: accum -> dtype":
        "warpgroup 1's lse_r1 is computed and never stored: only warpgroup 0 writes lse (store_half's writes_lse)",
    "hand_scheduled_parts: drop L76: T.fence_proxy_async() -> pass":
        EMULATOR_LIMIT + ": the emulator does not model the async proxy, so Q's stores are visible to "
        "the wgmma that reads them without the fence (on a GPU they may not be: TileLang's own fence "
        "comes after q_full's arrive)",
    "mla_decode_ws_program: drop L36: T.fence_proxy_async() -> pass":
        EMULATOR_LIMIT + ": the emulator does not model the async proxy, so P's "
        "generic-proxy stores are always visible to the value warpgroup's wgmma there (on a GPU they may not be)",
    "04b ring repair: mask L16: tx < 128 -> tx <= 128":
        "thread 128 joins the left consumer, idle above 64 threads; the right consumer's T.Parallel is "
        "re-based on its first thread, so every element is written once and `empty` still gets 256 "
        "arrivals a phase (read in the generated CUDA)",
    "04b ring repair: constant L16: 128 -> 129": "the same mutant as `tx < 128 -> tx <= 128` (above)",
    "mqa_decode_program: narrow L28: accum -> dtype":
        _rounding("l_i", tolerance="1e-2 (the MQA check's assert_close)"),
    "mqa_decode_program: narrow L29: accum -> dtype":
        _rounding("row_sum", tolerance="1e-2 (the MQA check's assert_close)"),
    "mla_contiguous_program: narrow L33: accum -> dtype":
        "alpha rounded to fp16 multiplies acc_o and l_i alike, so their ratio, the output, is unchanged",
    "mla_contiguous_program: narrow L35: accum -> dtype":
        _rounding("row_sum"),
    "mla_contiguous_program: mask L45: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "mla_contiguous_program: constant L45: 0 -> 1":
        _PADDING_LOAD,
    "mla_contiguous_program: mask L47: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "mla_contiguous_program: constant L47: 0 -> 1":
        _PADDING_LOAD,
    "mla_contiguous_program: mask L80: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "mla_paged_program: narrow L37: accum -> dtype":
        _rounding("row_sum"),
    "mla_paged_program: mask L47: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "mla_paged_program: constant L47: 0 -> 1":
        _PADDING_LOAD,
    "mla_paged_program: mask L49: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "mla_paged_program: constant L49: 0 -> 1":
        _PADDING_LOAD,
    "mla_paged_program: mask L83: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "mla_decode_program: narrow L45: accum -> dtype":
        "alpha rounded to fp16 multiplies acc_o and l_i alike, so their ratio, the output, is unchanged",
    "mla_decode_program: mask L58: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "mla_decode_program: constant L58: 0 -> 1":
        _PADDING_LOAD,
    "mla_decode_program: mask L60: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "mla_decode_program: constant L60: 0 -> 1":
        _PADDING_LOAD,
    "mla_decode_program: mask L98: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "mla_decode_program: mask L102: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "mla_decode_program: mask L106: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "mla_decode_ws_program: narrow L64: accum -> dtype":
        _rounding("alpha_v", note="it rescales only the value warpgroup's half of O, not the denominator"),
    "mla_decode_ws_program: narrow L65: accum -> dtype":
        _rounding("inv_l", note="one rounding of 1 / l per row, applied to the output only"),
    "mla_decode_ws_program: narrow L66: accum -> dtype":
        _rounding("inv_l_v", note="measured 3.11e-4 at 128 heads"),
    "mla_decode_seesaw_program: narrow L135: accum -> dtype":
        _rounding("l_other1", note="warpgroup 1's copy of warpgroup 0's share of the denominator, one rounding; it divides "
                  "only warpgroup 1's half of the output, and warpgroup 0 writes the lse"),
    "hand_scheduled_parts: mask L50: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "hand_scheduled_parts: mask L53: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "hand_scheduled_parts: mask L57: i < valid_h -> i <= valid_h":
        _PADDING_STORE,
    "hand_scheduled_parts: mask L71: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "hand_scheduled_parts: constant L71: 0 -> 1":
        _PADDING_LOAD,
    "hand_scheduled_parts: mask L73: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "hand_scheduled_parts: constant L73: 0 -> 1":
        _PADDING_LOAD,
    "hand_scheduled_parts: mask L75: i < valid_h -> i <= valid_h":
        _PADDING_LOAD,
    "hand_scheduled_parts: constant L75: 0 -> 1":
        _PADDING_LOAD,
}
