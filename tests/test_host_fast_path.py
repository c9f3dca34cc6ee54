"""The ops' fast paths (issue 24, goal 1): ``scale_copy`` and ``row_sum`` check their inputs in
full once per key (shapes, dtypes, devices, contiguity, mode, knobs) and then only look the key
up; ``MLADecodePlan.run`` compares its inputs with the plan's in one step and reuses the caches'
2-D views. Each test warms the fast path with a valid call first, then feeds inputs that share
as much of the key as they can and are wrong: each still gets its one-line error, on every call.

The kernels are stand-ins (a torch computation of the same result) so nothing compiles here; the
ops' own code runs unchanged. A GPU machine runs the same tests with CUDA tensors, and the
CPU-tensor-in-GPU-mode case."""
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
    """The builders return torch stand-ins, and the launcher runs them as they are."""
    built = []

    def fake_scale_copy(N, **kw):
        built.append(("scale_copy", N, kw))
        return lambda x, y, a: y.copy_(x.float() * a)

    def fake_row_sum(N, **kw):
        built.append(("row_sum", N, kw))
        return lambda x, s: s.copy_(x.float().sum(1))

    monkeypatch.setattr(scale_copy, "build_scale_copy", fake_scale_copy)
    monkeypatch.setattr(row_sum, "build_row_sum", fake_row_sum)
    monkeypatch.setattr(runtime, "launcher", lambda kernel: kernel)
    return built


def _spy_checks(monkeypatch, module):
    calls = []
    full = module._check

    def spy(*args):
        calls.append(args)
        return full(*args)
    monkeypatch.setattr(module, "_check", spy)
    return calls


def test_a_repeat_call_skips_the_checks_and_the_build(stand_ins, monkeypatch):
    calls = _spy_checks(monkeypatch, scale_copy)
    x = checks.random_tensor((33, 64), torch.float16, DEVICE)
    y = checks.poisoned((33, 64), torch.float16, DEVICE)
    for _ in range(3):
        scale_copy.scale_copy(x, 2.0, out=y)
        checks.assert_close(y, scale_copy.scale_copy_reference(x, 2.0), tolerance=checks.TOLERANCE["float16"])
    assert len(calls) == 1 and len(stand_ins) == 1, "the first call checks and builds, the later ones do not"
    # new tensors with the same shapes, dtypes and device: still the fast path
    x2 = checks.random_tensor((33, 64), torch.float16, DEVICE)
    scale_copy.scale_copy(x2, -1.0, out=y)
    checks.assert_close(y, scale_copy.scale_copy_reference(x2, -1.0), tolerance=checks.TOLERANCE["float16"])
    assert len(calls) == 1
    # another width is another kernel: checked and built again
    scale_copy.scale_copy(checks.random_tensor((33, 128), torch.float16, DEVICE), 2.0)
    assert len(calls) == 2 and [b[1] for b in stand_ins] == [64, 128]


def test_a_replaced_builder_is_used_at_once(stand_ins, monkeypatch):
    """A cached launcher belongs to the builder that made it: replacing the builder (as tests and
    readers do) is seen on the next call, not hidden by the cache."""
    x = checks.random_tensor((5, 64), torch.float16, DEVICE)
    scale_copy.scale_copy(x, 1.0)
    monkeypatch.setattr(scale_copy, "build_scale_copy", lambda N, **kw: lambda x, y, a: y.fill_(7.0))
    assert torch.all(scale_copy.scale_copy(x, 1.0) == 7.0)


def _bad_tile_inputs(x, out_ok):
    """[(message, x, out)]: inputs that share as much of the valid call's key as they can and are
    wrong in one attribute."""
    M, N = x.shape
    square = checks.random_tensor((N, N), x.dtype, DEVICE)
    strided_out = (torch.empty(2 * M, dtype=out_ok.dtype, device=DEVICE)[::2] if out_ok.dim() == 1
                   else torch.empty(N, M, dtype=out_ok.dtype, device=DEVICE).t())
    return [
        ("x must be float16 or bfloat16 or float32, got int32", x.to(torch.int32), None),
        ("x must have 2 dimensions", x[None], None),
        ("x must be contiguous", x.t().contiguous().t(), None),             # same shape and dtype
        ("x must be contiguous", square.t(), None),                          # a square's transpose
        (f"x must be on a {DEVICE} device", x.to(OTHER), None),
        ("x must be a torch.Tensor", x.tolist(), None),
        ("out must be float(16|32), got int32", x, out_ok.to(torch.int32)),
        ("out has shape", x, out_ok[:-1]),
        ("out must have", x, out_ok[None]),
        ("out must be contiguous", x, strided_out),
        (f"out must be on a {DEVICE} device", x, out_ok.to(OTHER)),
    ]


