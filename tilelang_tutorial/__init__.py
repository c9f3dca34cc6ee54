"""tilelang_tutorial: the small package behind "TileLang by Example".

Importing it checks that the pinned TileLang version is installed; everything else is imported
on demand (``from tilelang_tutorial import runtime``, ``lessons.<lesson>`` ...).
"""
from __future__ import annotations

REQUIRED_TILELANG = "0.1.15"


class TileLangVersionError(ImportError):
    """The installed TileLang is not the version this tutorial is pinned to."""


def _check_tilelang_version() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("tilelang")
    except PackageNotFoundError:
        raise TileLangVersionError(
            f"tilelang is not installed; this tutorial needs tilelang=={REQUIRED_TILELANG} "
            f"(pip install tilelang=={REQUIRED_TILELANG})"
        ) from None
    if installed != REQUIRED_TILELANG:
        raise TileLangVersionError(
            f"this tutorial is pinned to tilelang=={REQUIRED_TILELANG}, but tilelang=={installed} "
            f"is installed; install the pinned one with: pip install tilelang=={REQUIRED_TILELANG}"
        )


_check_tilelang_version()

import logging as _logging  # noqa: E402

# TileLang logs two INFO lines per compile ("begins to compile", "completes") and temporary paths;
# in a notebook they bury the output that teaches. Warnings and errors still show.
_logging.getLogger("tilelang").setLevel(_logging.WARNING)
# ... and a warning each time the same program is compiled twice in a process, suggesting
# @tilelang.jit: notebooks recompile on purpose (a reader re-runs a cell), so it is noise here.
_logging.getLogger("tilelang.cache.kernel_cache").setLevel(_logging.ERROR)

from .runtime import (  # noqa: E402
    ACCEPTED_ARCHS, arch_override, compile_kernel, current_arch, describe_mode, force_emulation,
    gpu_available, mode, require_gpu, run, set_arch, target, use_arch_among,
)

#: The tutorial's helpers, reached from the one import a notebook makes (``import tilelang_tutorial
#: as tt``; ``tt.checks.compare(...)``): each module is imported when first used.
_SUBMODULES = ("checks", "eager", "emulate", "inspector", "layouts", "lessons", "report", "results", "timing")


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'tilelang_tutorial' has no attribute {name!r}")


__all__ = [
    "REQUIRED_TILELANG", "TileLangVersionError", "ACCEPTED_ARCHS", "arch_override",
    "compile_kernel", "current_arch", "describe_mode", "force_emulation", "gpu_available", "mode",
    "require_gpu", "run", "set_arch", "target", "use_arch_among",
]
