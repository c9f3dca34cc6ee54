"""Every lesson kernel compiles (lowering + nvcc) for each architecture it is written for, fits
that architecture's shared memory, and every other known architecture gets either a build or a
one-line refusal before any compiler runs."""
import pytest

from conftest import full_only
from tilelang_tutorial import lessons, runtime
from tilelang_tutorial.inspector import kernel_source

#: CI (``CI=true``) leaves Ada out of the matrix (``--full`` keeps it): sm_89 runs Ampere's
#: instructions (sm_80, built) with the shared memory per block of sm_120 (built), and the lessons'
#: tests read the CUDA of the GEMM and of RMSNorm built for sm_89.
CI_LEAVES_OUT = ("sm_89",)
CASES = [pytest.param(case, arch, id=f"{case.name}-{arch}", marks=full_only if arch in CI_LEAVES_OUT else ())
         for lesson in lessons.all_lessons() for case in lesson.compile_cases()
         for arch in case.archs]

#: Targets without Hopper's and Blackwell's machinery; Volta and Turing have no cp.async either.
PRE_HOPPER = ("sm_70", "sm_75", "sm_80")
NO_CP_ASYNC = ("sm_70", "sm_75")

#: Kernels that compile for an architecture but ask for more shared memory per block than it has
#: (they would fail at their first launch there), measured from the generated launch code: the
#: GEMM's seed tile given explicitly (128 x 128 x 64, three stages: 96 KiB) on a T4 (64 KiB). What
#: the GEMM's rule builds there (``gemm_relu/rule M=4096``: ``rule.seed_config("sm_75")``, two
#: stages, 64 KiB) fits. An entry that starts to fit fails the test: remove it.
TOO_LARGE = {("gemm_relu/seed", "sm_75"), ("gemm_relu/unaligned N=1001 K=1000", "sm_75")}


class _ReachedTheCompiler(Exception):
    pass


def _no_compiler(*args, **kwargs):
    raise _ReachedTheCompiler


@pytest.mark.parametrize("case,arch", CASES)
def test_compiles(case, arch, monkeypatch):
    why = runtime.why_not_buildable(arch)
    if why is not None:
        # The installed nvcc cannot target it (CUDA 13 dropped sm_70): one line, no compiler.
        import tilelang

        monkeypatch.setattr(tilelang, "compile", _no_compiler)
        with pytest.raises(runtime.ArchError) as info:
            case.build(arch)
        assert "\n" not in str(info.value).strip() and arch in str(info.value) and "nvcc" in str(info.value)
        return
    kernel = case.build(arch)
    assert str(kernel.target.attrs["arch"]) == arch
    src = kernel_source(kernel)
    assert "__global__" in src
    if arch in PRE_HOPPER:
        assert "wgmma" not in src and "setmaxnreg" not in src and "tma_load" not in src
    if arch in NO_CP_ASYNC:
        assert "cp_async" not in src and "cp.async" not in src
    smem, limit = runtime.dynamic_shared_memory(kernel), runtime.ARCHS[arch].smem_per_block
    assert smem is not None, "the launch code's shared-memory size could not be read"
    if (case.name, arch) in TOO_LARGE:
        assert smem > limit, f"{case.name} now fits {arch} ({smem} <= {limit} bytes): remove it from TOO_LARGE"
        pytest.xfail(f"{case.name} needs {smem // 1024} KiB of shared memory per block; {arch} offers {limit // 1024} KiB")
    assert smem <= limit, f"{case.name} needs {smem} bytes of shared memory per block; {arch} offers {limit}"


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


OTHER = [pytest.param(case, arch, id=f"{case.name}-{arch}")
         for lesson in lessons.all_lessons() for case in lesson.compile_cases()
         for arch in runtime.ACCEPTED_ARCHS if arch not in case.archs and arch not in case.unsupported]


@pytest.mark.parametrize("case,arch", OTHER)
def test_every_other_architecture_builds_or_refuses_in_one_line(case, arch, monkeypatch):
    """The architectures a case does not list (sm_75 for MLA's 152 KiB kernels, ...): asking for
    one either goes on to the compiler or stops first with one line naming the architecture,
    never an exception from deep inside."""
    import tilelang

    monkeypatch.setattr(tilelang, "compile", _no_compiler)
    try:
        case.build(arch)
    except _ReachedTheCompiler:
        return                      # it would compile: not claimed by the case, not refused either
    except Exception as exc:        # a refusal: one line that names the architecture
        text = str(exc).strip()
        assert "\n" not in text and arch in text, f"{type(exc).__name__}: {text}"


def test_turing_and_volta_are_in_the_matrix():
    archs = {arch for lesson in lessons.all_lessons() for case in lesson.compile_cases() for arch in case.archs}
    assert {"sm_70", "sm_75"} <= archs


def test_every_lesson_with_kernels_is_in_the_matrix():
    for lesson in lessons.all_lessons():
        has_kernels = any(m.name in ("kernel", "scale_copy", "op") for m in __import__("pkgutil").iter_modules(lesson.__path__))
        assert not has_kernels or lesson.compile_cases(), f"{lesson.__name__} builds kernels but lists no compile cases"


def test_on_a_t4_a_kernel_too_large_for_its_blocks_is_refused_before_launch(monkeypatch):
    """On a GPU (faked here: a T4), compile_kernel reads the shared memory the kernel will be
    launched with and refuses in one line where the GPU's blocks cannot have it, instead of a CUDA
    error at the first launch."""
    import torch

    from tilelang_tutorial.lessons.gemm.configs import SEED_CONFIG
    from tilelang_tutorial.lessons.gemm.kernel import gemm_relu_program

    if runtime.nvcc_path() is None:
        pytest.skip("needs nvcc")
    for var in (runtime.ARCH_ENV, runtime.EMULATE_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    runtime.invalidate_mode()
    try:
        assert (runtime.mode().name, runtime.mode().arch) == ("gpu", "sm_75")
        program = gemm_relu_program(None, 4096, 4096, in_dtype="float16", dynamic_m=True, **SEED_CONFIG.as_dict())
        with pytest.raises(runtime.ArchError) as info:
            runtime.compile_kernel(program)
        text = str(info.value)
        assert "\n" not in text and "96 KiB" in text and "64 KiB" in text and "Tesla T4" in text, text
        from tilelang_tutorial.lessons.tiles.scale_copy import scale_copy_program

        small = runtime.compile_kernel(scale_copy_program(4096, dtype="float16"))   # 16 KiB: fits
        assert runtime.dynamic_shared_memory(small) <= runtime.ARCHS["sm_75"].smem_per_block
    finally:
        monkeypatch.undo()
        runtime.invalidate_mode()
