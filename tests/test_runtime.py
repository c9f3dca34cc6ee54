import importlib.metadata

import pytest

import tilelang_tutorial as tt
from tilelang_tutorial import runtime
from conftest import HAS_GPU


def test_default_arch_without_override(monkeypatch):
    monkeypatch.delenv(runtime.ARCH_ENV, raising=False)
    expected = runtime._gpu_arch() if HAS_GPU else "sm_90a"
    assert runtime.current_arch() == expected
    assert runtime.target() == {"kind": "cuda", "arch": expected}


@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120", "sm_120a"])
def test_env_override(monkeypatch, arch):
    monkeypatch.setenv(runtime.ARCH_ENV, arch)
    assert runtime.current_arch() == arch
    assert runtime.target()["arch"] == arch


def test_function_override_beats_env(monkeypatch):
    monkeypatch.setenv(runtime.ARCH_ENV, "sm_89")
    tt.set_arch("sm_80")
    assert runtime.current_arch() == "sm_80"
    tt.set_arch(None)
    assert runtime.current_arch() == "sm_89"


def test_arch_override_context_restores():
    with tt.arch_override("sm_80"):
        assert runtime.current_arch() == "sm_80"
    assert runtime.current_arch() != "sm_80" or HAS_GPU


@pytest.mark.parametrize("bad", ["sm_61", "sm_130", "hopper", "", "sm90a", "sm_90", "sm_100"])
def test_unknown_arch_lists_accepted(monkeypatch, bad):
    with pytest.raises(runtime.ArchError) as err:
        tt.set_arch(bad)
    for arch in runtime.ACCEPTED_ARCHS:
        assert arch in str(err.value)
    if bad:
        monkeypatch.setenv(runtime.ARCH_ENV, bad)
        with pytest.raises(runtime.ArchError, match="accepted values"):
            runtime.current_arch()


def test_describe_mode_is_one_clear_sentence(monkeypatch):
    monkeypatch.delenv(runtime.ARCH_ENV, raising=False)
    text = tt.describe_mode()
    if HAS_GPU:
        assert text.startswith("GPU mode") and "measured" in text
    else:
        assert text.startswith("Emulated mode") and "no CUDA GPU" in text
        assert "sm_90a" in text and "recorded" in text and "tile emulator" in text and "no timing" in text
    tt.set_arch("sm_80")
    if not HAS_GPU:
        assert "sm_80" in tt.describe_mode()


@pytest.mark.skipif(HAS_GPU, reason="checks the compile-only mode")
def test_require_gpu_raises_clearly():
    with pytest.raises(runtime.NoGPUError, match="needs a CUDA GPU"):
        runtime.require_gpu("this benchmark")
    assert not tt.mode().can_run and tt.mode().name == "emulated" and tt.mode().device == "cpu"


@pytest.mark.parametrize("capability,arch", [((7, 0), "sm_70"), ((7, 5), "sm_75"), ((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 9), "sm_89"),
                                             ((9, 0), "sm_90a"), ((10, 0), "sm_100a"), ((12, 0), "sm_120a")])
def test_a_gpu_is_compiled_for_its_arch_specific_target(capability, arch):
    """From Hopper on, the 'a' targets hold the instructions the kernels use (wgmma, setmaxnreg,
    tcgen05); TileLang's own detection adds the 'a' the same way."""
    assert runtime.arch_for_capability(*capability) == arch


def test_plain_sm_120_gets_the_pass_config_it_needs():
    """Plain sm_120 has no setmaxnreg: warp specialization must be off there (docs/blackwell.md)."""
    assert dict(runtime.ARCHS["sm_120"].pass_configs) == {"tl.disable_warp_specialized": True}
    assert dict(runtime.ARCHS["sm_120a"].pass_configs) == {}


def test_forcing_emulation_on_a_gpu_machine(monkeypatch):
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    m = tt.mode()
    assert not m.can_run and m.name == "emulated"
    if HAS_GPU:
        assert m.why_emulated == "forced" and "asks for emulation" in tt.describe_mode()


