"""MLA decode (notebooks 04, 04b): the split heuristic and split ranges, the reference, bad input,
the generated code of every schedule for sm_90a and the plan on CPU (the emulator); numerics of
every schedule and the peers on a GPU.

The hand-written schedules (producer warpgroup, TMA, setmaxnreg, wgmma) are Hopper-only (sm_90a);
sm_86 / sm_89 do not have the 152 KiB of shared memory one Q tile + one KV block need and get
``UnsupportedArchError``.
"""
import math
import re

import pytest
import torch

from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.mla import auto, common, op, reference

GPU = runtime.gpu_available()
requires_gpu = pytest.mark.gpu   # conftest skips it without a GPU; `pytest -m gpu` selects it

#: The configuration the notebook compiles on CPU (same key -> TileLang's disk cache is shared).
DEMO = dict(h_q=128, dtype="float16", split=True, schedule="auto")   # notebook 04's tour


# ------------------------------------------------------------------------------------------------
# the split heuristic and the split ranges (no compile)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("b,h,kv,want", [
    (64, 128, 8192, 1), (128, 128, 32768, 1), (64, 128, 4096, 1),   # the grid already fills 132 SMs
    (128, 16, 8192, 1),
    (1, 128, 32768, 64), (4, 128, 32768, 16),                         # 2 / 8 CTAs -> split to ~128
    (1, 16, 100, 1),                                                  # 2 blocks: not worth it
])
def test_heuristic_choices(b, h, kv, want):
    assert common.choose_num_split(b, h, kv, sm_count=132) == want


def test_heuristic_properties():
    for b in (1, 2, 3, 5, 8, 13, 32, 64, 128):
        for h in common.SUPPORTED_HEADS:
            for kv in (1, 64, 65, 1000, 8192, 32768):
                s = common.choose_num_split(b, h, kv, sm_count=132)
                assert 1 <= s <= min(common.MAX_SPLIT, math.ceil(kv / 64))
                # never more CTAs than a few waves' worth
                assert b * math.ceil(h / 64) * s <= max(2 * 132, b * math.ceil(h / 64))


def split_ranges_program(block_N: int = 64):
    """``ranges[b, sp] = (is_empty, blk_begin, n_steps)`` of :func:`common.split_range_macro`
    for every sequence and split (``batch`` and ``num_split`` dynamic)."""
    import tilelang.language as T

    batch, num_split = T.dynamic("batch"), T.dynamic("num_split")
    split_range = common.split_range_macro(num_split, block_N)

    @T.prim_func
    def split_ranges(seqlens: T.Tensor([batch], "int32"), ranges: T.Tensor([batch, num_split, 3], "int32")):
        with T.Kernel(num_split, batch, threads=1) as (sp, bx):
            is_empty, blk_begin, n_steps = split_range(seqlens[bx], sp)
            ranges[bx, sp, 0] = T.if_then_else(is_empty, 1, 0)
            ranges[bx, sp, 1] = blk_begin
            ranges[bx, sp, 2] = n_steps

    return split_ranges


@pytest.mark.parametrize("num_split", [1, 3, 8, 64])
def test_split_ranges_cover_each_block_once(num_split):
    """The macro every schedule uses, run in the emulator: the non-empty splits cover a sequence's
    blocks once, in order; every split runs at least one step (its loads complete before exit)."""
    from tilelang_tutorial import emulate

    lens = [1, 64, 65, 640, 32768, 32769]
    ranges = torch.full((len(lens), num_split, 3), -1, dtype=torch.int32)
    emulate.run(split_ranges_program(), torch.tensor(lens, dtype=torch.int32), ranges)
    for b, n in enumerate(lens):
        seen = []
        for empty, begin, steps in ranges[b].tolist():
            assert steps >= 1
            if not empty:
                seen += list(range(begin, begin + steps))
        assert seen == list(range(math.ceil(n / 64))), (n, num_split)


def test_softmax_scales():
    assert common.default_softmax_scale() == pytest.approx(1 / math.sqrt(576))
    # DeepSeek-V3: 1/sqrt(192) * (0.1 * ln(40) + 1)^2
    assert common.deepseek_v3_softmax_scale() == pytest.approx((0.1 * math.log(40) + 1) ** 2 / math.sqrt(192))


