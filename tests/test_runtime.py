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


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90a"])
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


@pytest.mark.parametrize("bad", ["sm_75", "hopper", "", "sm90a"])
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
        assert text.startswith("Compile-only mode") and "no CUDA GPU" in text
        assert "sm_90a" in text and "recorded" in text and "nothing is launched" in text
    tt.set_arch("sm_80")
    if not HAS_GPU:
        assert "sm_80" in tt.describe_mode()


@pytest.mark.skipif(HAS_GPU, reason="checks the compile-only mode")
def test_require_gpu_raises_clearly():
    with pytest.raises(runtime.NoGPUError, match="needs a CUDA GPU"):
        runtime.require_gpu("this benchmark")
    assert not tt.mode().can_run and tt.mode().name == "compile-only"


def test_version_pin_message(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.99" if name == "tilelang" else real(name))
    with pytest.raises(tt.TileLangVersionError) as err:
        tt._check_tilelang_version()
    assert "0.1.15" in str(err.value) and "0.1.99" in str(err.value)
