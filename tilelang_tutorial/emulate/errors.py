"""Exceptions raised by the emulator.

Every error the emulator raises on purpose derives from :class:`EmulationError`. Messages are
written for the person who wrote the kernel: they name the construct, the buffer or the barrier,
and -- for errors found while running -- where in the kernel it happened (source line when TileLang
recorded one, the TIR statement, the block and the loop iteration).
"""
from __future__ import annotations


class EmulationError(RuntimeError):
    """Base class of all emulator errors.

    ``location`` (when known) is a :class:`~tilelang_tutorial.emulate.errors.Location`-like text
    block appended to the message: block index, role, source line, statement, loop variables.
    """

    def __init__(self, message: str, *, location: str | None = None):
        self.message = message
        self.location = location
        super().__init__(self._compose())

    def _compose(self) -> str:
        if self.location:
            return f"{self.message}\n{self.location}"
        return self.message

    def with_location(self, location: str) -> "EmulationError":
        """Attach (or replace) the location block; returns ``self`` for ``raise err.with_location(..)``."""
        self.location = location
        self.args = (self._compose(),)
        return self


class UnsupportedConstruct(EmulationError):
    """The program uses a construct the emulator does not implement (an op, an intrinsic, a
    statement form). ``construct`` is its name, e.g. ``"tl.tileop.gemm_sp"``."""

    def __init__(self, construct: str, detail: str = "", *, location: str | None = None):
        self.construct = construct
        msg = f"unsupported construct `{construct}`"
        if detail:
            msg += f": {detail}"
        super().__init__(msg, location=location)


class OutOfBounds(EmulationError):
    """An access outside an on-chip buffer (shared, fragment, local, var), or an element access to
    global memory with a constant index that TileLang does not guard."""

    def __init__(self, message: str, *, buffer: str = "", scope: str = "", shape: tuple = (),
                 index=None, location: str | None = None):
        self.buffer = buffer
        self.scope = scope
        self.shape = tuple(shape)
        self.index = index
        super().__init__(message, location=location)


class Deadlock(EmulationError):
    """Every live role of a block waits for something nobody will do (an mbarrier phase that never
    completes, a ``__syncthreads`` some threads never reach). ``waits`` lists one line per role."""

    def __init__(self, message: str, waits: list[str] | None = None, *, location: str | None = None,
                 located: bool = False):
        self.waits = list(waits or [])
        self.located = located        # the wait lines already say where each role waits
        super().__init__(message, location=location)


class ArgumentError(EmulationError, ValueError):
    """The arguments do not match the kernel's parameters (count, rank, dtype, shape, device,
    contiguity, dynamic sizes). Also a :class:`ValueError`, like a bad argument anywhere else."""