# ------------------------------------------------------------------------------------------------
# the reference (CPU)
# ------------------------------------------------------------------------------------------------
def test_reference_matches_dense_attention():
    x = reference.make_paged_inputs(3, 16, [1, 65, 130], dtype=torch.float32, seed=1)
    ref = reference.mla_decode_reference(**x)
    kv = x["kv_cache"].reshape(-1, 512)
    pe = x["pe_cache"].reshape(-1, 64)
    for i, n in enumerate(x["cache_seqlens"].tolist()):
        rows = torch.cat([torch.arange(p * 64, p * 64 + 64) for p in x["block_table"][i].tolist()])[:n]
        q = torch.cat([x["q_nope"][i], x["q_pe"][i]], dim=-1)[None]          # (1, h, 576)
        k = torch.cat([kv[rows], pe[rows]], dim=-1)[None, None].expand(1, 16, n, 576)
        v = kv[rows][None, None].expand(1, 16, n, 512)
        want = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, scale=1 / 24)
        # sequence 1's scores are near -16384 (make_paged_inputs): fp32 rounds them to 1e-3, and
        # the two orders of operations (scale before or after the dot) differ by that much; the
        # sequences of ordinary scores are held to fp32's own agreement
        extreme = i % 2 == 1
        torch.testing.assert_close(ref[i], want[0, :, 0], rtol=1e-3 if extreme else 1e-4, atol=3e-4 if extreme else 1e-5)


def test_every_second_sequence_has_scores_far_below_zero_or_past_fp16():
    """make_paged_inputs: sequences 1 and 3 have every score far below zero or past fp16's 65,504,
    sequences 0 and 2 ordinary ones, each with a spread between tokens that is neither one-hot nor
    flat (a standard deviation of 0.3 to 3 after the scale)."""
    x = reference.make_paged_inputs(4, 16, [1, 63, 65, 130], seed=0)
    kv, pe = x["kv_cache"].reshape(-1, 64, 512), x["pe_cache"].reshape(-1, 64, 64)
    for i, n in enumerate(x["cache_seqlens"].tolist()):
        pages = x["block_table"][i, : math.ceil(n / 64)].long()
        c, k_pe = kv[pages].reshape(-1, 512)[:n].float(), pe[pages].reshape(-1, 64)[:n].float()
        scores = x["q_nope"][i].float() @ c.T + x["q_pe"][i].float() @ k_pe.T      # (heads, n)
        if i == 1:
            assert scores.max() < -10000
        elif i == 3:
            assert scores.min() > 65504
        else:
            assert scores.abs().max() < 300
        if n > 1:
            spread = (scores / 24).std(dim=1)
            assert (spread > 0.3).all() and (spread < 3).all(), spread


def test_the_flat_last_sequence_overflows_fp16_sums_and_leaves_the_others_as_they_were():
    """make_paged_inputs(flat_large_last=True): the last sequence weighs its first page 1 and every
    later token about 4.7e-4, over values near 1,500 (one page of P V passes 65,504, a later page's
    row sum, 0.03, is below half of fp16's step at 64); the other sequences are unchanged."""
    lens = [1, 63, 65, 130, 512]
    plain = reference.make_paged_inputs(5, 16, lens, seed=0)
    x = reference.make_paged_inputs(5, 16, lens, seed=0, flat_large_last=True)
    for key in ("q_nope", "q_pe"):
        assert torch.equal(plain[key][:4], x[key][:4])
    kv, pe = x["kv_cache"].reshape(-1, 64, 512).float(), x["pe_cache"].reshape(-1, 64, 64).float()
    pages = x["block_table"][4, :8].long()
    scores = (x["q_nope"][4].float() @ kv[pages].reshape(-1, 512).T
              + x["q_pe"][4].float() @ pe[pages].reshape(-1, 64).T) / 24     # (heads, 512), scaled
    weights = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    assert (weights[:, :64] == 1).all() and torch.allclose(weights[:, 64:], torch.tensor(4.68e-4), rtol=1e-2)
    assert (weights[:, 64:128].sum(dim=1) < 0.03125).all()
    assert (kv[pages[0]].sum(dim=0) > 65504).all() and (kv[pages] > 0).all()


