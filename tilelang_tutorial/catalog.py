"""Every kernel the notebooks build, in one list: for the compile-matrix test and ``warm-cache``.

Each entry is (name, architectures it is written for, builder(arch) -> compiled kernel), with the
configurations the notebooks actually compile, so warming the cache with this list makes the
notebooks' first run fast.
"""
from typing import Callable, NamedTuple

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


def _mla(arch):
    from .kernels import mla_decode
    return mla_decode.build_mla_decode(128, "float16", split=True, arch=arch)


ENTRIES = [
    Entry("scale_copy", PORTABLE, _scale_copy),
    Entry("row_sum", PORTABLE, _row_sum),
    Entry("gemm_relu/seed", PORTABLE, _gemm_seed),
    Entry("gemm_relu/tuned", HOPPER, _gemm_tuned),
    Entry("rmsnorm_silu/C=640", PORTABLE, _rmsnorm(640)),
    Entry("rmsnorm_silu/C=96", PORTABLE, _rmsnorm(96)),
    Entry("mla_decode/h128", HOPPER, _mla),
]
