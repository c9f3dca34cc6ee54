"""Every TileLang kernel of the lessons, run by the CPU emulator against its torch reference.

Ragged shapes, fp16 and bf16, poisoned outputs (NaN: an element the kernel never writes fails),
the MLA decode schedules (auto / hand-written ws / seesaw) with a shuffled paged KV cache, ragged
sequence lengths and split-KV. The exercise solutions and wrong answers go through their
checkers, which use the emulator, in ``tests/test_exercises.py``. The Triton kernels are not
TileLang programs and are not covered.
"""
import pytest
import torch

from tilelang_tutorial import emulate
from tilelang_tutorial.lessons.gemm import configs as gemm_configs
from tilelang_tutorial.lessons.gemm import kernel as gemm_kernel
from tilelang_tutorial.lessons.mla import auto, common, mqa, reference, seesaw, ws
from tilelang_tutorial.lessons.rmsnorm import kernel as rmsnorm_kernel
from tilelang_tutorial.lessons.tiles import row_sum, scale_copy

# Every lesson kernel runs with the emulator's checks on (the default: uninitialised reads, races,
# limits); any finding fails the test -- false positives on the lessons' kernels: 0.
pytestmark = pytest.mark.filterwarnings("error::tilelang_tutorial.emulate.EmulatorWarning")


def rel_err(out, ref) -> float:
    out, ref = out.detach().double(), ref.detach().double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


def assert_matches(out, ref, tol, what="output"):
    unwritten = int(torch.isnan(out.float()).sum())
    assert unwritten == 0, f"{what}: {unwritten} elements never written"
    err = rel_err(out, ref)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:g}"


TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-6}
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


# ---------------------------------------------------------------------------------------------
# notebook 01
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_scale_copy(dtype):
    sc = scale_copy
    x = torch.randn(100, 200).to(TORCH[dtype])
    y = nan(100, 200, dtype=TORCH[dtype])
    emulate.run(sc.scale_copy_program(200, dtype=dtype), x, y, 1.5)
    assert_matches(y, sc.scale_copy_reference(x, 1.5), TOL[dtype] * 5 if dtype != "float32" else 1e-7)


@pytest.mark.parametrize("M,N", [(64, 1024), (37, 1000)])
def test_row_sum(M, N):
    rs = row_sum
    x = torch.randn(M, N).half()
    s = nan(M)
    emulate.run(rs.row_sum_program(N), x, s)
    assert_matches(s, rs.row_sum_reference(x), 1e-6)


# ---------------------------------------------------------------------------------------------
# notebook 02: gemm_relu
# ---------------------------------------------------------------------------------------------
def _seed():
    return gemm_configs.SEED_CONFIG.as_dict()


def _tuned(dtype):
    return gemm_configs.tuned_config(dtype).as_dict()


GEMM_CASES = [
    ("seed 256^3", 256, 256, 256, "float16", {}, False),
    ("seed ragged dynamic M", 200, 136, 72, "float16", {}, True),
    ("tuned fp16", 256, 512, 128, "float16", "tuned", False),
    ("tuned bf16 ragged dynamic M", 130, 300, 200, "bfloat16", "tuned", True),
    ("store_via_shared", 128, 128, 512, "float16", {"store_via_shared": True}, False),
    ("64x64x32 tiles, no swizzle", 100, 100, 100, "float16",
     {"block_M": 64, "block_N": 64, "block_K": 32, "swizzle_panel": 0, "num_stages": 1}, False),
    ("FullCol policy, row swizzle", 129, 257, 64, "float16",
     {"policy": "FullCol", "swizzle_order": "row", "threads": 256}, False),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=[c[0] for c in GEMM_CASES])
def test_gemm_relu(case):
    _, M, N, K, dtype, cfg, dyn = case
    cfg = _tuned(dtype) if cfg == "tuned" else {**_seed(), **cfg}
    tdt = TORCH[dtype]
    a = torch.randn(M, K).to(tdt)
    b = torch.randn(K, N).to(tdt)
    c = nan(M, N, dtype=tdt)
    prog = gemm_kernel.gemm_relu_program(M, N, K, in_dtype=dtype, dynamic_m=dyn, **cfg)
    emulate.run(prog, a, b, c)
    assert_matches(c, gemm_kernel.gemm_relu_reference(a, b), TOL[dtype])