# ------------------------------------------------------------------------------------------------
# bad input: validated before require_gpu, so checkable without a GPU
# ------------------------------------------------------------------------------------------------
def _good(**over):
    x = reference.make_paged_inputs(2, 16, [65, 3], seed=0)
    x.update(over)
    return x


@pytest.mark.parametrize("mutate,err,msg", [
    (lambda x: x.update(q_nope=x["q_nope"][..., :256].contiguous()), ValueError, "512"),
    (lambda x: x.update(q_nope=torch.zeros(2, 24, 512, dtype=torch.float16)), ValueError, "heads"),
    (lambda x: x.update(q_pe=x["q_pe"][..., :32].contiguous()), ValueError, "q_pe"),
    (lambda x: x.update(q_pe=x["q_pe"].float()), TypeError, "q_pe must be float16"),
    (lambda x: x.update(q_nope=x["q_nope"].float(), q_pe=x["q_pe"].float()), TypeError, "q_nope must be"),
    (lambda x: x.update(kv_cache=x["kv_cache"].to(torch.bfloat16)), TypeError, "kv_cache"),
    (lambda x: x.update(kv_cache=x["kv_cache"][:, :32].contiguous()), ValueError, "kv_cache"),
    (lambda x: x.update(pe_cache=x["pe_cache"][:-1].contiguous()), ValueError, "pe_cache"),
    (lambda x: x.update(block_table=x["block_table"].long()), TypeError, "block_table must be int32"),
    (lambda x: x.update(block_table=x["block_table"][:, :1].contiguous()), ValueError, "too short"),
    (lambda x: x.update(cache_seqlens=torch.tensor([65, 0], dtype=torch.int32)), ValueError, ">= 1"),
    (lambda x: x.update(cache_seqlens=torch.tensor([65], dtype=torch.int32)), ValueError, "cache_seqlens"),
    (lambda x: x["block_table"].__setitem__((1, 0), 999), ValueError, "page ids"),
    (lambda x: x.update(q_nope=x["q_nope"].transpose(0, 1).contiguous().transpose(0, 1)), ValueError, "contiguous"),
])
def test_bad_input_is_rejected_before_needing_a_gpu(mutate, err, msg):
    x = _good()
    mutate(x)
    with pytest.raises(err, match=msg):
        op.mla_decode(**x)


def test_bad_num_split():
    with pytest.raises(ValueError, match="num_split"):
        op.mla_decode(**_good(), num_split=0)
    with pytest.raises(ValueError, match="num_split"):
        op.mla_decode(**_good(), num_split=1000)


def test_unsupported_arch_is_a_clear_error():
    for arch in ("sm_86", "sm_89"):
        with pytest.raises(op.UnsupportedArchError, match="shared memory"):
            op.build_mla_decode(128, arch=arch)


def test_program_validation():
    with pytest.raises(ValueError, match="h_q"):
        auto.mla_decode_program(48)


# ------------------------------------------------------------------------------------------------
# compile for Hopper on CPU: the generated code has the structure the notebook describes
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hopper_source():
    with runtime.arch_override("sm_90a"):
        kernel = op.build_mla_decode(**DEMO)
    return kernel.get_kernel_source()


def test_sm90a_structure(hopper_source):
    src = hopper_source
    # 384 threads: 2 consumer warpgroups + the producer added by warp specialization
    assert "__launch_bounds__(384, 1)" in src
    assert re.search(r"warpgroup_reg_dealloc<\d+>", src) and re.search(r"warpgroup_reg_alloc<\d+>", src)
    assert "tma_load(KV_desc" in src and "arrive_and_expect_tx" in src
    shapes = set(re.findall(r"wgmma_ss<[^>]*?, (\d+), (\d+), (\d+), (?:false|true)", src))
    assert ("64", "32", "16") in shapes      # Q K^T: each warpgroup 64 x (64/2) columns
    assert ("64", "256", "16") in shapes     # P V:   each warpgroup 64 x 256 of acc_o
    assert re.search(r"float acc_o\[128\];", src)   # 64*256 fp32 / 128 threads
    assert re.search(r"float acc_s\[16\];", src)    # 64*32 fp32 / 128 threads
    assert "AllReduce<tl::MaxOp, 256" in src        # row max across both warpgroups
    assert src.count("__global__ void __launch_bounds__") == 2   # attention + combine


