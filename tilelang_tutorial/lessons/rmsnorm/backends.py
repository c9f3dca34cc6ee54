"""Which targets the installed TileLang can build a kernel for (notebook 05, "Choosing a tool").

    backends.target_kinds()                      # {backend: (target kinds,)} registered by TileLang
    backends.try_target(program, "hip")          # one line: what happened

``try_target`` first asks for the whole build, ``tilelang.compile(program, target=target)``
(code generation, the target's compiler, loading). When that fails it asks for code generation
alone, ``tilelang.lower(program, target=target)``, which needs no device compiler, to tell "the
source was generated, the toolchain is missing here" from "this kernel cannot be lowered for this
target". Native chatter (TileLang's ROCm probes print to the process's stdout and stderr) is kept
out of the notebook.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile


def target_kinds() -> dict[str, tuple[str, ...]]:
    """The backends registered in the installed TileLang, with the target kinds each one builds."""
    from tilelang.backend.module import list_backends

    return {name: tuple(backend.target_kinds) for name, backend in list_backends().items()}


@contextlib.contextmanager
def quiet_native_output():
    """Silence the process's stdout/stderr file descriptors (C++ logging) and TileLang's logger."""
    logger = logging.getLogger("tilelang")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stdout(open(os.devnull, "w")), contextlib.redirect_stderr(open(os.devnull, "w")):
                yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            logger.setLevel(level)


def last_line(err: BaseException) -> str:
    """The informative part of a TileLang/TVM error: its last non-empty line, without the
    internal check that failed and without the target's full description."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    line = lines[-1] if lines else type(err).__name__
    line = re.sub(r"^Check failed: \(.*?\) is false: ", "", line)
    return re.sub(r" for \{.*", "", line)[:160]


def _kind(target) -> str:
    return target["kind"] if isinstance(target, dict) else str(target)


def try_target(program, target) -> str:
    """Build ``program`` for ``target``; one line saying how far it got."""
    import tilelang
    from tvm.target import Target

    with quiet_native_output():
        try:
            kernel = tilelang.compile(program, target=target)
            return f"builds ({len(kernel.get_kernel_source().splitlines())} lines of generated source)"
        except Exception as err:
            build_error = last_line(err)
        try:
            with Target(target):
                artifact = tilelang.lower(program, target=target)
            lines = len(str(artifact.kernel_source).splitlines())
            return f"generates {lines} lines of {_kind(target)} source; the build stops: {build_error}"
        except Exception as err:
            return f"cannot be lowered: {last_line(err)}"
