"""Eager-mode kernels for the tutorial's tools (emulator, inspector, checkers).

TileLang 0.1.15 has two ways to write a kernel:

* a **factory**: a Python function that takes the sizes and returns a ``@T.prim_func``; you compile
  it with ``tilelang.compile(program, target=...)`` and call the result;
* **eager mode**: ``@tilelang.jit`` on a function whose sizes are declared with ``T.const("M, N")``
  and whose tensors are annotated in its body (``X: T.Tensor[[M, N], dtype]``). Calling it with
  tensors reads the sizes off them, compiles a kernel for those sizes (for the GPU TileLang
  detects) and runs it at once.

Without a GPU the eager call cannot run (TileLang's automatic target needs a device, and the kernel
needs CUDA tensors). The decorated object still holds the program: ``JITImpl.get_tir(*tensors)``
(or ``get_tir(M=..., N=...)``, sizes by name) traces it for those sizes. This module turns an eager
function plus tensors or sizes into what the rest of the tutorial takes -- a ``T.prim_func``
(:func:`program`), a kernel compiled for an explicit architecture like every other kernel
(:func:`compile`), a run on the GPU or in the emulator (:func:`run`), and a factory of the shape
an exercise checker calls (:func:`factory`).
"""
from __future__ import annotations

from typing import Any

from . import runtime


def is_eager(obj: Any) -> bool:
    """True for what ``@tilelang.jit`` returns (a ``tilelang.jit.JITImpl``)."""
    try:
        from tilelang.jit import JITImpl
    except ImportError:  # pragma: no cover - tilelang is a dependency
        return False
    return isinstance(obj, JITImpl)


def _require_eager(jit_function) -> None:
    if not is_eager(jit_function):
        raise TypeError(f"expected a @tilelang.jit function, got {type(jit_function).__name__}; "
                        "a factory's T.prim_func goes to tt.compile_kernel directly")


def program(jit_function, *tensors, **sizes_and_config):
    """The ``T.prim_func`` an eager function builds for these tensors (their shapes give the
    ``T.const`` sizes) or for sizes given by name (``M=1000, N=4096``); other keywords are the
    function's own compile-time parameters (``block_M=32``). Nothing is compiled or run."""
    _require_eager(jit_function)
    return jit_function.get_tir(*tensors, **sizes_and_config)


def compile(jit_function, *tensors, arch: str | None = None, **sizes_and_config):  # noqa: A001
    """:func:`program`, compiled with ``runtime.compile_kernel`` for ``arch`` (default: this
    machine's mode, ``sm_90a`` without a GPU), with the ``pass_configs`` given to ``@tilelang.jit``."""
    prim_func = program(jit_function, *tensors, **sizes_and_config)
    return runtime.compile_kernel(prim_func, arch=arch, pass_configs=jit_function.pass_configs)


def run(jit_function, *args, **config):
    """Run an eager kernel the way this machine can. On a GPU this is the eager call itself,
    ``jit_function(*args, **config)`` (TileLang compiles for the sizes of ``args`` and runs).
    Without one, the program for those sizes is compiled for this mode's architecture and run in
    the tile emulator on CPU tensors. Returns what the kernel returns."""
    _require_eager(jit_function)
    if runtime.mode().can_run:
        return jit_function(*args, **config)
    return runtime.run(compile(jit_function, *args, **config), *args)


def factory(jit_function, names: tuple[str, ...], **fixed):
    """A factory ``f(*values) -> T.prim_func`` over an eager function, for code that calls
    factories (the exercise checkers): positional ``values`` are bound to ``names`` (sizes such as
    ``"N"`` or compile-time parameters such as ``"dtype"``), ``fixed`` gives the rest (``M=777``)."""
    _require_eager(jit_function)

    def build(*values):
        if len(values) != len(names):
            raise TypeError(f"expected {len(names)} values ({', '.join(names)}), got {len(values)}")
        return program(jit_function, **dict(zip(names, values)), **fixed)

    build.__name__ = f"factory_of_{getattr(jit_function.func, '__name__', 'eager_kernel')}"
    return build