# ------------------------------------------------------------------------------------------------
# the hand-written warp-specialized schedules ("ws", and "seesaw", the sm_90a default)
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ws_source():
    with runtime.arch_override("sm_90a"):
        kernel = op.build_mla_decode(128, "float16", split=True, schedule="ws")
    return kernel.get_kernel_source()


@pytest.fixture(scope="module")
def seesaw_source():
    with runtime.arch_override("sm_90a"):
        kernel = op.build_mla_decode(128, "float16", split=True)     # None -> "seesaw" on sm_90a
    return kernel.get_kernel_source()


def test_default_schedule_on_sm90a_is_seesaw():
    assert op.resolve_schedule(None, "sm_90a") == "seesaw" == op.DEFAULT_SM90A_SCHEDULE
    assert op.resolve_schedule(None, "sm_80") == "auto"
    assert op.resolve_schedule("auto", "sm_90a") == "auto"


def test_ws_structure(ws_source):
    src = ws_source
    assert "__launch_bounds__(384, 1)" in src
    from tilelang_tutorial.lessons.mla import ws as W
    # the three roles and their register budgets
    assert f"warpgroup_reg_alloc<{W.REGS_SCORE}>" in src and f"warpgroup_reg_alloc<{W.REGS_VALUE}>" in src
    assert f"warpgroup_reg_dealloc<{W.REGS_PRODUCER}>" in src
    shapes = set(re.findall(r"wgmma_ss<[^>]*?, (\d+), (\d+), (\d+), (?:false|true)", src))
    assert shapes == {("64", "64", "16"), ("64", "256", "16")}   # whole 64 x 64 scores; 64 x 256 halves of O
    assert re.search(r"float acc_s\[32\];", src)                 # 64*64 fp32 / 128 threads
    # softmax rows live in one warpgroup: reductions over the 4 threads of a quad only
    assert "AllReduce<tl::MaxOp, 4," in src and "AllReduce<tl::MaxOp, 256" not in src
    # Q and the paged KV blocks arrive by TMA on the program's own mbarriers
    assert "tma_load(Q_desc, q_full" in src and "tma_load(KV_desc, kv_full" in src
    for bar in ("kv_empty", "p_full", "p_empty", "stats_ready"):
        assert f"{bar}[0].wait(" in src or f"{bar}[(" in src
    assert "__any_sync" in src                                     # the warp-uniform rescale skip
    assert src.count("__global__ void __launch_bounds__") == 2     # attention + combine


def test_seesaw_structure(seesaw_source):
    src = seesaw_source
    from tilelang_tutorial.lessons.mla import seesaw as S
    assert "__launch_bounds__(384, 1)" in src
    # two consumer warpgroups with the same budget, one producer
    assert src.count(f"warpgroup_reg_alloc<{S.REGS_CONSUMER}>") == 2
    assert f"warpgroup_reg_dealloc<{S.REGS_SEESAW_PRODUCER}>" in src
    shapes = set(re.findall(r"wgmma_ss<[^>]*?, (\d+), (\d+), (\d+), (?:false|true)", src))
    assert shapes == {("64", "64", "16"), ("64", "256", "16")}
    # both warpgroups compute whole 64 x 64 score tiles, each with its own accumulator
    assert re.search(r"float acc_s0\[32\];", src) and re.search(r"float acc_s1\[32\];", src)
    assert "AllReduce<tl::MaxOp, 4," in src and "AllReduce<tl::MaxOp, 256" not in src
    # each waits for the other's P and max; KV halves arrive on their own barriers
    assert "p_full[0].wait(" in src and "p_full[1].wait(" in src
    assert "tma_load(KV_desc, full_l[" in src and "tma_load(K_pe_desc, full_r[" in src
    # the score wgmma chain is left running while the other block's max is adopted
    assert "wait_wgmma<1>" in src
    assert "__any_sync" in src
    assert src.count("__global__ void __launch_bounds__") == 2     # attention + combine
    # page ids are read one block ahead: no TMA address is a global load of block_table
    tma = [line for line in src.splitlines() if "tma_load(KV_desc" in line or "tma_load(K_pe_desc" in line]
    assert len(tma) == 3 and all(line.rstrip().endswith("row0);") for line in tma), tma
    assert not any("block_table" in line for line in tma)
    assert re.search(r"page = condval_\d+;\s*\n\s*empty_l\[t\]\.wait", src)    # loaded before the wait


