"""The architectures the tutorial compiles for: a table with no imports of the package, so the
runtime (which decides the current one) and the emulator (which checks a kernel against its
limits) can both read it without importing each other."""
from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class Arch:
    """What the tutorial knows about one target architecture."""

    name: str                     # the TileLang / nvcc target, e.g. "sm_90a"
    label: str                    # the GPUs it means
    smem_per_block: int           # bytes of shared memory one block may use (opt-in maximum)
    sm_count: int                 # SMs of the GPU the tutorial assumes when none is visible
    pass_configs: tuple = ()      # TileLang pass configs every build for this arch gets
    note: str = ""


#: The architectures the tutorial compiles for. Where a GPU is visible its compute capability
#: picks one (:func:`arch_for_capability`); without one, ``sm_90a`` unless the reader chooses.
#: Shared memory per block: the CUDA programming guide's opt-in maxima (the same figures CUTLASS
#: ships as ``smXX_smem_capacity_bytes``).
ARCHS = {
    # Volta and Turing: no cp.async, no bf16 tensor cores; GEMMs lower to TileLang's mma_sm70 /
    # mma_sm75 paths. CUDA 13's nvcc no longer compiles for sm_70 (a CUDA 12 toolkit does):
    # :func:`can_build` asks the installed nvcc, and a build it cannot do is refused in one line.
    "sm_70": Arch("sm_70", "Volta (V100)", 98304, 80, note="CUDA 13's nvcc dropped Volta: needs a CUDA 12 toolkit"),
    "sm_75": Arch("sm_75", "Turing (T4 / RTX 20xx)", 65536, 40),
    "sm_80": Arch("sm_80", "Ampere (A100)", 166912, 108),
    "sm_86": Arch("sm_86", "Ampere (RTX 30xx / A10)", 101376, 84),
    "sm_89": Arch("sm_89", "Ada (L4 / RTX 40xx)", 101376, 58),
    "sm_90a": Arch("sm_90a", "Hopper (H100 / H200)", 232448, 132),
    "sm_100a": Arch("sm_100a", "Blackwell (B200 / GB200)", 232448, 148),
    "sm_120a": Arch("sm_120a", "Blackwell (RTX 50xx / RTX PRO)", 101376, 170),
    # The plain name, without the arch-specific features: TileLang 0.1.15 warp-specializes every
    # pipelined loop on a TMA-capable target and then emits setmaxnreg, which only the 'a'
    # targets have; without warp specialization the same loops become cp.async pipelines.
    "sm_120": Arch("sm_120", "Blackwell (RTX 50xx), portable sm_120 code", 101376, 170,
                   pass_configs=(("tl.disable_warp_specialized", True),),
                   note="no setmaxnreg: warp specialization is switched off"),
}


#: Set by :mod:`tilelang_tutorial.runtime` when it is imported: a function returning the current
#: architecture (the emulator's limit check uses it when no architecture is given).
current_arch_provider = None


def current_arch() -> str | None:
    """The runtime's current architecture, or None where the runtime is not loaded."""
    return current_arch_provider() if current_arch_provider is not None else None
