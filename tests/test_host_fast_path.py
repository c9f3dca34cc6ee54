"""The ops' fast paths: ``scale_copy``, ``row_sum``, ``fused_rmsnorm_silu`` and ``gemm_relu`` check
their inputs in full once per key (their :class:`runtime.Launchers`) and then only look the key up; ``MLADecodePlan.run`` compares its inputs with
the plan's in one step and reuses the caches' 2-D views. In the emulator the key (the plan's
comparison) holds every attribute the checks read; in GPU mode only what picks the kernel (the
inputs' shapes for the plan), the compiled kernel refusing any other bad argument itself, which
the op then names. Each test warms the fast path with a valid call first, then feeds inputs that
share as much of the key as they can and are wrong: each still gets its one-line error, every call.

The kernels are stand-ins (a torch computation of the same result; for GPU mode on a CPU machine,
one that checks its arguments as TileLang's generated host code does) so nothing compiles; the
ops' own code runs unchanged. On a GPU the real compiled kernels are fed the same bad inputs."""
import gc
import time

import pytest
import torch

from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.tiles import row_sum, scale_copy

DEVICE = runtime.mode().device                     # cuda on a GPU, cpu where kernels are emulated
OTHER = "cpu" if DEVICE == "cuda" else "meta"     # a device the mode does not run kernels on


@pytest.fixture
def stand_ins(monkeypatch):
    """Emulated mode (also on a GPU machine: CPU tensors), the builders return torch stand-ins,
    and the launcher runs them as they are."""
    built = []

    def fake_scale_copy(N, **kw):
        built.append(("scale_copy", N, kw))
        return lambda x, y, a: y.copy_(x.float() * a)

    def fake_row_sum(N, **kw):
        built.append(("row_sum", N, kw))
        return lambda x, s: s.copy_(x.float().sum(1))

    runtime.force_emulation(True)
    monkeypatch.setattr(scale_copy, "build_scale_copy", fake_scale_copy)
    monkeypatch.setattr(row_sum, "build_row_sum", fake_row_sum)
    monkeypatch.setattr(runtime, "launcher", lambda kernel, emulator_checks=None: kernel)
    yield built
    runtime.force_emulation(None)


def _spy_checks(monkeypatch, module):
    """Count the op's full checks: those its plan makes and those its launchers repeat."""
    calls = []
    full = module._check

    def spy(*args):
        calls.append(args)
        return full(*args)
    monkeypatch.setattr(module, "_check", spy)
    monkeypatch.setattr(module._LAUNCHERS, "check", spy)
    return calls


def test_a_repeat_call_skips_the_checks_and_the_build(stand_ins, monkeypatch):
    calls = _spy_checks(monkeypatch, scale_copy)
    x = checks.random_tensor((33, 64), torch.float16, "cpu")
    y = checks.poisoned((33, 64), torch.float16, "cpu")
    for _ in range(3):
        scale_copy.scale_copy(x, 2.0, out=y)
        checks.assert_close(y, scale_copy.scale_copy_reference(x, 2.0), tolerance=checks.TOLERANCE["float16"])
    assert len(calls) == 1 and len(stand_ins) == 1, "the first call checks and builds, the later ones do not"
    # new tensors with the same shapes, dtypes and device: still the fast path
    x2 = checks.random_tensor((33, 64), torch.float16, "cpu")
    scale_copy.scale_copy(x2, -1.0, out=y)
    checks.assert_close(y, scale_copy.scale_copy_reference(x2, -1.0), tolerance=checks.TOLERANCE["float16"])
    assert len(calls) == 1
    # another width is another kernel: checked and built again
    scale_copy.scale_copy(checks.random_tensor((33, 128), torch.float16, "cpu"), 2.0)
    assert len(calls) == 2 and [b[1] for b in stand_ins] == [64, 128]


def test_a_replaced_builder_is_used_at_once(stand_ins, monkeypatch):
    """A cached launcher belongs to the builder that made it: replacing the builder (as tests and
    readers do) is seen on the next call, not hidden by the cache."""
    x = checks.random_tensor((5, 64), torch.float16, "cpu")
    scale_copy.scale_copy(x, 1.0)
    monkeypatch.setattr(scale_copy, "build_scale_copy", lambda N, **kw: lambda x, y, a: y.fill_(7.0))
    assert torch.all(scale_copy.scale_copy(x, 1.0) == 7.0)