def test_combine_issues_its_loads_before_using_them(seesaw_source):
    # the combine kernel: no shared memory and no barrier; per chunk of COMBINE_CHUNK splits every
    # thread loads all partial outputs (float4) before the first is weighed
    combine = seesaw_source[seesaw_source.index("__launch_bounds__(128, 1) mla_decode_kernel_kernel_1("):]
    combine = combine[combine.index("{"):]
    assert "__syncthreads" not in combine and "shmem" not in combine
    loads = combine.index("*(float4*)(part + (u * 4)) = *(float4*)(o_partial")
    assert f"for (int u = 0; u < {common.COMBINE_CHUNK}; ++u)" in combine[:loads]
    assert loads < combine.index("exp2f((lse_c[")


def test_hand_written_schedule_validation():
    with pytest.raises(ValueError, match="schedule"):
        op.build_mla_decode(128, schedule="seesaw2", arch="sm_90a")
    for schedule in op.HAND_WRITTEN:
        with pytest.raises(op.UnsupportedArchError, match="sm_90a"):
            op.build_mla_decode(128, schedule=schedule, arch="sm_80")


# ------------------------------------------------------------------------------------------------
# GPU: numerics against the fp32 reference on fresh random inputs, poisoned outputs
# ------------------------------------------------------------------------------------------------
GPU_CASES = [
    # (lengths, num_split): ragged, 1/63/65, non-power-of-two batch; auto, none, many splits
    ([1, 63, 65, 64, 130, 1000], None),
    ([1, 63, 65, 64, 130, 1000], 1),
    ([1, 63, 65, 200, 5000], 7),              # sequences with fewer blocks than splits
    ([20000, 333, 4097], None),
]


#: (h_q, schedule) pairs run on the GPU: every schedule at the two head counts the benchmark uses,
#: the auto schedule at the others (each pair is 4 kernels: fp16/bf16 x split or not)
GPU_HEADS_SCHEDULES = [(h, s) for h in (16, 128) for s in op.SCHEDULES] + [(32, "auto"), (64, "auto")]


@pytest.fixture(scope="module")
def gpu_kernels():
    if not GPU:
        pytest.skip("needs a CUDA GPU")
    cfgs = [dict(h_q=h, dtype=d, split=s, schedule=sch) for h, sch in GPU_HEADS_SCHEDULES
            for d in ("float16", "bfloat16") for s in (False, True)]
    cfgs += [dict(h_q=128, dtype="float16", split=s, softmax_scale=common.deepseek_v3_softmax_scale())
             for s in (False, True)]
    op.prebuild(cfgs)   # compile them in parallel once


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("h,schedule", GPU_HEADS_SCHEDULES)
@pytest.mark.parametrize("lens,num_split", GPU_CASES)
def test_gpu_matches_reference(gpu_kernels, dtype, h, lens, num_split, schedule):
    x = reference.make_paged_inputs(len(lens), h, lens, dtype=getattr(torch, dtype), device="cuda",
                            seed=h + len(lens))
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
    op.mla_decode(**x, num_split=num_split, out=out, schedule=schedule)
    checks.assert_close(out, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE[dtype],
                        what=f"mla_decode {schedule} h={h} {dtype} lens={lens} split={num_split}")


