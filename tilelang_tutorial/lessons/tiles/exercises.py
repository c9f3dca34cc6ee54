"""Notebook 01's exercises.

1. **Row max** (the row-sum kernel's sibling). Write ``factory(N, dtype)`` returning a
   ``T.prim_func`` with two parameters::

       X:   T.Tensor((M, N), dtype)     # M = T.dynamic("M")
       Out: T.Tensor((M,), "float32")   # Out[i] = max_j X[i, j]

   then ``check_row_max(factory)``. Careful with the last column tile when N is not a multiple of
   your block: out-of-bounds elements are read as 0, which is *not* neutral for a max of negative
   numbers. The checker uses rows that are entirely negative to catch exactly that.

2. **Tiled transpose.** Write ``factory(M, N, dtype)`` returning a ``T.prim_func`` with::

       A: T.Tensor((M, N), dtype)
       B: T.Tensor((N, M), dtype)       # B = A^T

   then ``check_transpose(factory)``. The checker reads the generated CUDA: A must be *loaded*
   with 16-byte vectors and B *stored* with 16-byte vectors (or, on Hopper, by a TMA store from
   shared memory) -- a transpose that moves one element at a time is a quarter of the speed.
   Hint: a tile is read along rows of A and written along rows of B; the one place where a
   "column" access is cheap is on chip (registers -> shared memory).

Solutions: ``solutions/row_max.py`` and ``solutions/transpose.py`` in this lesson's folder.
"""
import re

from ... import checks, runtime
from ...exercise_kit import ExerciseResult, call_factory, compile_or_fail, kernel_source, param_specs, run_and_compare

DEFAULT_N = 1000  # not a multiple of any power-of-two block
TRANSPOSE_SHAPE = (256, 384)  # not square: swapped block indices go wrong


def row_max_reference(x):
    return x.float().amax(dim=1)


