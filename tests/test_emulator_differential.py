"""The emulator's differential suite and its detectors.

* Every case of ``emulator_corpus.CASES`` runs in the emulator on the CPU against a torch
  reference (fp64 where the kernel accumulates in fp32) with poisoned outputs; marked ``gpu``,
  the same program is compiled for the GPU here and run on CUDA tensors, and the emulator's
  output must equal the GPU's (up to the summation-order tolerance of the case).
* Constructs whose GPU answer depends on TileLang's layout inference are refused with one line.
* Each detector (uninitialised reads, races in one step, races between warp-specialised roles,
  target limits) has kernels that trip it and look-alikes that must not.
"""
import warnings

import pytest
import torch

import emulator_corpus as EC
from tilelang_tutorial import emulate


def rel_err(out, ref) -> float:
    out, ref = out.detach().double(), ref.detach().double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _close(out, ref, tol):
    if out.dtype in (torch.int32, torch.int64):
        return torch.equal(out.long(), ref.long())
    out, ref = out.double(), ref.double()
    fin = torch.isfinite(ref)
    if not torch.equal(fin, torch.isfinite(out)) or not torch.equal(out[~fin], ref[~fin]):
        return False
    if tol == 0:
        return torch.equal(out[fin], ref[fin])
    return rel_err(out[fin], ref[fin]) <= tol


def _run_emulated(case, checks="all"):
    ts = case.inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", emulate.EmulatorWarning)     # no finding on a valid kernel
        emulate.run(case.build(), *ts, checks=checks, strict=True, **case.scalars)
    return ts


@pytest.mark.parametrize("case", EC.CASES, ids=[c.name for c in EC.CASES])
def test_emulator_matches_torch(case):
    ts = _run_emulated(case)
    refs = case.reference(ts)
    for k, ref in zip(case.outputs, refs):
        out = ts[k]
        assert not torch.isnan(out.float()).any(), f"{case.name}: output {k} has unwritten (NaN) elements"
        assert _close(out, ref.to(out.dtype) if out.dtype in (torch.int32, torch.int64) else ref, case.tol), \
            f"{case.name}: output {k} differs from torch (rel err {rel_err(out.double(), ref.double()):.3e})"


@pytest.mark.parametrize("case", EC.CASES, ids=[c.name for c in EC.CASES])
def test_every_case_compiles_for_sm_90a(case):
    """The corpus holds programs TileLang 0.1.15 accepts (the emulator also runs some it rejects:
    e.g. T.reduce_sum of a 48 x 80 fragment over 128 threads finds no layout)."""
    from tilelang_tutorial import runtime
    if runtime.nvcc_path() is None:
        pytest.skip("needs nvcc")
    kernel = runtime.compile_kernel(case.build(), arch="sm_90a")
    assert "__global__" in kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.parametrize("case", EC.CASES, ids=[c.name for c in EC.CASES])
def test_emulator_matches_the_gpu(case):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from tilelang_tutorial import runtime
    ts = _run_emulated(case)
    # the same inputs on the GPU (outputs re-poisoned / re-zeroed exactly as the case makes them)
    fresh = case.inputs()
    gpu = [t.clone().cuda() for t in ts]
    for k in case.outputs:
        gpu[k] = fresh[k].clone().cuda()
    kernel = runtime.compile_kernel(case.build())       # for this GPU's architecture
    kernel(*gpu, *case.scalars.values())
    torch.cuda.synchronize()
    refs = case.reference(ts)
    for k, ref in zip(case.outputs, refs):
        g, e = gpu[k].cpu(), ts[k]
        assert not torch.isnan(g.float()).any(), f"{case.name}: the GPU left output {k} unwritten"
        assert _close(g, ref.to(g.dtype) if g.dtype in (torch.int32, torch.int64) else ref, case.tol), \
            f"{case.name}: the GPU differs from torch"
        assert _close(e, g, max(case.tol, 1e-6) if case.tol else 0), \
            f"{case.name}: the emulator differs from the GPU (rel err {rel_err(e.double(), g.double()):.3e})"