# ---------------------------------------------------------------------------------------------
# notebook 05: rmsnorm_silu
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("C,M", [(96, 50), (640, 33), (1024, 9)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rmsnorm_silu(C, M, dtype):
    rn = rmsnorm_kernel
    tdt = TORCH[dtype]
    x = torch.randn(M, C).to(tdt)
    g = (torch.rand(C) + 0.5).to(tdt)
    y = nan(M, C, dtype=tdt)
    emulate.run(rn.rmsnorm_silu_program(C, dtype), x, g, y, 1e-5)
    assert_matches(y, rn.rmsnorm_silu_reference(x, g, 1e-5), TOL[dtype])


@pytest.mark.parametrize("variant", ["naive", "two rows per thread"])
def test_rmsnorm_silu_variants(variant):
    rn = rmsnorm_kernel
    C, M = 96, 50
    x = torch.randn(M, C).half()
    g = (torch.rand(C) + 0.5).half()
    y = nan(M, C, dtype=torch.float16)
    prog = (rn.naive_rmsnorm_silu_program(C) if variant == "naive"
            else rn.rmsnorm_silu_program(C, config=rn.RMSNormSiLUConfig(4, 128, 2)))
    emulate.run(prog, x, g, y, 1e-5)
    assert_matches(y, rn.rmsnorm_silu_reference(x, g, 1e-5), 2e-3)


# ---------------------------------------------------------------------------------------------
# notebook 04: MLA decode
# ---------------------------------------------------------------------------------------------
def _mla_program(schedule, h_q, dtype, split, **knobs):
    factory = {"auto": auto.mla_decode_program, "ws": ws.mla_decode_ws_program,
               "seesaw": seesaw.mla_decode_seesaw_program}[schedule]
    return factory(h_q, dtype, split=split, **knobs)


def _mla_args(inp, h_q, num_split, dtype):
    """The kernel's arguments (as MLADecodePlan.run passes them): caches viewed as rows, the
    lse / o_partial workspaces, the output."""
    b = inp["q_nope"].shape[0]
    lse = nan(b, h_q, num_split)
    o_partial = nan(b, h_q, num_split, common.DIM_NOPE)
    out = nan(b, h_q, common.DIM_NOPE, dtype=TORCH[dtype])
    return (inp["q_nope"], inp["q_pe"], inp["kv_cache"].view(-1, common.DIM_NOPE),
            inp["pe_cache"].view(-1, common.DIM_PE), inp["block_table"], inp["cache_seqlens"], lse, o_partial, out)


MLA_CASES = [
    # schedule, h_q, lengths, num_split, dtype, knobs
    ("auto", 128, [100], 1, "float16", {}),
    ("auto", 16, [300, 70], 3, "float16", {}),
    ("auto", 64, [200, 5], 2, "bfloat16", {"num_stages": 1}),
    ("ws", 128, [100], 1, "float16", {}),
    ("ws", 16, [513, 5, 130], 4, "float16", {}),
    ("ws", 128, [190, 64], 2, "bfloat16", {}),
    ("seesaw", 128, [100], 1, "float16", {}),
    ("seesaw", 16, [200, 64], 2, "float16", {}),
    ("seesaw", 128, [513, 5], 3, "bfloat16", {}),
    ("seesaw", 64, [450], 1, "bfloat16", {}),
]


@pytest.mark.parametrize("case", MLA_CASES, ids=[f"{c[0]}-h{c[1]}-len{'_'.join(map(str, c[2]))}-split{c[3]}-{c[4]}"
                                                 for c in MLA_CASES])
def test_mla_decode(case):
    schedule, h_q, lens, num_split, dtype, knobs = case
    inp = reference.make_paged_inputs(len(lens), h_q, lens, dtype=TORCH[dtype], seed=len(lens))
    args = _mla_args(inp, h_q, num_split, dtype)
    emulate.run(_mla_program(schedule, h_q, dtype, num_split > 1, **knobs), *args)
    ref = reference.mla_decode_reference(inp["q_nope"], inp["q_pe"], inp["kv_cache"], inp["pe_cache"],
                                  inp["block_table"], inp["cache_seqlens"])
    assert_matches(args[-1], ref, 1e-2 if dtype == "bfloat16" else 2e-3, f"MLA {schedule} output")
    if num_split > 1:
        # every split of every sequence wrote its log-sum-exp (an empty split writes -inf)
        assert not torch.isnan(args[6]).any()


def test_gemm_relu_256_speed():
    """gemm_relu 256^3 fp16, seed config: the goal is <= 20 ms per run (after the first) on 2 cores."""
    import time

    k = emulate.compile(gemm_kernel.gemm_relu_program(256, 256, 256))
    args = (torch.randn(256, 256).half(), torch.randn(256, 256).half(), torch.empty(256, 256).half())
    k(*args)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        k(*args)
        ts.append(time.perf_counter() - t0)
    ms = sorted(ts)[2] * 1e3
    print(f"\ngemm_relu 256^3 fp16: {ms:.1f} ms per run (goal 20 ms)")
    assert ms < 200


def test_mla_two_block_speed():
    """Batch 1, 128 heads (two CTAs), 100 tokens: the goal is <= 100 ms per run on 2 cores."""
    import time

    inp = reference.make_paged_inputs(1, 128, [100])
    args = _mla_args(inp, 128, 1, "float16")
    for schedule in ("auto", "ws", "seesaw"):
        k = emulate.compile(_mla_program(schedule, 128, "float16", False))
        k(*args)
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            k(*args)
            ts.append(time.perf_counter() - t0)
        ms = sorted(ts)[1] * 1e3
        print(f"\nMLA decode {schedule}, batch 1, 128 heads, 100 tokens: {ms:.1f} ms per run (goal 100 ms)")
        assert k.last_stats["blocks"] == 2 and ms < 1000


@pytest.mark.parametrize("lens,dtype", [([1, 100, 257], "float16"), ([64, 3], "bfloat16")])
def test_mqa_decode(lens, dtype):
    """The ramp into MLA: 64 heads sharing one K/V head, ragged sequence lengths."""
    b, heads, dim = len(lens), 64, 128
    tdt = TORCH[dtype]
    q = torch.randn(b, heads, dim).to(tdt)
    k, v = torch.randn(b, max(lens), dim).to(tdt), torch.randn(b, max(lens), dim).to(tdt)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    out = nan(b, heads, dim, dtype=tdt)
    emulate.run(mqa.mqa_decode_program(heads, dim, dtype), q, k, v, seqlens, out)
    assert_matches(out, mqa.mqa_decode_reference(q, k, v, seqlens), TOL[dtype])


def test_checks_are_on_and_silent_for_the_lesson_kernels():
    """The default run checks (limits, uninitialised reads, races) and finds nothing here."""
    from tilelang_tutorial.emulate import checks as emulate_checks
    k = emulate.compile(scale_copy.scale_copy_program(200))
    assert k.checks == emulate_checks.ALL_CHECKS
    x = torch.randn(100, 200).half()
    y = nan(100, 200, dtype=torch.float16)
    emulate.run(scale_copy.scale_copy_program(200), x, y, 1.5)
    assert emulate.last_findings() == []