def test_version_pin_message(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.99" if name == "tilelang" else real(name))
    with pytest.raises(tt.TileLangVersionError) as err:
        tt._check_tilelang_version()
    assert "0.1.15" in str(err.value) and "0.1.99" in str(err.value)


# ---------------------------------------------------------------------------------------------
# Any CUDA GPU: a faked compute capability picks a target and a mode, never an exception.
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def fake_gpu(monkeypatch):
    """``fake_gpu((7, 5))`` makes torch report one GPU of that capability (no real CUDA call)."""
    import torch

    monkeypatch.delenv(runtime.ARCH_ENV, raising=False)
    monkeypatch.delenv(runtime.EMULATE_ENV, raising=False)

    def install(capability, name="Fake GPU"):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
        runtime.invalidate_mode()

    yield install
    runtime.force_emulation(None)
    runtime.invalidate_mode()     # the next mode() asks the real torch again


# (compute capability, the GPU) -> (target, mode) with this machine's nvcc. sm_70 depends on the
# toolkit: CUDA 13's nvcc cannot target Volta, so there the V100 is emulated for sm_75.
GPUS = [((7, 0), "Tesla V100"), ((7, 5), "Tesla T4"), ((8, 0), "A100"), ((8, 6), "A10"), ((8, 9), "L4"),
        ((9, 0), "H200"), ((10, 0), "B200"), ((12, 0), "RTX 5090"),
        ((6, 1), "GTX 1080"), ((13, 0), "a GPU newer than the table")]


def _expected(capability):
    own = runtime.arch_for_capability(*capability)
    if own in runtime.ARCHS and runtime.can_build(own):
        return own, "gpu"
    if capability < (7, 5) or own == "sm_70":
        return "sm_75", "emulated"          # the oldest target that can be built here
    return "sm_120a", "emulated"            # the newest one below a GPU newer than the table


@pytest.mark.parametrize("capability,name", GPUS, ids=[f"cc{c[0]}.{c[1]}" for c, _ in GPUS])
def test_any_gpu_gets_a_target_and_a_mode(fake_gpu, capability, name, capsys):
    fake_gpu(capability, name)
    arch, mode_name = _expected(capability)
    m = tt.mode()
    assert (m.arch, m.name) == (arch, mode_name), m
    assert runtime.target() == {"kind": "cuda", "arch": arch}
    text = tt.describe_mode()
    assert "\n" not in text and arch in text and name in text
    if mode_name == "emulated":
        own = runtime.arch_for_capability(*capability)
        assert m.why_emulated == "unsupported GPU" and own in text and "nearest target" in text, text
        assert "tile emulator" in text and m.device == "cpu"
    else:
        assert text.startswith("GPU mode") and m.device == "cuda"
    print(f"compute capability {capability[0]}.{capability[1]} ({name}): {m.name} mode, compiled for {m.arch}")
    assert f"{m.name} mode, compiled for {arch}" in capsys.readouterr().out


def test_a_volta_gpu_with_a_cuda12_toolkit_runs_there(fake_gpu, monkeypatch):
    """Where nvcc lists compute_70 (CUDA 12), a V100 is a GPU-mode machine for sm_70."""
    real = runtime._nvcc_query
    monkeypatch.setattr(runtime, "_nvcc_query",
                        lambda nvcc, flag: "compute_70 compute_75 compute_80 compute_86 compute_89 compute_90"
                        if flag == "--list-gpu-arch" else real(nvcc, flag))
    fake_gpu((7, 0), "Tesla V100")
    if runtime.nvcc_path() is None:
        pytest.skip("no nvcc: nothing is compiled, so the toolkit does not decide")
    m = tt.mode()
    assert (m.arch, m.name) == ("sm_70", "gpu")


def test_an_arch_nvcc_cannot_target_is_refused_before_compiling(monkeypatch):
    import tilelang

    if runtime.nvcc_path() is None or runtime.can_build("sm_70"):
        pytest.skip("needs an nvcc without Volta (CUDA 13)")
    monkeypatch.setattr(tilelang, "compile", lambda *a, **k: pytest.fail("reached the compiler"))
    with pytest.raises(runtime.ArchError) as err:
        runtime.compile_kernel(runtime.probe_program(), arch="sm_70")
    text = str(err.value)
    assert "\n" not in text and "sm_70" in text and "CUDA 12" in text and "nvcc" in text


def test_a_notebook_whose_kernels_need_other_archs_switches_in_one_line(fake_gpu, capsys):
    fake_gpu((7, 5), "Tesla T4")
    assert runtime.use_arch_among(("sm_90a", "sm_100a"), "these kernels need 224 KiB of shared memory") == "sm_90a"
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0 and out.startswith("sm_75:") and "sm_90a" in out and "emulator" in out
    m = tt.mode()
    assert (m.arch, m.name, m.why_emulated) == ("sm_90a", "emulated", "another architecture")
    assert runtime.use_arch_among(("sm_90a",), "x") == "sm_90a" and capsys.readouterr().out == ""


# ---------------------------------------------------------------------------------------------
# The mode is decided once: cached, and recomputed when what it depends on changes.
# ---------------------------------------------------------------------------------------------

def test_the_mode_is_cached_and_invalidated_by_every_input(fake_gpu, monkeypatch):
    fake_gpu((9, 0), "H200")
    first = tt.mode()
    assert first.name == "gpu" and tt.mode() is first, "asked twice, decided once"
    tt.set_arch("sm_80")
    assert (tt.mode().arch, tt.mode().name) == ("sm_80", "emulated")
    tt.set_arch(None)
    assert tt.mode() == first
    tt.force_emulation(True)
    assert (tt.mode().name, tt.mode().why_emulated) == ("emulated", "forced")
    tt.force_emulation(None)
    assert tt.mode() == first
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    assert tt.mode().why_emulated == "forced"
    monkeypatch.setenv(runtime.EMULATE_ENV, "0")
    assert tt.mode().name == "gpu"
    monkeypatch.setenv(runtime.ARCH_ENV, "sm_89")
    assert tt.mode().arch == "sm_89"
    monkeypatch.delenv(runtime.ARCH_ENV)
    with tt.arch_override("sm_100a"):
        assert tt.mode().arch == "sm_100a"
    assert tt.mode() == first
    # nvcc's whereabouts: PATH / CUDA_HOME changes are seen
    cached = tt.mode()
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    after = tt.mode()
    assert after is not cached and after.can_compile == (runtime.nvcc_path() is not None)


def test_run_on_the_gpu_is_a_plain_call_and_emulates_otherwise(fake_gpu, monkeypatch):
    from tilelang_tutorial import emulate

    calls = []

    class Compiled:                      # what tilelang.compile returns, for run()'s purposes
        def get_kernel_source(self):
            return ""

        def __call__(self, *args):
            calls.append(("gpu", args))

    monkeypatch.setattr(emulate, "run", lambda kernel, *args, **scalars: calls.append(("emulated", args, scalars)))
    fake_gpu((9, 0), "H200")
    kernel = Compiled()
    tt.run(kernel, 1, 2, n=3)
    assert calls.pop() == ("gpu", (1, 2, 3))
    assert runtime.launcher(kernel) is kernel
    tt.run(runtime.UncompiledKernel(None, "sm_90a"), 1)
    assert calls.pop()[0] == "emulated"
    tt.force_emulation(True)
    tt.run(kernel, 1, 2)
    assert calls.pop() == ("emulated", (1, 2), {})
    # the fast path (a known kernel type, the same choices) sees every change of them
    tt.force_emulation(None)
    tt.run(kernel, 1)
    assert calls.pop() == ("gpu", (1,))
    tt.set_arch("sm_80")
    tt.run(kernel, 1)
    assert calls.pop()[0] == "emulated"
    tt.set_arch(None)
    tt.run(kernel, 1)
    assert calls.pop() == ("gpu", (1,))
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    tt.run(kernel, 1)
    assert calls.pop()[0] == "emulated"
    monkeypatch.setenv(runtime.EMULATE_ENV, "0")
    monkeypatch.setenv(runtime.ARCH_ENV, "sm_100a")
    tt.run(kernel, 1)
    assert calls.pop()[0] == "emulated"
    monkeypatch.delenv(runtime.ARCH_ENV)
    tt.run(kernel, 1)
    assert calls.pop() == ("gpu", (1,))


def test_mode_and_run_cost_well_under_a_microsecond_above_the_call(fake_gpu):
    """The per-call price of the mode check (CPU; the GPU figure comes from ``host-cost``)."""
    from tilelang_tutorial import host_cost

    fake_gpu((9, 0), "H200")

    class Compiled:
        def get_kernel_source(self):
            return ""

        def __call__(self, *args):
            return None

    kernel = Compiled()
    costs = host_cost.compare({"bare": lambda: kernel(1, 2), "runtime.run": lambda: tt.run(kernel, 1, 2),
                               "runtime.mode": tt.mode}, calls=2000, sync=None)
    # measured here (2 shared cores): mode() ~0.5 us, run() ~0.7 us above the call; the bound leaves
    # room for a loaded machine but fails the old uncached mode (6.5 us on the H200's host)
    assert costs["runtime.mode"] < 3.0 and costs["runtime.run"] - costs["bare"] < 3.0, costs


def test_triton_is_told_the_fp_fusion_default_so_it_does_not_warn():
    """Triton 3.9 warns at the first compile of every process where TRITON_DEFAULT_FP_FUSION is
    unset; importing the package settles it (fusion on, as the Triton peers were measured)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_DEFAULT_FP_FUSION"}
    knobs = pytest.importorskip("triton.knobs")
    if not hasattr(knobs.language, "fp_fusion_enabled"):    # Triton before 3.9 has no such default to warn about
        pytest.skip(f"triton {__import__('triton').__version__} has no fp_fusion default")
    code = ("import tilelang_tutorial, triton.knobs as knobs; "
            "print(knobs.language.fp_fusion_enabled(None))")
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-1500:]


def test_a_slow_step_says_what_it_is_doing_and_a_fast_one_stays_quiet(monkeypatch, capsys):
    import time

    monkeypatch.setattr(runtime, "COMPILE_NOTICE_S", 0.2)
    with runtime._notice_after("[compile] slow ..."):
        time.sleep(0.6)
    with runtime._notice_after("[compile] fast ..."):
        pass
    time.sleep(0.4)
    assert capsys.readouterr().out == "[compile] slow ...\n"


@pytest.mark.gpu
def test_on_the_gpu_run_launches_the_compiled_kernel_and_host_cost_measures_both():
    """runtime.run's GPU path calls the compiled kernel itself; host_cost times both back to back.
    How far apart they are is a benchmark's figure (`python -m tilelang_tutorial host-cost`, the
    `*_host` suites), not a unit test's: timing thresholds in tests only make them flaky."""
    import torch

    from tilelang_tutorial import host_cost

    kernel = runtime.compile_kernel(runtime.probe_program())
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    costs = host_cost.compare({"bare": lambda: kernel(x, y), "run": lambda: tt.run(kernel, x, y)}, calls=5000)
    assert torch.equal(y, x + 1)
    assert set(costs) == {"bare", "run"} and all(0 < us < 1000 for us in costs.values()), costs