# ---------------------------------------------------------------------------------------------
# the case: a reduction written inside T.Parallel into a one-element fragment
# ---------------------------------------------------------------------------------------------
def test_parallel_reduction_into_one_element_fragment_is_the_sum_not_the_last_element():
    x = torch.randn(128)
    y = torch.full((1,), float("nan"))
    emulate.run(EC.parallel_sum_one_element(), x, y)
    assert abs(y.item() - x.double().sum().item()) < 1e-4
    assert y.item() != x[127].item()
    m = torch.full((1,), float("nan"))
    emulate.run(EC.parallel_max_one_element(), x, m)
    assert m.item() == x.max().item()


@pytest.mark.parametrize("factory,args,phrase", [
    (EC.fragment_partial_rows, (torch.randn(4, 32), torch.zeros(4)), "acc[i] updated by several T.Parallel iterations (j)"),
    (EC.var_sum_in_parallel, (torch.randn(128), torch.zeros(1)), "T.alloc_var v updated inside T.Parallel"),
    (EC.fragment_nonzero_index, (torch.randn(32), torch.zeros(2)), "Fragment buffer access with non-zero index [1]"),
])
def test_layout_dependent_parallel_stores_are_refused_in_one_line(factory, args, phrase):
    with pytest.raises(emulate.UnsupportedConstruct) as e:
        emulate.run(factory(), *args)
    first = str(e.value).splitlines()[0]
    assert phrase in first, first
    assert "emulator_corpus.py:" in str(e.value)       # and where


# ---------------------------------------------------------------------------------------------
# detectors
# ---------------------------------------------------------------------------------------------
def _findings(prog, *args, checks="all"):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        emulate.run(prog, *args, checks=checks)
    fs = emulate.last_findings()
    assert len([x for x in w if issubclass(x.category, emulate.EmulatorWarning)]) == len(fs)
    return fs


def test_uninitialised_accumulator_names_buffer_element_and_line():
    fs = _findings(EC.uninit_missing_clear(), torch.randn(8, 64), torch.zeros(8))
    assert len(fs) == 1 and fs[0].kind == "uninit"
    f = fs[0]
    assert f.buffer == "acc" and f.element == (0,)
    assert "fragment buffer acc element [0]" in f.message and "T.reduce_sum" in f.message
    assert "emulator_corpus.py:" in f.message and "T.clear" in f.message
    assert "\n" not in f.message
    with pytest.raises(emulate.UninitialisedRead):
        emulate.run(EC.uninit_missing_clear(), torch.randn(8, 64), torch.zeros(8), strict=True)


def test_uninitialised_shared_element_read_in_parallel():
    fs = _findings(EC.uninit_partial_copy(), torch.randn(32, 64), torch.zeros(32, 64))
    assert [f.kind for f in fs] == ["uninit"]
    assert fs[0].buffer == "s" and fs[0].element == (16, 0), fs[0].message
    assert "shared buffer s element [16, 0]" in fs[0].message


def test_masked_read_of_a_half_filled_tile_is_not_reported():
    x = torch.randn(32, 64)
    y = torch.zeros(32, 64)
    assert _findings(EC.clean_masked_read(), x, y) == []
    assert torch.equal(y[:16], x[:16] + 0) and torch.equal(y[16:], torch.zeros(16, 64))


def test_checks_off_reports_nothing():
    assert _findings(EC.uninit_missing_clear(), torch.randn(8, 64), torch.zeros(8), checks="none") == []


def test_same_step_race_on_shared_names_element_and_both_lanes():
    fs = _findings(EC.race_shared_same_step(), torch.randn(128), torch.zeros(1))
    assert [f.kind for f in fs] == ["race"]
    f = fs[0]
    assert f.buffer == "s" and f.element == (0,)
    assert "written in one step by 128 lanes" in f.message and "without an atomic" in f.message
    assert len(f.who) == 2 and f.who[0] != f.who[1] and all("thread" in w for w in f.who)
    with pytest.raises(emulate.Race):
        emulate.run(EC.race_shared_same_step(), torch.randn(128), torch.zeros(1), strict=True)


