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


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120", "sm_120a"])
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


@pytest.mark.parametrize("bad", ["sm_75", "hopper", "", "sm90a", "sm_90", "sm_100"])
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


@pytest.mark.parametrize("capability,arch", [((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 9), "sm_89"),
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