def check_row_max(factory, *, N: int = DEFAULT_N, M: int = 777, dtype: str = "float16",
                  arch: str | None = None, verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(N, dtype)`` for ``Out[i] = max_j X[i, j]``; prints and returns the result."""
    res = _check_row_max(factory, N, M, dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_row_max(factory, N, M, dtype, arch) -> ExerciseResult:
    res = ExerciseResult()
    program = call_factory(res, factory, (N, dtype),
                           "write factory(N, dtype) returning a T.prim_func(X: (M, N), Out: (M,) float32)")
    if program is None:
        return res
    specs = param_specs(program)
    if len(specs) != 2:
        return res.failed(f"the kernel must take 2 parameters (X, Out); yours takes {len(specs)}: {specs}")
    (xs, xd), (os_, od) = specs
    if xs is None or len(xs) != 2 or xs[1] != N or xd != dtype:
        return res.failed(f"X must be a (M, {N}) {dtype} tensor; got shape {xs} dtype {xd}")
    if os_ is None or len(os_) != 1 or od != "float32":
        return res.failed(f"Out must be a 1-D float32 tensor of length M; got shape {os_} dtype {od}")
    if isinstance(xs[0], int):
        res.hint("M is a compile-time constant; T.dynamic('M') would let one build serve any M")
    res.passed(f"signature: X {xs} {xd}, Out {os_} {od}")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    if src and "MaxOp" not in src:
        return res.failed("the generated CUDA has no max reduction (tl::MaxOp): reduce each tile with T.reduce_max")
    if src:
        res.passed("the generated CUDA reduces with tl::MaxOp (a block-level max reduction)")
    import torch

    dev = runtime.mode().device
    x = checks.random_tensor((M, N), getattr(torch, dtype), dev)
    x[::3] = -x[::3].abs() - 0.5  # every third row entirely negative: zero padding would win the max
    out = checks.poisoned((M,), torch.float32, dev)
    ref = row_max_reference(x)

    def negative_rows(got):
        neg = checks.compare(got[::3], ref[::3], tolerance=1e-6)
        return ("the all-negative rows are wrong: out-of-bounds columns read as 0 won the max "
                "(mask them with -inf)") if not neg.ok else None

    return run_and_compare(res, kernel, (x, out), ref, tolerance=1e-6, what="torch.amax (all-negative rows, ragged last tile)",
                           hint_unwritten="check that the grid covers every row", extra_check=negative_rows)


# ------------------------------------------------------------------------------------------------
# Exercise 2: tiled transpose
# ------------------------------------------------------------------------------------------------

def _vector_accesses(src: str, name: str) -> tuple[bool, bool]:
    """(16-byte vector loads from ``name``, 16-byte vector stores to ``name``) in the CUDA source."""
    vec = rf"\*\((?:uint4|int4|float4)\*\)\({re.escape(name)} \+"
    loads = stores = False
    for line in src.splitlines():
        if not re.search(vec, line):
            continue
        lhs, _, rhs = line.partition(" = ")
        if re.search(vec, lhs):
            stores = True
        if re.search(vec, rhs):
            loads = True
    return loads, stores


def check_transpose(factory, *, shape=TRANSPOSE_SHAPE, dtype: str = "float16", arch: str | None = None,
                    verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``factory(M, N, dtype)`` for ``B = A^T``; prints and returns the result."""
    res = _check_transpose(factory, tuple(shape), dtype, arch or runtime.current_arch())
    if verbose:
        print(res)
    return res


def _check_transpose(factory, shape, dtype, arch) -> ExerciseResult:
    M, N = shape
    res = ExerciseResult()
    program = call_factory(res, factory, (M, N, dtype),
                           "write factory(M, N, dtype) returning a T.prim_func(A: (M, N), B: (N, M))")
    if program is None:
        return res
    specs = param_specs(program)
    if len(specs) != 2:
        return res.failed(f"the kernel must take 2 tensors (A, B); yours takes {len(specs)}: {specs}")
    want = [((M, N), dtype), ((N, M), dtype)]
    for nm, w, h in zip("AB", want, specs):
        if h != w:
            return res.failed(f"{nm} must be T.Tensor({w[0]}, {dtype!r}); got shape {h[0]}, dtype {h[1]}")
    res.passed(f"signature: A {want[0][0]}, B {want[1][0]}, {dtype}")
    kernel = compile_or_fail(res, program, arch)
    if kernel is None:
        return res
    src = kernel_source(kernel)
    names = [program.buffer_map[p].name for p in program.params]
    if src:
        a_loads, _ = _vector_accesses(src, names[0])
        _, b_stores = _vector_accesses(src, names[1])
        b_tma = re.search(rf"tma_store\({re.escape(names[1])}_desc", src) is not None
        if not a_loads:
            return res.failed(f"{names[0]} is not loaded with 16-byte vectors (uint4) in the generated CUDA: copy "
                              f"whole row-tiles of A with T.copy(A[...], tile) so each thread reads 8 consecutive elements")
        res.passed(f"{names[0]} is loaded with 16-byte vectors")
        if b_stores:
            res.passed(f"{names[1]} is stored with 16-byte vectors")
        elif b_tma:
            res.passed(f"{names[1]} is stored by a TMA store from shared memory (Hopper: whole tile, no per-thread stores)")
        else:
            return res.failed(
                f"{names[1]} is written one element at a time (no 16-byte stores, no TMA store): each thread's run of "
                f"A became a strided column of B. Do the transpose on chip: write the tile transposed into a "
                f"T.alloc_shared buffer, then T.copy that shared tile to B so the store is along rows of B")
    import torch

    dev = runtime.mode().device
    a = checks.random_tensor((M, N), getattr(torch, dtype), dev)
    b = checks.poisoned((N, M), getattr(torch, dtype), dev)
    return run_and_compare(res, kernel, (a, b), a.t().float(), tolerance=0.0, what=f"A.T on a {M}x{N} matrix",
                           hint_unwritten="check which block index walks which dimension (A's tile (by, bx) goes to "
                                          "B's tile (bx, by))",
                           extra_check=lambda got: "B != A.T")
