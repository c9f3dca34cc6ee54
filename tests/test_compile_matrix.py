"""Every lesson kernel compiles (lowering + nvcc) for each architecture it is written for."""
import pytest

from tilelang_tutorial import lessons
from tilelang_tutorial.inspector import kernel_source

CASES = [pytest.param(case, arch, id=f"{case.name}-{arch}")
         for lesson in lessons.all_lessons() for case in lesson.compile_cases()
         for arch in case.archs]


@pytest.mark.parametrize("case,arch", CASES)
def test_compiles(case, arch):
    kernel = case.build(arch)
    assert str(kernel.target.attrs["arch"]) == arch
    src = kernel_source(kernel)
    assert "__global__" in src
    if arch == "sm_80":
        assert "wgmma" not in src and "setmaxnreg" not in src and "tma_load" not in src


UNSUPPORTED = [pytest.param(case, arch, reason, id=f"{case.name}-{arch}")
               for lesson in lessons.all_lessons() for case in lesson.compile_cases()
               for arch, reason in case.unsupported.items()]


@pytest.mark.parametrize("case,arch,reason", UNSUPPORTED)
def test_an_unsupported_architecture_gets_one_clear_line(case, arch, reason, monkeypatch):
    """Where a kernel cannot be built, the reader gets the reason before any compiler runs."""
    import tilelang

    def no_compiler(*a, **k):
        raise AssertionError(f"{case.name} on {arch} reached the compiler instead of refusing")

    monkeypatch.setattr(tilelang, "compile", no_compiler)
    with pytest.raises(Exception, match=reason) as info:
        case.build(arch)
    assert "\n" not in str(info.value).strip(), "the refusal is one line"


def test_every_lesson_with_kernels_is_in_the_matrix():
    for lesson in lessons.all_lessons():
        has_kernels = any(m.name in ("kernel", "scale_copy", "op") for m in __import__("pkgutil").iter_modules(lesson.__path__))
        assert not has_kernels or lesson.compile_cases(), f"{lesson.__name__} builds kernels but lists no compile cases"