def test_thread_store_race_names_two_threads():
    fs = _findings(EC.race_thread_store(), torch.zeros(1, dtype=torch.int32))
    assert [f.kind for f in fs] == ["race"] and "thread 0" in fs[0].message


def test_same_value_flag_store_is_not_a_race():
    assert _findings(EC.clean_shared_same_value(), torch.randn(128), torch.zeros(1)) == []


def test_roles_without_a_wait_race_with_both_roles_and_lines():
    x = torch.randn(48, 32).half()
    fs = _findings(EC.roles_exchange(sync="none"), x, torch.zeros(48, 32).half())
    races = [f for f in fs if f.kind == "race"]
    assert races, fs
    f = races[0]
    assert f.buffer == "xs" and len(f.who) == 2 and f.who[0] != f.who[1]
    assert all("role [" in w for w in f.who)
    assert len(set(f.lines)) == 2 and all("emulator_corpus.py:" in ln for ln in f.lines)


def test_roles_ordered_by_mbarriers_are_not_a_race():
    x = torch.randn(48, 32).half()
    y = torch.zeros(48, 32).half()
    assert _findings(EC.roles_exchange(sync="mbarrier"), x, y) == []
    assert torch.equal(y, x)


def test_shared_memory_limit_is_checked_before_running():
    a = torch.randn(1024, 1024)
    with pytest.raises(emulate.LimitExceeded) as e:
        emulate.run(EC.limit_shared_gemm(), a, a, torch.zeros(1024, 1024))
    msg = str(e.value)
    assert "\n" not in msg and "1048576 bytes" in msg and "232448" in msg and "sm_90a" in msg, msg
    # a smaller architecture's limit is named too
    with pytest.raises(emulate.LimitExceeded, match="sm_86"):
        emulate.run(EC.pipelined_gemm(64, 64, 64, block_M=128, block_N=128, block_K=128, dtype="float32"),
                    torch.randn(64, 64), torch.randn(64, 64), torch.zeros(64, 64), arch="sm_86")


def test_threads_per_block_limit():
    with pytest.raises(emulate.LimitExceeded, match="threads=2048 per block exceeds the CUDA limit of 1024"):
        emulate.run(EC.limit_threads(), torch.randn(4096), torch.zeros(4096))


def test_registers_reported_by_ptxas_are_checked_when_given():
    small = EC.parallel_sum_one_element()
    x = torch.randn(128)
    emulate.run(small, x, torch.zeros(1), registers=200)                    # 200 x 128 fits
    with pytest.raises(emulate.LimitExceeded, match="exceeds the 255 a thread may use"):
        emulate.run(small, x, torch.zeros(1), registers={"k": {"registers": 300}})
    with pytest.raises(emulate.LimitExceeded, match="registers per block"):
        emulate.run(EC.race_thread_store(1024), torch.zeros(1, dtype=torch.int32), registers=128)


def test_shared_read_of_a_neighbours_write_in_one_step_is_a_race():
    fs = _findings(EC.race_shift_in_shared(), torch.randn(128), torch.zeros(128))
    assert [f.kind for f in fs] == ["race"], fs
    f = fs[0]
    assert f.buffer == "s" and "is read by thread 0 (iteration 0) and written by thread 1 (iteration 1)" in f.message
    assert f.element == (1,)


def test_in_place_update_is_not_a_race():
    x = torch.randn(128)
    y = torch.zeros(128)
    assert _findings(EC.clean_in_place_update(), x, y) == []
    assert torch.allclose(y, x * 3)


def test_global_same_step_race_without_atomic():
    fs = _findings(EC.race_global_same_step(), torch.randn(128), torch.zeros(1))
    assert [f.kind for f in fs] == ["race"] and "global buffer Y element [0]" in fs[0].message
    # the same sum with T.atomic_add is not a race (tests/emulate_kernels.py::histogram)
    import emulate_kernels as K
    assert _findings(K.histogram(300), torch.randint(0, 16, (300,), dtype=torch.int32), torch.randn(300),
                     torch.zeros(16, dtype=torch.int32), torch.zeros(1)) == []
