"""The CPU emulator on Blackwell (sm_100a) programs: tensor memory (``T.alloc_tmem``) and TCGEN5MMA.

The lesson's TMEM GEMM (``tilelang_tutorial/lessons/gemm/blackwell.py``) against torch on ragged
shapes, ``clear_accum`` on a TMEM accumulator that already holds values, the mbarrier the MMA's
completion arrives on (the synchronous ``T.gemm(..., mbar=)`` and the explicit asynchronous
``T.tcgen05_gemm``), and the forms that stay unsupported. Outputs are poisoned with NaN (an element
the kernel never writes fails); the emulator's TMEM starts poisoned too, so a GEMM that ignored
``clear_accum=True`` would leave NaN behind.
"""
import pytest
import torch

import emulate_kernels as K
from tilelang_tutorial import emulate
from tilelang_tutorial.lessons.gemm.blackwell import gemm_relu_tmem_program

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {"float16": 1e-2, "bfloat16": 2e-2}


def rel_err(out, ref) -> float:
    out, ref = out.detach().double(), ref.detach().double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def assert_matches(out, ref, tol, what="output"):
    unwritten = int(torch.isnan(out.float()).sum())
    assert unwritten == 0, f"{what}: {unwritten} elements never written"
    err = rel_err(out, ref)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:g}"


def nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