def _bad_tile_inputs(x, out_ok, device, other):
    """[(message, x, out)]: inputs that share as much of the valid call's key as they can and are
    wrong in one attribute."""
    M, N = x.shape
    square = checks.random_tensor((N, N), x.dtype, device)
    strided_out = (torch.empty(2 * M, dtype=out_ok.dtype, device=device)[::2] if out_ok.dim() == 1
                   else torch.empty(N, M, dtype=out_ok.dtype, device=device).t())
    return [
        ("x must be float16 or bfloat16 or float32, got int32", x.to(torch.int32), None),
        ("x must have 2 dimensions", x[None], None),
        ("x must be contiguous", x.t().contiguous().t(), None),             # same shape and dtype
        ("x must be contiguous", square.t(), None),                          # a square's transpose
        (f"x must be on a {device} device", x.to(other), None),
        ("x must be a torch.Tensor", x.tolist(), None),
        ("out must be float(16|32), got int32", x, out_ok.to(torch.int32)),
        ("out has shape", x, out_ok[:-1]),
        ("out must have", x, out_ok[None]),
        ("out must be contiguous", x, strided_out),
        (f"out must be on a {device} device", x, out_ok.to(other)),
    ]


def _tile_call(op, x, device):
    if op == "scale_copy":
        return torch.empty_like(x), lambda a, o: scale_copy.scale_copy(a, 0.5, out=o)
    return torch.empty(x.shape[0], dtype=torch.float32, device=device), lambda a, o: row_sum.row_sum(a, out=o)


def _expect_each_refused(call, x, out, bad):
    for _ in range(2):                      # the valid calls warm the cache; the bad ones still fail
        call(x, out)
        call(x, None)
        for message, bad_x, bad_out in bad:
            with pytest.raises((TypeError, ValueError), match=message) as err:
                call(bad_x, bad_out)
            assert "\n" not in str(err.value), "one line"
            assert err.value.__suppress_context__ or err.value.__context__ is None, "the op's line alone"


@pytest.mark.parametrize("op", ["scale_copy", "row_sum"])
def test_bad_inputs_after_a_warm_cache_still_get_their_one_line_error(stand_ins, op):
    x = checks.random_tensor((48, 64), torch.float16, "cpu")
    out, call = _tile_call(op, x, "cpu")
    _expect_each_refused(call, x, out, _bad_tile_inputs(x, out, "cpu", "meta"))


@pytest.mark.parametrize("module", [scale_copy, row_sum], ids=["scale_copy", "row_sum"])
def test_emulated_keys_differ_in_every_checked_attribute(module):
    """Where kernels are emulated nothing checks their arguments: the key holds every attribute
    the checks read."""
    x = checks.random_tensor((16, 16), torch.float16, "cpu")
    m = runtime.Mode("emulated", "sm_90a", None, True, "no GPU")
    key = module._call_key(x, None, m, {})
    variants = {
        "dtype": x.float(), "device": x.to("meta"), "ndim": x[None], "shape": x[:8],
        "contiguity": x.t(),                       # the same shape, dtype and device
    }
    for what, other in variants.items():
        assert module._call_key(other, None, m, {}) != key, what
    out = torch.empty_like(x) if module is scale_copy else torch.empty(16)
    with_out = module._call_key(x, out, m, {})
    for what, other in {"dtype": out.double(), "device": out.to("meta"), "shape": out[:8],
                        "contiguity": torch.empty(32)[::2] if module is row_sum else out.t()}.items():
        assert module._call_key(x, other, m, {}) != with_out, f"out {what}"
    assert module._call_key(x, None, m, {"threads": 256}) != key, "tile knobs"


# In GPU mode the key is what picks the kernel, and the compiled kernel's own argument checks
# refuse the rest; on a CPU machine a stand-in that checks its arguments as TileLang's generated
# host code does (dtype, dimensions, N, rows against out, strides, device) plays the kernel.

class _FakeGPUMode(runtime.Mode):
    @property
    def device(self):           # the stand-in's "GPU" takes CPU tensors
        return "cpu"