def test_launchers_plan_once_per_key_and_mode_and_name_what_a_launch_refuses():
    plans, checked = [], []

    def check(x):
        checked.append(x)
        if x < 0:
            raise ValueError("x must not be negative")

    def launch(x):
        if x < 0:
            raise RuntimeError("kernel main input x violates its constraint")
        if x == 0:
            raise RuntimeError("the kernel's own error")
        return 1 / x

    def plan(x):
        plans.append(x)
        check(x)
        return launch, ()

    launchers = runtime.Launchers(plan, check, maxsize=2)
    emulated = runtime.Mode("emulated", "sm_90a", None, True, "no GPU")
    assert launchers(emulated, "k", 2) == 0.5 and launchers(emulated, "k", 4) == 0.25
    assert plans == [2], "planned once per key"
    with pytest.raises(ValueError, match="negative") as err:       # a launch the key serves, refused
        launchers(emulated, "k", -1)
    assert err.value.__suppress_context__
    with pytest.raises(RuntimeError, match="own error"):           # not the input's fault: unchanged
        launchers(emulated, "k", 0)
    other = runtime.Mode("emulated", "sm_80", None, True, "no GPU")
    launchers(other, "k", 2)
    assert plans == [2, 2], "an entry serves only the mode it was planned in"
    launchers(emulated, None, 2)
    launchers(emulated, ("unhashable", [1]), 2)
    assert plans == [2, 2, 2, 2] and None not in launchers.entries, "unkeyed calls are planned every time"
    launchers(emulated, "j", 2)
    launchers(emulated, "i", 2)
    assert len(launchers.entries) <= 2 and "i" in launchers.entries, "bounded: full, it starts over and keeps the new plan"
    gpu = runtime.Mode("gpu", "sm_90a", "a GPU", True)
    checked.clear()
    launchers(gpu, "g", 2)
    launchers(gpu, "g", 2)
    assert len(checked) == 2, "in GPU mode, with no kernel that checks its arguments, every call is checked"