# =============================================================================================
# the lesson's program
# =============================================================================================
@pytest.mark.parametrize("M,N,K,dtype,knobs", [
    (200, 130, 96, "float16", {}),
    (1, 16, 16, "float16", {}),
    (200, 130, 300, "float16", {"block_K": 64}),             # 5 K steps, the last one ragged
    (200, 130, 300, "bfloat16", {"block_K": 64}),
    (257, 70, 100, "bfloat16", {"block_N": 32, "block_K": 32, "num_stages": 2, "dynamic_m": True}),
])
def test_gemm_relu_tmem_program(M, N, K, dtype, knobs):
    prog = gemm_relu_tmem_program(M, N, K, in_dtype=dtype, **knobs)
    a, b = torch.randn(M, K).to(TORCH[dtype]), torch.randn(K, N).to(TORCH[dtype])
    c = nan(M, N, dtype=TORCH[dtype])
    emulate.run(prog, a, b, c)
    assert_matches(c, torch.relu(a.float() @ b.float()), TOL[dtype])
    st = emulate.last_stats()
    steps = -(-K // knobs.get("block_K", 64))
    # one MMA-completion arrival per T.gemm call (and nothing else arrives in this program)
    assert st["mbarrier_arrivals"] == st["blocks"] * steps
    assert st["gemm_flops"] == st["blocks"] * steps * 2 * 128 * knobs.get("block_N", 128) * knobs.get("block_K", 64)


# =============================================================================================
# clear_accum on a TMEM accumulator that holds values
# =============================================================================================
def test_clear_accum_overwrites_what_tmem_holds():
    """TMEM is loaded with large garbage first; clear_accum=(ko == 0) must discard it."""
    M, N, Kd = 160, 96, 80                       # 3 K steps of 32, ragged M and N
    a, b = torch.randn(M, Kd).half(), torch.randn(Kd, N).half()
    garbage = torch.randn(M, N) * 1e4
    c = nan(M, N)
    emulate.run(K.tmem_gemm_preloaded(M, N, Kd, clear_first=True), a, b, garbage, c)
    assert_matches(c, a.float() @ b.float(), 1e-5)


def test_without_clear_accum_the_gemm_accumulates_onto_tmem():
    """clear_accum=False on every step: C = C0 + A @ B, C0 being what TMEM held before the loop."""
    M, N, Kd = 160, 96, 80
    a, b = torch.randn(M, Kd).half(), torch.randn(Kd, N).half()
    c0 = torch.randn(M, N) * 10
    c = nan(M, N)
    emulate.run(K.tmem_gemm_preloaded(M, N, Kd, clear_first=False), a, b, c0, c)
    assert_matches(c, c0 + a.float() @ b.float(), 1e-5)
    assert rel_err(c, a.float() @ b.float()) > 0.5          # C0 really is in there


# =============================================================================================
# the completion mbarrier
# =============================================================================================
def test_sync_gemm_arrives_on_its_barrier():
    """The synchronous T.gemm(..., mbar=) arrives once per call (the phase flips every step), so
    the program's own wait for parity ko % 2 after it passes, as on the GPU."""
    M, N, Kd = 128, 64, 96
    a, b = torch.randn(M, Kd).half(), torch.randn(Kd, N).half()
    c = nan(M, N)
    emulate.run(K.tmem_gemm_preloaded(M, N, Kd, user_wait=True), a, b, torch.zeros(M, N), c)
    assert_matches(c, a.float() @ b.float(), 1e-5)
    assert emulate.last_stats()["mbarrier_arrivals"] == 3


def test_completion_barrier_with_a_wrong_count_deadlocks():
    """One MMA completion is one arrival: with T.alloc_barrier(2) the phase T.gemm waits for never
    completes -- the GPU hangs, the emulator reports it."""
    M, N, Kd = 128, 64, 64
    with pytest.raises(emulate.Deadlock) as ei:
        emulate.run(K.tmem_gemm_preloaded(M, N, Kd, barrier_count=2), torch.randn(M, Kd).half(),
                    torch.randn(Kd, N).half(), torch.zeros(M, N), nan(M, N))
    msg = str(ei.value)
    assert "waits in T.gemm(..., mbar=mma_done) for mbarrier mma_done to complete phase 0" in msg, msg
    assert "expects 2 arrivals per phase" in msg and "1 of 2 arrivals" in msg, msg


@pytest.mark.parametrize("commit", ["mbar", "arrive"])
def test_tcgen05_gemm_explicit_wait(commit):
    """T.tcgen05_gemm does not wait; the result is there once the program's wait passes. Its
    completion arrives on mbar=, or (mbar=None) one warp's T.tcgen05_mma_arrive commits."""
    M, N, Kd = 200, 100, 70                       # ragged everywhere, transpose_B
    a, b = torch.randn(M, Kd).bfloat16(), torch.randn(N, Kd).bfloat16()
    c = nan(M, N)
    emulate.run(K.tcgen05_gemm_explicit(M, N, Kd, commit=commit), a, b, c)
    assert_matches(c, a.float() @ b.float().t(), 1e-5)
    st = emulate.last_stats()
    assert st["mbarrier_arrivals"] == st["blocks"] * 3
    if commit == "arrive":
        assert st["roles"] > 0                    # `if tx < 32: T.tcgen05_mma_arrive(bar)` is a role


def test_tcgen05_gemm_wrong_parity_deadlocks():
    with pytest.raises(emulate.Deadlock) as ei:
        emulate.run(K.tcgen05_gemm_explicit(128, 64, 64, parity_shift=1), torch.randn(128, 64).bfloat16(),
                    torch.randn(64, 64).bfloat16(), nan(128, 64))
    assert "waits for mbarrier bar to complete a phase of parity 1" in str(ei.value)


def test_sync_tmem_gemm_inside_a_role():
    M, N, Kd = 130, 64, 96
    a, b = torch.randn(M, Kd).half(), torch.randn(Kd, N).half()
    c = nan(M, N)
    emulate.run(K.tmem_gemm_warp_specialised(M, N, Kd), a, b, c)
    assert_matches(c, a.float() @ b.float(), 1e-5)
    st = emulate.last_stats()
    assert st["roles"] == 2 * st["blocks"] and st["role_switches"] > 0


# =============================================================================================
# still unsupported / rejected
# =============================================================================================
@pytest.mark.parametrize("what,construct,detail", [
    ("2cta", "T.tcgen05_gemm(..., use_2cta=True)", "two-CTA GEMMs"),
    ("no_mbar", "T.gemm into tensor memory (C_t) without mbar=", "pass mbar=T.alloc_barrier(1)"),
    ("tcgen05_fragment", "T.tcgen05_gemm with C = C_l (scope local.fragment)", "C must be a T.alloc_tmem buffer"),
])
def test_unsupported_tmem_gemm_forms(what, construct, detail):
    with pytest.raises(emulate.UnsupportedConstruct) as ei:
        emulate.compile(K.tmem_gemm_unsupported(what))
    assert ei.value.construct == construct
    assert detail in str(ei.value) and "emulate_kernels.py:" in str(ei.value), str(ei.value)


# =============================================================================================
# the IR encoding the emulator reads for these programs
# =============================================================================================
def test_tmem_ir_encoding_guard():
    """Fails naming what changed if TileLang no longer encodes tensor memory, the GEMM's mbar slot,
    T.tcgen05_gemm or T.tcgen05_mma_arrive the way emulate/encoding.py reads them."""
    from tvm import tirx as tir

    from tilelang_tutorial.emulate import encoding as E

    problems = []
    for prog in (gemm_relu_tmem_program(128, 128, 64), K.tcgen05_gemm_explicit(128, 64, 32, commit="mbar"),
                 K.tcgen05_gemm_explicit(128, 64, 32, commit="arrive")):
        calls, allocs = {}, []

        def visit(n):
            if isinstance(n, tir.Call):
                calls.setdefault(E.op_name(n), []).append(n)
            elif isinstance(n, tir.SBlock):
                allocs.extend(n.alloc_buffers)
        tir.stmt_functor.post_order_visit(prog.body, visit)
        scopes = {b.name: b.scope() for b in allocs}
        tmem = [n for n, s in scopes.items() if s == E.TMEM_SCOPE]
        if len(tmem) != 1:
            problems.append(f"{prog.attrs['global_symbol']}: T.alloc_tmem is not one buffer of scope "
                            f"{E.TMEM_SCOPE}: {scopes}")
        gemms = [c for name in E.GEMM_OPS for c in calls.get(name, [])]
        if len(gemms) != 1:
            problems.append(f"{prog.attrs['global_symbol']}: not one GEMM call: {sorted(calls)}")
            continue
        d = E.decode_tile_op(gemms[0])
        arrive = calls.get(E.TCGEN05_MMA_ARRIVE, [])
        if arrive:
            load, data, _ = E.decode_barrier_pointer(arrive[0].args[0], "T.tcgen05_mma_arrive")
            target = load.buffer.data if load is not None else data
            if not any(b.data.same_as(target) and b.scope() == E.BARRIER_SCOPE for b in allocs):
                problems.append(f"T.tcgen05_mma_arrive's operand {arrive[0].args[0]} is not an mbarrier")
            if d.mbar is not None or not d.is_tcgen05:
                problems.append(f"T.tcgen05_gemm(mbar=None) decodes to mbar={d.mbar}, is_tcgen05={d.is_tcgen05}")
        elif d.mbar is None or d.mbar.buffer.scope() != E.BARRIER_SCOPE:
            problems.append(f"{E.op_name(gemms[0])}'s slot 10 is {gemms[0].args[10]}, expected the mbarrier element")
        if d.C.buffer.scope() != E.TMEM_SCOPE:
            problems.append(f"the GEMM's C decodes to {d.C.describe()} (scope {d.C.buffer.scope()})")
        if E.op_name(gemms[0]) == E.TCGEN05_GEMM and not d.is_tcgen05:
            problems.append("T.tcgen05_gemm lost its is_tcgen05 annotation")
        if E.op_name(gemms[0]) == E.GEMM and d.is_tcgen05:
            problems.append("the synchronous T.gemm(..., mbar=) decodes as the asynchronous form")
    assert not problems, "TileLang's IR encoding changed:\n  " + "\n  ".join(problems)