@requires_gpu
@pytest.mark.parametrize("num_split", [1, 5])
def test_gpu_deepseek_scale(gpu_kernels, num_split):
    scale = common.deepseek_v3_softmax_scale()
    x = reference.make_paged_inputs(3, 128, [77, 1, 3000], device="cuda", seed=11)
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
    op.mla_decode(**x, num_split=num_split, softmax_scale=scale, out=out)
    checks.assert_close(out, reference.mla_decode_reference(**x, softmax_scale=scale),
                        tolerance=checks.TOLERANCE["float16"])


@requires_gpu
def test_gpu_split_matches_no_split(gpu_kernels):
    x = reference.make_paged_inputs(2, 128, [4096, 4001], device="cuda", seed=12)
    a = op.mla_decode(**x, num_split=1).float()
    for s in (2, 3, 16, 64):
        checks.assert_close(op.mla_decode(**x, num_split=s), a, tolerance=2e-3, what=f"split {s}")


# ------------------------------------------------------------------------------------------------
# plan / run: the fast path (GPU or emulator, whichever this machine runs)
# ------------------------------------------------------------------------------------------------
PLAN_LENS = [5, 70]     # a one-page and a two-page sequence, the second ragged


@pytest.fixture(scope="module")
def planned():
    """A plan for notebook 04's configuration (h 128, fp16, split, auto: the compile is shared
    with the notebook) and inputs it was made for."""
    device = runtime.mode().device
    x = reference.make_paged_inputs(len(PLAN_LENS), 128, PLAN_LENS, device=device, seed=21)
    return op.plan(**x, num_split=2, schedule="auto"), x


def test_planned_run_equals_the_simple_call_and_the_reference(planned):
    the_plan, x = planned
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, x["q_nope"].device)
    the_plan.run(**x, out=out)
    simple = op.mla_decode(**x, num_split=2, schedule="auto")
    assert torch.equal(out, simple), "plan.run and mla_decode run the same kernel on the same inputs"
    checks.assert_close(out, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"])


@pytest.mark.parametrize("change,err,msg", [
    (lambda x: x.update(q_nope=x["q_nope"][:1], q_pe=x["q_pe"][:1]), ValueError, "make a new plan"),
    (lambda x: x.update(block_table=torch.cat([x["block_table"]] * 2, dim=1)), ValueError, "block_table"),
    (lambda x: x.update(kv_cache=x["kv_cache"].to(torch.bfloat16)), TypeError, "float16"),
    (lambda x: x.update(cache_seqlens=x["cache_seqlens"].to("meta")), ValueError, "tensors on"),
])
def test_a_plan_rejects_inputs_it_was_not_made_for(planned, change, err, msg):
    the_plan, x = planned
    x = dict(x)
    change(x)
    with pytest.raises(err, match=msg):
        the_plan.run(**x)


@requires_gpu
def test_gpu_planned_run_does_not_sync_and_replays_in_a_cuda_graph(planned):
    the_plan, x = planned
    the_plan.run(**x)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")          # any host sync inside run() raises
    try:
        the_plan.run(**x)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        captured = the_plan.run(**x)
    torch.cuda.current_stream().wait_stream(stream)
    fresh = reference.make_paged_inputs(len(PLAN_LENS), 128, PLAN_LENS, device="cuda", seed=22)
    for name in ("q_nope", "q_pe", "kv_cache", "pe_cache"):
        x[name].copy_(fresh[name])                   # new values in the captured buffers
    captured.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    checks.assert_close(captured, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"],
                        what="CUDA-graph replay of plan.run with new inputs")


# ------------------------------------------------------------------------------------------------
# notebook 04's steps and the reader's factory (GPU, else the emulator)
# ------------------------------------------------------------------------------------------------
STEP_LENS = [1, 130]    # one token, and two full pages and a ragged third


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("h", [128, 16])
@pytest.mark.parametrize("step", ["contiguous", "paged"])
def test_step_kernels_match_the_reference(step, h):
    from tilelang_tutorial.lessons.mla import steps

    device = runtime.mode().device
    x = reference.make_paged_inputs(len(STEP_LENS), h, STEP_LENS, device=device, seed=h)
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, device)
    arch = "sm_90a" if not GPU else None
    if step == "contiguous":
        kernel = runtime.compile_kernel(steps.mla_contiguous_program(h), arch=arch)
        runtime.run(kernel, *steps.contiguous_view(x), out)
    else:
        kernel = runtime.compile_kernel(steps.mla_paged_program(h), arch=arch)
        runtime.run(kernel, x["q_nope"], x["q_pe"], x["kv_cache"].view(-1, 512), x["pe_cache"].view(-1, 64),
                    x["block_table"], x["cache_seqlens"], out)
    checks.assert_close(out, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"],
                        what=f"step {step}, h={h}")


