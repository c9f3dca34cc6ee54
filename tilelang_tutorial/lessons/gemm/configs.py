"""Configurations of the GEMM + ReLU kernel: the knobs, the starting choice (the "seed") and the
tuned one.

Kept apart from ``kernel.py``: recorded GPU results are tied to the hash of
the kernel module, and re-tuning (changing which configuration is the default) must not make the
measurements of the unchanged kernel stale. Each record stores the configuration it measured.
"""
from dataclasses import asdict, dataclass, replace

SUPPORTED_DTYPES = ("float16", "bfloat16")
POLICIES = ("Square", "FullRow", "FullCol")
SWIZZLE_ORDERS = ("row", "column")


@dataclass(frozen=True)
class GemmConfig:
    """The tunable knobs of the kernel (shapes and dtypes are not config: they are the problem)."""

    block_M: int = 128
    block_N: int = 128
    block_K: int = 64
    num_stages: int = 3
    threads: int = 128
    policy: str = "Square"
    swizzle_panel: int = 4          # 0 disables the block swizzle
    swizzle_order: str = "column"
    store_via_shared: bool = False  # stage C through shared memory (coalesced / TMA store)

    def __post_init__(self):
        for name in ("block_M", "block_N", "block_K", "threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"GemmConfig.{name} must be a positive int, got {v!r}")
        if self.block_M % 16 or self.block_N % 16 or self.block_K % 16:
            raise ValueError(
                f"GemmConfig block sizes must be multiples of 16 (tensor-core tiles), got "
                f"{self.block_M}x{self.block_N}x{self.block_K}")
        if self.threads % 128:
            raise ValueError(f"GemmConfig.threads must be a multiple of 128 (whole warpgroups), got {self.threads}")
        if self.num_stages < 1:
            raise ValueError(f"GemmConfig.num_stages must be >= 1, got {self.num_stages}")
        if self.policy not in POLICIES:
            raise ValueError(f"GemmConfig.policy must be one of {POLICIES}, got {self.policy!r}")
        if self.swizzle_order not in SWIZZLE_ORDERS:
            raise ValueError(
                f"GemmConfig.swizzle_order must be one of {SWIZZLE_ORDERS} (TileLang 0.1.15 spells "
                f"it 'column', not 'col'), got {self.swizzle_order!r}")

    @property
    def name(self) -> str:
        sw = f"sw{self.swizzle_panel}{self.swizzle_order[0]}" if self.swizzle_panel else "nosw"
        st = "-smemC" if self.store_via_shared else ""
        return (f"{self.block_M}x{self.block_N}x{self.block_K}-s{self.num_stages}-t{self.threads}"
                f"-{self.policy}-{sw}{st}")

    def as_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> "GemmConfig":
        return replace(self, **changes)


#: The starting configuration, which the tutorial calls the seed: 128x128x64 tiles, 3 stages,
#: 128 threads (one consumer warpgroup on Hopper), a panel-4 column swizzle spelt the
#: 0.1.15 way ("column"; the older spelling "col" raises).
SEED_CONFIG = GemmConfig(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128,
                         policy="Square", swizzle_panel=4, swizzle_order="column")

#: The tuned configuration for Hopper (H100/H200), chosen by the GPU sweep in
#: ``results/gemm_sweep.json`` (``python -m tilelang_tutorial bench gemm_sweep``; notebook
#: 02b prints its table): the configuration whose worst ratio to torch ``relu(a @ b)`` over
#: M=N=K=4096 and 8192 was highest. A 128x256 tile halves how often A is re-read (A is read
#: N / block_N times) compared with 128x128; 256 threads = two consumer warpgroups, so each holds
#: a 64x256 fp32 accumulator (128 registers/thread) instead of one warpgroup holding 128x256 (256
#: registers/thread: spills).
#: FullRow puts both warpgroups along M so each issues m64n256k16 wgmma, the widest instruction.
#: Four pipeline stages; C is staged through shared memory and written with a TMA store, and
#: TileLang reuses the pipeline buffers for the C tile after the K loop: 4 x 48 KiB = 192 KiB of
#: dynamic shared memory (the generated launch asks for 196608 bytes), within the H200's 227 KiB.
TUNED_CONFIGS = {
    "float16": GemmConfig(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256,
                          policy="FullRow", swizzle_panel=8, swizzle_order="row", store_via_shared=True),
    "bfloat16": GemmConfig(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256,
                           policy="FullRow", swizzle_panel=8, swizzle_order="row", store_via_shared=True),
}


def tuned_config(dtype: str) -> GemmConfig:
    return TUNED_CONFIGS.get(dtype, SEED_CONFIG)


def defaults_of(factory) -> GemmConfig:
    """The configuration ``factory`` (a kernel cell with :func:`.kernel.gemm_relu_program`'s
    signature) builds when it is given no knob: its keyword defaults, a knob it lacks taking
    :class:`GemmConfig`'s. Notebook 02's cells build from it, so that an edited default reaches them."""
    import inspect

    params = inspect.signature(factory).parameters
    knobs = {}
    for name, field in GemmConfig.__dataclass_fields__.items():
        default = params[name].default if name in params else inspect.Parameter.empty
        knobs[name] = field.default if default is inspect.Parameter.empty else default
    return GemmConfig(**knobs)