@pytest.mark.parametrize("op", ["scale_copy", "row_sum"])
def test_bad_inputs_after_a_warm_cache_still_get_their_one_line_error(stand_ins, op):
    x = checks.random_tensor((48, 64), torch.float16, DEVICE)
    if op == "scale_copy":
        out = torch.empty_like(x)
        call = lambda a, o: scale_copy.scale_copy(a, 0.5, out=o)  # noqa: E731
    else:
        out = torch.empty(48, dtype=torch.float32, device=DEVICE)
        call = lambda a, o: row_sum.row_sum(a, out=o)  # noqa: E731
    bad = _bad_tile_inputs(x, out)
    for _ in range(2):                      # the valid calls warm the cache; the bad ones still fail
        call(x, out)
        call(x, None)
        for message, bad_x, bad_out in bad:
            with pytest.raises((TypeError, ValueError), match=message) as err:
                call(bad_x, bad_out)
            assert "\n" not in str(err.value), "one line"


@pytest.mark.parametrize("module", [scale_copy, row_sum], ids=["scale_copy", "row_sum"])
def test_inputs_that_differ_in_any_checked_attribute_have_different_keys(module):
    x = checks.random_tensor((16, 16), torch.float16, "cpu")
    m = runtime.mode()
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


@pytest.mark.gpu
def test_gpu_cpu_tensors_after_a_warm_cache_are_refused(stand_ins):
    x = checks.random_tensor((48, 64), torch.float16, "cuda")
    scale_copy.scale_copy(x, 0.5)
    row_sum.row_sum(x)
    for call in (lambda a: scale_copy.scale_copy(a, 0.5), lambda a: row_sum.row_sum(a)):
        with pytest.raises(ValueError, match="x must be on a cuda device"):
            call(x.cpu())


def _per_call_us(fn, calls=2000, loops=7):
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def test_the_fast_path_costs_less_than_the_checks_it_skips(monkeypatch):
    """With the kernel call a no-op, the op's whole call (mode, key, lookup, launch) costs less than
    its full checks alone, which it used to run on every call (on this project's 2-core CPU: 1.1
    against 2.5 us)."""
    x = checks.random_tensor((48, 64), torch.float16, DEVICE)
    y = torch.empty_like(x)
    monkeypatch.setattr(scale_copy, "build_scale_copy", lambda N, **kw: None)
    monkeypatch.setattr(runtime, "launcher", lambda kernel: lambda *args: None)
    scale_copy.scale_copy(x, 0.5, out=y)
    fast = _per_call_us(lambda: scale_copy.scale_copy(x, 0.5, out=y))
    full = _per_call_us(lambda: scale_copy._check(x, y, DEVICE))
    assert fast < 0.8 * full, f"the fast path costs {fast:.2f} us, the checks it skips {full:.2f} us"


# ------------------------------------------------------------------------------------------------
# MLADecodePlan.run
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def mla_plan(monkeypatch):
    """A plan (h_q 16, two sequences) whose kernel is the fp32 reference on the views run passes."""
    from tilelang_tutorial.lessons.mla import op
    from tilelang_tutorial.lessons.mla.common import DIM_NOPE, DIM_PE, PAGE_SIZE
    from tilelang_tutorial.lessons.mla.reference import make_paged_inputs, mla_decode_reference

    launched = []

    def kernel(q_nope, q_pe, kv, pe, block_table, seqlens, lse, o_partial, out):
        launched.append((kv, pe))
        out.copy_(mla_decode_reference(q_nope, q_pe, kv.view(-1, PAGE_SIZE, 1, DIM_NOPE),
                                       pe.view(-1, PAGE_SIZE, 1, DIM_PE), block_table, seqlens))

    monkeypatch.setattr(op, "build_mla_decode", lambda *a, **kw: kernel)
    x = make_paged_inputs(2, 16, [70, 130], device=DEVICE, seed=5)
    the_plan = op.plan(**x)
    the_plan._launch = kernel
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
    assert len(launched) == 2, "no bad input reached the kernel"


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
