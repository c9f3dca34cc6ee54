"""Every kernel the notebooks build: for the compile-matrix test and ``warm-cache``.

* ``ENTRIES``: one entry per tutorial kernel, (name, architectures it is written for,
  builder(arch) -> compiled kernel); the compile-matrix test builds each for every architecture
  it lists.
* ``NOTEBOOK_BUILDS``: every *other* compile the notebooks run on the CPU path -- extra
  configurations (the inspector's recompile, the spilling GEMM of notebook 02, the naive RMSNorm
  widths of notebook 05, the swizzle demo of notebook 03) and the builds a notebook pins to one
  architecture whatever the current one is (notebook 02's sm_80 GEMM, notebooks 04 and 05's sm_90a
  builds). ``arch=None`` means "the current architecture", as the notebook does.

``warm-cache`` compiles both lists, so a notebook's first run finds every kernel in the cache.
The exercises' starters compile nothing; a reader's own kernel cannot be pre-compiled.
"""
from typing import Callable, NamedTuple, Optional

PORTABLE = ("sm_80", "sm_89", "sm_90a")
HOPPER = ("sm_90a",)


class Entry(NamedTuple):
    name: str
    archs: tuple
    build: Callable[[str], object]


def _scale_copy(arch):
    from .kernels import scale_copy
    return scale_copy.build_scale_copy(4096, dtype="float16", arch=arch)


def _row_sum(arch):
    from .kernels import row_sum
    return row_sum.build_row_sum(4096, dtype="float16", arch=arch)


def _gemm_seed(arch):
    from .kernels import gemm_relu
    return gemm_relu.build_gemm_relu(4096, 4096, config=gemm_relu.SEED_CONFIG, dtype="float16", arch=arch)


def _gemm_tuned(arch):
    from .kernels import gemm_relu
    return gemm_relu.build_gemm_relu(4096, 4096, config=gemm_relu.tuned_config("float16"), dtype="float16", arch=arch)


def _rmsnorm(C):
    def build(arch):
        from .kernels import rmsnorm_silu
        return rmsnorm_silu.build_rmsnorm_silu(C, "float16", arch=arch)
    return build


def _mla(schedule):
    def build(arch):
        from .kernels import mla_decode
        return mla_decode.build_mla_decode(128, "float16", split=True, schedule=schedule, arch=arch)
    return build


ENTRIES = [
    Entry("scale_copy", PORTABLE, _scale_copy),
    Entry("row_sum", PORTABLE, _row_sum),
    Entry("gemm_relu/seed", PORTABLE, _gemm_seed),
    Entry("gemm_relu/tuned", HOPPER, _gemm_tuned),
    Entry("rmsnorm_silu/C=640", PORTABLE, _rmsnorm(640)),
    Entry("rmsnorm_silu/C=96", PORTABLE, _rmsnorm(96)),
    Entry("mla_decode/h128", HOPPER, _mla("auto")),
    Entry("mla_decode_ws/h128", HOPPER, _mla("ws")),
    Entry("mla_decode_seesaw/h128", HOPPER, _mla("seesaw")),
]


class NotebookBuild(NamedTuple):
    notebook: str
    name: str
    arch: Optional[str]          # None: the current architecture; else pinned by the notebook
    build: Callable[[str], object]


def _scale_copy_inspector(arch):
    # notebook 01: inspector.recompile(block_M=32) (block_N and threads keep their initial values)
    from .kernels import scale_copy
    return scale_copy.build_scale_copy(4096, block_M=32, block_N=128, threads=128, dtype="float16", arch=arch)


def _gemm_wide_128_threads(arch):
    # notebook 02, section 5: the 128x256 tile with 128 threads whose accumulator spills
    from .kernels import gemm_relu
    return gemm_relu.build_gemm_relu(4096, 4096, config=gemm_relu.SEED_CONFIG.replace(block_N=256),
                                     dtype="float16", arch=arch)


def _annotated_copy(swizzle):
    def build(arch):
        # notebook 03, section 6: the only two nvcc compiles of that notebook
        from . import layout_demos, runtime
        return runtime.compile_kernel(layout_demos.annotated_copy_program(swizzle=swizzle), arch=arch)
    return build


def _rmsnorm_naive(C):
    def build(arch):
        from .kernels import rmsnorm_silu
        return rmsnorm_silu.build_naive_rmsnorm_silu(C, "float16", arch=arch)
    return build


NOTEBOOK_BUILDS = [
    NotebookBuild("01", "scale_copy", None, _scale_copy),
    NotebookBuild("01", "row_sum", None, _row_sum),
    NotebookBuild("01", "scale_copy block_M=32 (inspector recompile)", None, _scale_copy_inspector),
    NotebookBuild("02", "gemm_relu/seed", "sm_90a", _gemm_seed),
    NotebookBuild("02", "gemm_relu/seed", "sm_80", _gemm_seed),
    NotebookBuild("02", "gemm_relu 128x256, 128 threads (spills)", "sm_90a", _gemm_wide_128_threads),
    NotebookBuild("02", "gemm_relu/tuned", "sm_90a", _gemm_tuned),
    NotebookBuild("03", "annotated_copy (plain)", None, _annotated_copy(False)),
    NotebookBuild("03", "annotated_copy (swizzled)", None, _annotated_copy(True)),
    NotebookBuild("04", "mla_decode/h128", "sm_90a", _mla("auto")),
    NotebookBuild("04", "mla_decode_ws/h128", "sm_90a", _mla("ws")),
    NotebookBuild("04", "mla_decode_seesaw/h128", "sm_90a", _mla("seesaw")),
    NotebookBuild("05", "rmsnorm_silu naive C=256", "sm_90a", _rmsnorm_naive(256)),
    NotebookBuild("05", "rmsnorm_silu naive C=96", "sm_90a", _rmsnorm_naive(96)),
    NotebookBuild("05", "rmsnorm_silu naive C=160", "sm_90a", _rmsnorm_naive(160)),
    NotebookBuild("05", "rmsnorm_silu/C=96", "sm_90a", _rmsnorm(96)),
    NotebookBuild("05", "rmsnorm_silu/C=640", "sm_90a", _rmsnorm(640)),
]
