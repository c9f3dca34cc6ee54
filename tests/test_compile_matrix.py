"""Every tutorial kernel compiles (lowering + nvcc) for each architecture it is written for."""
import pytest

from tilelang_tutorial import catalog
from tilelang_tutorial.inspector import kernel_source

CASES = [pytest.param(e, arch, id=f"{e.name}-{arch}") for e in catalog.ENTRIES for arch in catalog.PORTABLE
         if arch in e.archs]


@pytest.mark.parametrize("entry,arch", CASES)
def test_compiles(entry, arch):
    kernel = entry.build(arch)
    assert str(kernel.target.attrs["arch"]) == arch
    src = kernel_source(kernel)
    assert '__global__' in src
    if arch == "sm_80":
        assert "wgmma" not in src and "setmaxnreg" not in src and "tma_load" not in src


def test_catalog_covers_every_kernel_module():
    import pkgutil

    import tilelang_tutorial.kernels as kernels

    modules = {m.name for m in pkgutil.iter_modules(kernels.__path__) if not m.name.endswith("_triton")}
    covered = {e.name.split("/")[0] for e in catalog.ENTRIES}
    assert modules <= covered, f"kernel modules missing from catalog.ENTRIES: {modules - covered}"