def test_the_step_changes_name_the_lines_that_changed():
    from tilelang_tutorial.lessons.mla import steps

    paged = steps.changes(("steps", "mla_contiguous_program"), ("steps", "mla_paged_program"))
    assert "+                row0 = block_table[bx, k] * PAGE_SIZE" in paged
    assert '"""' not in paged and len(paged.splitlines()) < 30
    split = steps.changes(("steps", "mla_paged_program"), ("auto", "mla_decode_program"))
    assert "split_range(seqlen, sp)" in split and "page = blk_begin + k" in split


def test_the_changes_from_section_1s_kernel_leave_out_renames_and_comments():
    from tilelang_tutorial.lessons.mla import steps

    ramp = steps.changes(("mqa", "mqa_decode_program"), ("steps", "mla_contiguous_program"),
                         renames={"heads": "BLOCK_H", "dim": "dv", "Out": "Output", "P_shared": "S_shared"})
    assert "as (hb, bx)" in ramp and "T.annotate_layout" in ramp and "T.min(i, valid_h - 1)" in ramp
    assert ramp.count("policy=T.GemmWarpPolicy.FullCol") == 3
    # renamed only (acc_s), or differing only in a comment (reduce_max): not changes
    assert "acc_s = T.alloc_fragment" not in ramp and "T.reduce_max" not in ramp
    assert not [line for line in ramp.splitlines()[2:] if line[1:].strip().startswith("#")]
    unrenamed = steps.changes(("mqa", "mqa_decode_program"), ("steps", "mla_contiguous_program"))
    assert "acc_s = T.alloc_fragment" in unrenamed


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_a_plan_builds_the_factory_it_is_given():
    """plan(program=...) compiles the caller's factory (a notebook's kernel cell), not the package's:
    a factory with the wrong scale gives wrong numbers through plan.run."""
    device = runtime.mode().device
    x = reference.make_paged_inputs(1, 16, [70], device=device, seed=21)
    calls = []

    def wrong_scale(h_q, dtype, *, split, softmax_scale, num_stages):
        calls.append((h_q, dtype, split, num_stages))
        return auto.mla_decode_program(h_q, dtype, split=split, softmax_scale=0.5, num_stages=num_stages)

    the_plan = op.plan(**x, num_split=2, program=wrong_scale, schedule="ws")   # schedule is ignored
    assert calls == [(16, "float16", True, 2)] and the_plan.schedule == "wrong_scale"
    out = the_plan.run(**x)
    assert not checks.compare(out, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"]).ok



@requires_gpu
@pytest.mark.parametrize("num_split", [1, 3])
def test_gpu_a_plan_of_the_notebook_factory_equals_the_package_plan(num_split):
    x = reference.make_paged_inputs(3, 128, [70, 5, 190], device="cuda", seed=3)
    mine = op.plan(**x, num_split=num_split, program=auto.mla_decode_program).run(**x).clone()
    package = op.plan(**x, num_split=num_split, schedule="auto").run(**x)
    assert torch.equal(mine, package), "the same program, compiled twice, must give the same bits"
    checks.assert_close(mine, reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"])


@pytest.mark.parametrize("split", [False, True])
def test_ptxas_keeps_the_seesaws_wgmma_asynchronous(split):
    """ptxas serializes every wgmma of a kernel (a wait after each) when it cannot prove that no other
    instruction reads an accumulator in flight (C7514) or runs short of registers (C7511), which
    costs the overlap the schedule is written for. The lesson's default schedule must not be."""
    from tilelang_tutorial.inspector import resource_usage

    with runtime.arch_override("sm_90a"):
        kernel = op.build_mla_decode(128, "float16", split=split)
    usage = resource_usage(kernel)
    if not usage:
        pytest.skip("no ptxas on this machine")
    for name, use in usage.items():
        assert "registers" in use and "wgmma_serialized" not in use, (name, use)


# ------------------------------------------------------------------------------------------------
# FlashMLA's kernel as a benchmark peer (flashmla_peer.py, where tools/gpu/build_flashmla_peer.sh built it)
# ------------------------------------------------------------------------------------------------

def test_flashmla_peer_says_why_it_is_missing(monkeypatch, tmp_path):
    from tilelang_tutorial.lessons.mla import bench, flashmla_peer

    monkeypatch.setenv(flashmla_peer.LIB_ENV, str(tmp_path / "libflashmla_peer.so"))
    ok, why = flashmla_peer.available()
    assert not ok and "FlashMLA not built" in why and "build_flashmla_peer.sh" in why
    (tmp_path / "libflashmla_peer.so").write_bytes(b"not a library")
    ok, why = flashmla_peer.available()
    assert not ok and "does not load" in why
    # the benchmark records the reason instead of the peer, and never makes it
    made = []
    assert bench.library_peer((ok, why), lambda: made.append(1), None, None, "float16") == {"error": why}
    assert not made


def test_flashmla_peer_declares_the_c_entry_points_arguments(monkeypatch):
    """ctypes passes what flashmla_peer.cu's functions take: a miscount would shift every pointer"""
    import ctypes

    from tilelang_tutorial.lessons.mla import flashmla_peer
    from tilelang_tutorial.results import REPO_ROOT

    source = (REPO_ROOT / "tilelang_tutorial/lessons/mla/flashmla_peer.cu").read_text()

    def params(name):
        sig = re.search(rf"int {name}\((.*?)\)\s*{{", source, re.S)[1]
        kinds = []
        for p in sig.split(","):
            p = p.strip()
            kinds.append(ctypes.c_void_p if "*" in p or p.startswith("cudaStream_t") else
                         ctypes.c_float if p.startswith("float ") else ctypes.c_int)
        return kinds

    class FakeLib:                     # what _load sets, without loading a library
        def __getattr__(self, name):
            f = type("F", (), {})()
            setattr(self, name, f)
            return f

    fake = FakeLib()
    monkeypatch.setattr(ctypes, "CDLL", lambda path: fake)
    monkeypatch.setattr(flashmla_peer, "_lib", None)
    flashmla_peer._load()
    assert fake.flashmla_decode.argtypes == params("flashmla_decode")
    assert fake.flashmla_schedule.argtypes == params("flashmla_schedule")
    assert len(params("flashmla_decode")) == 18


@requires_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_flashmla_peer_matches_the_reference_on_a_ragged_batch(dtype):
    from tilelang_tutorial.lessons.mla import flashmla_peer

    ok, why = flashmla_peer.available()
    if not ok:
        pytest.skip(why)
    x = reference.make_paged_inputs(5, 128, [1, 64, 65, 700, 3001], dtype=dtype, device="cuda", seed=11)
    peer = flashmla_peer.FlashMLADecode(**x)
    checks.assert_close(peer.run(), reference.mla_decode_reference(**x), tolerance=checks.TOLERANCE[str(dtype)[6:]],
                        what="FlashMLA's kernel through flashmla_peer")


def test_split_lse_reference_adds_up_to_the_whole_sequence_and_marks_empty_splits():
    """The splits' log-sum-exps, combined, are the whole sequence's; a 1-token sequence's later
    splits are empty (-inf)."""
    x = reference.make_paged_inputs(2, 16, [1, 300], device="cpu", seed=5)
    whole = reference.split_lse_reference(**x, num_split=1)
    parts = reference.split_lse_reference(**x, num_split=3)
    assert torch.isinf(parts[0, :, 1:]).all() and torch.isfinite(parts[1]).all()
    combined = torch.logsumexp(parts * math.log(2), dim=-1) / math.log(2)
    torch.testing.assert_close(combined, whole[..., 0], rtol=1e-12, atol=1e-9)