def _check_arg(kernel_name, name, t, shape, dtype, device_type):
    """What TileLang's generated host code asserts of one tensor argument (its messages)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"kernel {kernel_name} expects a tensor for {name}")
    if t.dtype != dtype:
        raise RuntimeError(f"kernel {kernel_name} input {name} dtype mismatch")
    if t.dim() != len(shape) or any(w is not None and h != w for h, w in zip(t.shape, shape)):
        raise RuntimeError(f"kernel {kernel_name} input {name} shape violates packed ABI constraint")
    if not t.is_contiguous():
        raise RuntimeError(f"kernel {kernel_name} input {name} strides violates packed ABI constraint")
    if t.device.type != device_type:
        raise RuntimeError(f"kernel {kernel_name} input {name} device_type mismatch")


def _checking_stand_in(N, dtype, outputs):
    def kernel(x, y, *scalars):
        _check_arg("main", "X", x, (None, N), dtype, "cpu")
        _check_arg("main", "Y", y, (x.shape[0], N)[:outputs], dtype if outputs == 2 else torch.float32, "cpu")
        y.copy_(x.float() * scalars[0] if scalars else x.float().sum(1))
    return kernel


@pytest.fixture
def fake_gpu(monkeypatch):
    mode = _FakeGPUMode("gpu", "sm_90a", "a stand-in GPU", True)
    monkeypatch.setattr(runtime, "mode", lambda: mode)
    monkeypatch.setattr(runtime, "launcher", lambda kernel, emulator_checks=None: kernel)
    monkeypatch.setattr(runtime, "checks_its_arguments", lambda kernel: getattr(kernel, "checks", False))

    def builder(outputs):
        def build(N, dtype="float16", **kw):
            k = _checking_stand_in(N, getattr(torch, dtype), outputs)
            k.checks = True
            return k
        return build
    monkeypatch.setattr(scale_copy, "build_scale_copy", builder(2))
    monkeypatch.setattr(row_sum, "build_row_sum", builder(1))
    return mode


@pytest.mark.parametrize("op", ["scale_copy", "row_sum"])
def test_gpu_mode_bad_inputs_are_refused_by_the_kernel_and_named_by_the_op(fake_gpu, op, monkeypatch):
    module = scale_copy if op == "scale_copy" else row_sum
    calls = _spy_checks(monkeypatch, module)
    x = checks.random_tensor((48, 64), torch.float16, "cpu")
    out, call = _tile_call(op, x, "cpu")
    call(x, out)
    call(x, out)
    assert len(calls) == 1, "a repeat call skips the op's checks"
    _expect_each_refused(call, x, out, _bad_tile_inputs(x, out, "cpu", "meta"))


def test_gpu_mode_keys_pick_the_kernel(fake_gpu):
    x = checks.random_tensor((16, 64), torch.float16, "cpu")
    key = scale_copy._call_key(x, None, fake_gpu, {})
    assert scale_copy._call_key(x[:3], None, fake_gpu, {}) == key, "any number of rows: one kernel"
    for what, other in {"dtype": x.float(), "N": x[:, :32], "ndim": x[None]}.items():
        assert scale_copy._call_key(other, None, fake_gpu, {}) != key, what
    assert scale_copy._call_key(x, x, fake_gpu, {}) != key, "out given or not"
    assert scale_copy._call_key(x, None, fake_gpu, {"threads": 256}) != key, "tile knobs"


def test_gpu_mode_a_launcher_that_checks_nothing_gets_the_checks_every_call(fake_gpu, monkeypatch):
    monkeypatch.setattr(runtime, "checks_its_arguments", lambda kernel: False)
    calls = _spy_checks(monkeypatch, scale_copy)
    x = checks.random_tensor((8, 64), torch.float16, "cpu")
    for _ in range(3):
        scale_copy.scale_copy(x, 0.5)
    with pytest.raises(ValueError, match="x must be contiguous"):
        scale_copy.scale_copy(torch.empty(64, 8, dtype=torch.float16).t(), 0.5)
    assert len(calls) == 4


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["scale_copy", "row_sum"])
def test_gpu_bad_inputs_after_a_warm_cache_are_named_with_the_real_kernel(op):
    """The compiled kernel (N = 4096, fp16: the benchmarks' build) refuses each bad argument
    itself and the op names it in one line."""
    x = checks.random_tensor((48, 4096), torch.float16, "cuda")
    out, call = _tile_call(op, x, "cuda")
    bad = [b for b in _bad_tile_inputs(x, out, "cuda", "cpu") if "int32" not in b[0] or op == "row_sum"]
    _expect_each_refused(call, x, out, bad)
    checks.assert_close(call(x, None), scale_copy.scale_copy_reference(x, 0.5) if op == "scale_copy"
                        else row_sum.row_sum_reference(x), tolerance=checks.TOLERANCE["float16"])


def _per_call_us(fn, calls=2000, loops=7):
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def _fast_and_full_us(fast_fn, full_fn, loops=9):
    """Each call's best per-call time, the two timed in alternating rounds: a host whose load
    changes during the test (16 pytest workers on the GPU runner) slows both alike."""
    fast = full = float("inf")
    for _ in range(loops):
        fast = min(fast, _per_call_us(fast_fn, loops=1))
        full = min(full, _per_call_us(full_fn, loops=1))
    return fast, full


def test_the_fast_path_costs_less_than_the_checks_it_skips(stand_ins, monkeypatch):
    """With the kernel call a no-op, the op's whole call (mode, key, lookup, launch; emulated
    mode's key, the longer one) costs less than its full checks alone, which it used to run on
    every call (on this project's 2-core CPU: 1.1 against 2.5 us)."""
    x = checks.random_tensor((48, 64), torch.float16, "cpu")
    y = torch.empty_like(x)
    monkeypatch.setattr(scale_copy, "build_scale_copy", lambda N, **kw: lambda *args: None)
    scale_copy.scale_copy(x, 0.5, out=y)
    fast, full = _fast_and_full_us(lambda: scale_copy.scale_copy(x, 0.5, out=y),
                                   lambda: scale_copy._check(x, 0.5, y, {}))
    assert fast < 0.8 * full, f"the fast path costs {fast:.2f} us, the checks it skips {full:.2f} us"


# ------------------------------------------------------------------------------------------------
# MLADecodePlan.run
# ------------------------------------------------------------------------------------------------

def _mla_stand_in(launched, checks_arguments):
    """The fp32 reference on the views run passes; with ``checks_arguments``, first the checks
    TileLang's generated host code makes (dtype, dimensions, strides, device type)."""
    from tilelang_tutorial.lessons.mla.common import DIM_NOPE, DIM_PE, PAGE_SIZE
    from tilelang_tutorial.lessons.mla.reference import mla_decode_reference

    def kernel(q_nope, q_pe, kv, pe, block_table, seqlens, lse, o_partial, out):
        if checks_arguments:
            half, i32 = torch.float16, torch.int32
            for name, t, dtype, ndim in (("Q", q_nope, half, 3), ("Q_pe", q_pe, half, 3), ("KV", kv, half, 2),
                                         ("K_pe", pe, half, 2), ("block_table", block_table, i32, 2),
                                         ("cache_seqlens", seqlens, i32, 1), ("Output", out, half, 3)):
                if t.dtype != dtype or t.dim() != ndim or not t.is_contiguous() or t.device != lse.device:
                    raise RuntimeError(f"kernel mla_decode_kernel input {name} violates packed ABI constraint")
        launched.append((kv, pe))
        out.copy_(mla_decode_reference(q_nope, q_pe, kv.view(-1, PAGE_SIZE, 1, DIM_NOPE),
                                       pe.view(-1, PAGE_SIZE, 1, DIM_PE), block_table, seqlens))
    kernel.checks = checks_arguments
    return kernel


@pytest.fixture(params=["emulated", "kernel checks"])
def mla_plan(request, monkeypatch):
    """A plan (h_q 16, two sequences) whose kernel is a stand-in: the emulator's path (run checks
    everything itself) and the GPU's (a kernel that checks its own arguments)."""
    from tilelang_tutorial.lessons.mla import op
    from tilelang_tutorial.lessons.mla.reference import make_paged_inputs

    launched = []
    kernel = _mla_stand_in(launched, request.param == "kernel checks")
    monkeypatch.setattr(op, "build_mla_decode", lambda *a, **kw: kernel)
    monkeypatch.setattr(runtime, "launcher", lambda k: k)
    monkeypatch.setattr(runtime, "checks_its_arguments", lambda k: getattr(k, "checks", False))
    x = make_paged_inputs(2, 16, [70, 130], device=DEVICE, seed=5)
    the_plan = op.plan(**x)
    assert the_plan._kernel_checks == (request.param == "kernel checks")
    return the_plan, x, launched


def _check_mla(out, x):
    from tilelang_tutorial.lessons.mla.reference import mla_decode_reference

    checks.assert_close(out, mla_decode_reference(**x), tolerance=checks.TOLERANCE["float16"])


def _strided(t):
    """A non-contiguous copy of ``t`` with its shape, dtype and device (every other element of a
    buffer twice as wide)."""
    wide = torch.empty(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype, device=t.device)
    return wide[..., ::2].copy_(t)


def _bad_mla_inputs(x, the_plan):
    """[(message, changes to the inputs, out)]: each wrong in one attribute, the rest as planned."""
    wrong_dtype = {torch.float16: torch.bfloat16, torch.int32: torch.int64}
    bad = []
    for name, t in x.items():
        bad += [(f"{name} in {t.dtype}, got {wrong_dtype[t.dtype]}", {name: t.to(wrong_dtype[t.dtype])}, None),
                (f"{name} of shape", {name: t[:-1]}, None),
                (f"{name} must be contiguous", {name: _strided(t)}, None),
                (f"tensors on {the_plan.device}, got {name} on", {name: t.to(OTHER)}, None),
                (f"{name} must be a torch.Tensor", {name: t.tolist()}, None)]
    out = the_plan.out
    bad += [("out in torch.float16, got torch.float32", {}, out.float()),
            ("out of shape", {}, out[:1]),
            ("out must be contiguous", {}, _strided(out)),
            (f"tensors on {the_plan.device}, got out on", {}, out.to(OTHER)),
            ("block_table of shape", {"block_table": torch.cat([x["block_table"]] * 2, dim=1)}, None)]
    return bad


def test_mla_run_after_a_warm_plan_still_rejects_each_bad_input(mla_plan):
    the_plan, x, launched = mla_plan
    bad = _bad_mla_inputs(x, the_plan)
    for _ in range(2):
        out = the_plan.run(**x)
        _check_mla(out, x)
        for message, change, bad_out in bad:
            with pytest.raises((TypeError, ValueError), match=message) as err:
                the_plan.run(**dict(x, **change), out=bad_out)
            assert "\n" not in str(err.value), "one line"
            assert err.value.__suppress_context__ or err.value.__context__ is None, "the plan's line alone"
    assert len(launched) == 2, "no bad input ran the kernel"


def test_mla_run_reuses_the_views_of_the_same_caches_only(mla_plan):
    from tilelang_tutorial.lessons.mla.reference import make_paged_inputs

    the_plan, x, launched = mla_plan
    _check_mla(the_plan.run(**x), x)
    _check_mla(the_plan.run(**x), x)
    assert launched[0][0] is launched[1][0] and launched[0][1] is launched[1][1], "one view per cache tensor"
    # new values in the same cache tensors: the kept views see them (they are the same memory)
    fresh = make_paged_inputs(2, 16, [70, 130], device=DEVICE, seed=6)
    x["kv_cache"].copy_(fresh["kv_cache"])
    _check_mla(the_plan.run(**x), x)
    # the same tensor object given other memory (same shape): a new view, on the new memory
    kv = x["kv_cache"]
    kv.set_(fresh["kv_cache"].clone())
    _check_mla(the_plan.run(**x), x)
    assert launched[-1][0].data_ptr() == kv.data_ptr() != launched[0][0].data_ptr()
    # other tensor objects holding the same data: correct too
    y = {k: v.clone() for k, v in x.items()}
    _check_mla(the_plan.run(**y), y)
    assert launched[-1][0].data_ptr() == y["kv_cache"].data_ptr()


def test_mla_plan_does_not_keep_a_freed_cache_alive(mla_plan):
    the_plan, x, launched = mla_plan
    the_plan.run(**x)
    launched.clear()
    kv = x.pop("kv_cache")
    assert the_plan._flat[0] is not None
    del kv
    gc.collect()
    assert the_plan._flat[0] is None, "the plan dropped its view when the cache tensor was freed"


@pytest.mark.gpu
def test_gpu_mla_run_refuses_cpu_tensors_after_a_warm_plan(mla_plan):
    the_plan, x, _ = mla_plan
    the_plan.run(**x)
    for name in ("q_nope", "kv_cache", "block_table", "cache_seqlens"):
        with pytest.raises(ValueError, match=f"got {name} on cpu"):
            the_plan.run(**dict(x, **{name: x[name].cpu()}))


@pytest.mark.gpu
def test_gpu_a_real_plan_names_each_bad_input_the_kernel_refuses():
    """The compiled kernel (h_q 128, split, auto: notebook 04's build) refuses each bad argument
    itself after the plan's shape comparison passes, and run names it in one line."""
    from tilelang_tutorial.lessons.mla import op
    from tilelang_tutorial.lessons.mla.reference import make_paged_inputs

    x = make_paged_inputs(2, 128, [70, 130], device="cuda", seed=7)
    the_plan = op.plan(**x, num_split=2, schedule="auto")
    assert the_plan._kernel_checks
    for _ in range(2):
        _check_mla(the_plan.run(**x), x)
        for message, change, bad_out in _bad_mla_inputs(x, the_plan):
            with pytest.raises((TypeError, ValueError), match=message) as err:
                the_plan.run(**dict(x, **change), out=bad_out)
            assert "\n" not in str(err.value), "one line"
            assert err.value.__suppress_context__ or err.value.__context__ is None, "the plan's line alone"


# ------------------------------------------------------------------------------------------------
# fused_rmsnorm_silu and gemm_relu: in GPU mode the key is what picks the kernel
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def rms_fake_gpu(monkeypatch):
    """GPU mode on a CPU machine: the drop-in's TileLang path builds a stand-in that checks its
    arguments as the compiled kernel does and computes the reference; fresh launchers."""
    from tilelang_tutorial.lessons.rmsnorm import kernel as rs
    from tilelang_tutorial.lessons.rmsnorm import op as rms_op

    mode = _FakeGPUMode("gpu", "sm_90a", "a stand-in GPU", True)
    monkeypatch.setattr(runtime, "mode", lambda: mode)
    monkeypatch.setattr(runtime, "launcher", lambda kernel, emulator_checks=None: kernel)
    monkeypatch.setattr(runtime, "checks_its_arguments", lambda kernel: getattr(kernel, "checks", False))
    built, kernels = [], {}

    def build(C, dtype):                # compiled once per (C, dtype), as the real build is
        if (C, dtype) in kernels:
            return kernels[C, dtype]
        tdt = getattr(torch, dtype)

        def kernel(x, gamma, y, eps):
            _check_arg("main", "X", x, (None, C), tdt, "cpu")
            _check_arg("main", "Gamma", gamma, (C,), tdt, "cpu")
            _check_arg("main", "Y", y, (x.shape[0], C), tdt, "cpu")
            y.copy_(rs.rmsnorm_silu_reference(x, gamma, eps))
        kernel.checks = True
        built.append((C, dtype))
        kernels[C, dtype] = kernel
        return kernel
    monkeypatch.setattr(rms_op, "_LAUNCHERS", rms_op._launchers(build))
    return rs, rms_op, built


def _bad_rms_inputs(x, gamma, out, other):
    """[(message, x, gamma, out)]: each wrong in one attribute and sharing the valid call's GPU key
    (x's shape and dtype, out given) wherever it can."""
    M, C = x.shape
    dev = x.device.type
    square = checks.random_tensor((C, C), x.dtype, dev)
    return [
        ("gamma must have the dtype of x", x, gamma.float(), out),
        (rf"gamma must have shape \({C},\)", x, gamma[:32], out),
        ("gamma must be contiguous", x, torch.stack([gamma, gamma], 1)[:, 0], out),
        (f"gamma must be on a {dev} device, got {other}", x, gamma.to(other), out),
        ("gamma must be a torch.Tensor", x, gamma.tolist(), out),
        ("out must have the dtype of x", x, gamma, out.float()),
        ("out must have the shape of x", x, gamma, out[:-1]),
        ("out must be contiguous", x, gamma, torch.empty(C, M, dtype=x.dtype, device=dev).t()),
        (f"out must be on a {dev} device, got {other}", x, gamma, out.to(other)),
        ("in-place is not supported", x, gamma, x),
        ("x must be contiguous", square.t(), gamma, torch.empty_like(square)),   # a square's transpose
        ("x must be float16 or bfloat16", x.float(), gamma, None),
        ("x must be a tensor", x.tolist(), gamma, None),
    ]


def test_gpu_mode_drop_in_keys_on_what_picks_the_kernel_and_names_each_refused_argument(rms_fake_gpu, monkeypatch):
    """fused_rmsnorm_silu in GPU mode: one full check per (x's shape, dtype, out given), and every
    argument that shares that key and is wrong -- which the compiled kernel refuses -- still gets the
    op's one line (not the kernel's message), on every call."""
    from tilelang_tutorial.lessons.rmsnorm import dispatch

    rs, rms_op, built = rms_fake_gpu
    full = []
    real = rms_op.validate_rmsnorm_silu_inputs
    monkeypatch.setattr(rms_op, "validate_rmsnorm_silu_inputs", lambda *a, **kw: full.append(1) or real(*a, **kw))
    x = checks.random_tensor((48, 64), torch.float16, "cpu")
    gamma = checks.random_tensor((64,), torch.float16, "cpu")
    out = checks.poisoned((48, 64), torch.float16, "cpu")
    for _ in range(3):
        assert dispatch.fused_rmsnorm_silu(x, gamma, out=out) is out
        checks.assert_close(out, rs.rmsnorm_silu_reference(x, gamma), tolerance=checks.TOLERANCE["float16"])
    assert len(full) == 1 and built == [(64, "float16")], "a repeat call neither checks nor builds"
    # other rows are the same kernel: the same key
    x2 = checks.random_tensor((5, 64), torch.float16, "cpu")
    checks.assert_close(dispatch.fused_rmsnorm_silu(x2, gamma), rs.rmsnorm_silu_reference(x2, gamma),
                        tolerance=checks.TOLERANCE["float16"])
    assert dispatch.fused_rmsnorm_silu(x2, gamma) is not None and len(built) == 1
    for _ in range(2):
        for message, bad_x, bad_gamma, bad_out in _bad_rms_inputs(x, gamma, out, "meta"):
            with pytest.raises((TypeError, ValueError), match=message) as err:
                dispatch.fused_rmsnorm_silu(bad_x, bad_gamma, out=bad_out)
            assert "\n" not in str(err.value), "one line"
            assert err.value.__suppress_context__ or err.value.__context__ is None, "the op's line alone"
        dispatch.fused_rmsnorm_silu(x, gamma, out=out)         # still served, and right
        checks.assert_close(out, rs.rmsnorm_silu_reference(x, gamma), tolerance=checks.TOLERANCE["float16"])


def test_gpu_mode_drop_in_keys_differ_where_the_kernel_or_its_launch_does(rms_fake_gpu):
    rs, rms_op, built = rms_fake_gpu
    gamma = checks.random_tensor((64,), torch.float16, "cpu")
    for x in (checks.random_tensor((8, 64), torch.float16, "cpu"),           # 2-D: launched directly
              checks.random_tensor((2, 4, 64), torch.float16, "cpu"),        # 3-D: launched on views
              checks.random_tensor((8, 64), torch.bfloat16, "cpu")):
        g = gamma.to(x.dtype)
        checks.assert_close(rms_op.rmsnorm_silu(x, g), rs.rmsnorm_silu_reference(x, g),
                            tolerance=checks.TOLERANCE[str(x.dtype)[6:]])
        rms_op.rmsnorm_silu(x, g, out=torch.empty_like(x))
    assert len(rms_op._LAUNCHERS.entries) == 6 and built == [(64, "float16"), (64, "bfloat16")]
    with pytest.raises(ValueError, match="out must be contiguous"):     # the 3-D key, a strided out
        rms_op.rmsnorm_silu(checks.random_tensor((2, 4, 64), torch.float16, "cpu"), gamma,
                        out=torch.empty(2, 64, 4, dtype=torch.float16).transpose(1, 2))


def test_gpu_mode_drop_in_checks_every_call_where_nothing_else_does(rms_fake_gpu, monkeypatch):
    """A kernel that checks nothing (another backend) or an empty input (no launch): the op's own
    checks run on every call."""
    rs, rms_op, _ = rms_fake_gpu
    monkeypatch.setattr(runtime, "checks_its_arguments", lambda kernel: False)
    x, gamma = checks.random_tensor((8, 64), torch.float16, "cpu"), checks.random_tensor((64,), torch.float16, "cpu")
    rms_op.rmsnorm_silu(x, gamma)
    with pytest.raises(TypeError, match="gamma must have the dtype of x"):
        rms_op.rmsnorm_silu(x, gamma.float())
    empty = torch.empty(0, 64, dtype=torch.float16)
    assert rms_op.rmsnorm_silu(empty, gamma).shape == (0, 64)
    with pytest.raises(ValueError, match=r"gamma must have shape \(64,\)"):
        rms_op.rmsnorm_silu(empty, gamma[:32])


@pytest.mark.parametrize("mode,share", [("gpu", 0.5), ("emulated", 0.8)])
def test_the_drop_ins_fast_path_costs_less_than_the_checks_it_skips(rms_fake_gpu, monkeypatch, mode, share):
    """With the kernel call a no-op, the drop-in's whole call (mode, route, key, lookup, launch)
    costs less than its full checks alone: under half of them in GPU mode (on this project's 2-core
    CPU: 0.9 against 4.0 us), under 0.8 of them with the emulator's key, which holds every attribute
    the checks read."""
    from tilelang_tutorial.lessons.rmsnorm import dispatch

    rs, rms_op, _ = rms_fake_gpu
    if mode == "emulated":
        emulated = runtime.Mode("emulated", "sm_90a", None, True, "no GPU")
        monkeypatch.setattr(runtime, "mode", lambda: emulated)

    def noop(*args):
        return None
    noop.checks = True
    monkeypatch.setattr(rms_op, "_LAUNCHERS", rms_op._launchers(lambda C, dtype: noop))
    x, gamma = checks.random_tensor((48, 64), torch.float16, "cpu"), checks.random_tensor((64,), torch.float16, "cpu")
    y = torch.empty_like(x)
    dispatch.fused_rmsnorm_silu(x, gamma, out=y)
    assert len(rms_op._LAUNCHERS.entries) == 1
    fast, full = _fast_and_full_us(lambda: dispatch.fused_rmsnorm_silu(x, gamma, out=y),
                                   lambda: rms_op.validate_rmsnorm_silu_inputs(x, gamma, y))
    assert fast < share * full, f"the fast path costs {fast:.2f} us, the checks it skips {full:.2f} us"


@pytest.mark.gpu
def test_gpu_drop_in_names_each_argument_the_real_kernel_refuses():
    """The compiled kernel (C = 64, fp16) refuses each bad argument that shares the warm call's key,
    and the drop-in names it in one line."""
    from tilelang_tutorial.lessons.rmsnorm import dispatch
    from tilelang_tutorial.lessons.rmsnorm import kernel as rs

    x = checks.random_tensor((48, 64), torch.float16, "cuda")
    gamma = checks.random_tensor((64,), torch.float16, "cuda")
    out = checks.poisoned((48, 64), torch.float16, "cuda")
    for _ in range(2):
        dispatch.fused_rmsnorm_silu(x, gamma, out=out)
        checks.assert_close(out, rs.rmsnorm_silu_reference(x, gamma), tolerance=checks.TOLERANCE["float16"])
        for message, bad_x, bad_gamma, bad_out in _bad_rms_inputs(x, gamma, out, "cpu"):
            with pytest.raises((TypeError, ValueError), match=message) as err:
                dispatch.fused_rmsnorm_silu(bad_x, bad_gamma, out=bad_out)
            assert "\n" not in str(err.value), "one line"
            assert err.value.__suppress_context__ or err.value.__context__ is None, "the op's line alone"


@pytest.fixture
def gemm_fake_gpu(monkeypatch):
    """GPU mode on a CPU machine: gemm_relu's plans build a stand-in that checks its arguments as
    the compiled kernel does and computes relu(a @ b); no plans kept from before."""
    from tilelang_tutorial.lessons.gemm import kernel as gr
    from tilelang_tutorial.lessons.gemm import op as gemm_op

    mode = _FakeGPUMode("gpu", "sm_90a", "a stand-in GPU", True)
    monkeypatch.setattr(runtime, "mode", lambda: mode)
    monkeypatch.setattr(runtime, "launcher", lambda kernel, emulator_checks=None: kernel)
    monkeypatch.setattr(runtime, "checks_its_arguments", lambda kernel: getattr(kernel, "checks", False))
    built = []

    def build(N, K, *, config=None, dtype="float16", program=None, **kw):
        tdt = getattr(torch, dtype)

        def kernel(a, b, c):
            _check_arg("gemm_relu_kernel", "A", a, (None, K), tdt, "cpu")
            _check_arg("gemm_relu_kernel", "B", b, (K, N), tdt, "cpu")
            _check_arg("gemm_relu_kernel", "C", c, (a.shape[0], N), tdt, "cpu")
            c.copy_(gr.gemm_relu_reference(a, b))
        kernel.checks = True
        built.append((N, K, dtype))
        return kernel
    monkeypatch.setattr(gemm_op, "build_gemm_relu", build)
    gemm_op.clear_plans()
    yield gemm_op, built
    gemm_op.clear_plans()


def _bad_gemm_inputs(a, b, out, other):
    """[(message, a, b, out)]: each wrong in one attribute and sharing the valid call's GPU key (a's
    and b's shapes, a's dtype and device, out given) wherever it can."""
    dev = a.device.type
    M, K = a.shape
    N = b.shape[1]
    return [
        ("a and b must have the same dtype", a, b.to(torch.bfloat16), out),
        ("b must be contiguous", a, torch.empty(N, K, dtype=b.dtype, device=dev).t(), out),
        (f"b must be on a {dev} device, got {other}", a, b.to(other), out),
        ("a must be contiguous", torch.empty(K, M, dtype=a.dtype, device=dev).t(), b, out),
        ("b must be a torch.Tensor", a, b.tolist(), out),
        ("out must be float16, got float32", a, b, out.float()),
        ("out has shape", a, b, out[:-1]),
        ("out must be contiguous", a, b, torch.empty(N, M, dtype=a.dtype, device=dev).t()),
        (f"out must be on a {dev} device, got {other}", a, b, out.to(other)),
        ("16-byte boundary", torch.empty(M * K + 1, dtype=a.dtype, device=dev)[1:].view(M, K), b, out),
    ]


def _expect_gemm_refused(a, b, out, bad):
    from tilelang_tutorial.lessons.gemm import kernel as gr
    from tilelang_tutorial.lessons.gemm import op as gemm_op

    for _ in range(2):
        assert gemm_op.gemm_relu(a, b, gr.SEED_CONFIG, out=out) is out
        checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"])
        for message, bad_a, bad_b, bad_out in bad:
            with pytest.raises((TypeError, ValueError), match=message) as err:
                gemm_op.gemm_relu(bad_a, bad_b, gr.SEED_CONFIG, out=bad_out)
            assert "\n" not in str(err.value), "one line"
            assert err.value.__suppress_context__ or err.value.__context__ is None, "the op's line alone"


def test_gpu_mode_gemm_relu_keys_on_what_picks_the_plan_and_names_each_refused_argument(gemm_fake_gpu, monkeypatch):
    from tilelang_tutorial.lessons.gemm import kernel as gr

    gemm_op, built = gemm_fake_gpu
    plans, real_plan = [], gemm_op._plan
    monkeypatch.setattr(gemm_op, "_plan", lambda *args: plans.append(1) or real_plan(*args))
    a = checks.random_tensor((64, 64), torch.float16, "cpu")
    b = checks.random_tensor((64, 32), torch.float16, "cpu")
    out = checks.poisoned((64, 32), torch.float16, "cpu")
    _expect_gemm_refused(a, b, out, _bad_gemm_inputs(a, b, out, "meta"))
    assert built == [(32, 64, "float16")]
    # one plan for the valid key; the rest were refused by the stand-in kernel and then named, but
    # for the two that cannot be served a plan (a list; a misaligned view), planned and refused in
    # each of the two rounds
    assert len(plans) == 1 + 2 * 2
    fresh = checks.random_tensor((64, 64), torch.float16, "cpu"), checks.random_tensor((64, 32), torch.float16, "cpu")
    checks.assert_close(gemm_op.gemm_relu(*fresh, gr.SEED_CONFIG), gr.gemm_relu_reference(*fresh),
                        tolerance=checks.TOLERANCE["float16"])


@pytest.mark.gpu
def test_gpu_gemm_relu_names_each_argument_the_real_kernel_refuses():
    """The compiled kernel (the seed tile, N = 128, K = 256) refuses each bad argument that shares
    the warm call's key, and gemm_relu names it in one line."""
    a = checks.random_tensor((64, 256), torch.float16, "cuda")
    b = checks.random_tensor((256, 128), torch.float16, "cuda")
    out = checks.poisoned((64, 128), torch.float16, "cuda")
    _expect_gemm_refused(a, b, out, _bad_gemm_inputs(a, b, out, "cpu"))
