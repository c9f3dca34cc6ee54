"""The last row of tiles: kernels of the op whose TMA boxes of ``A`` stop at ``M`` (or within 7 rows of it).

Notebook 02's kernel loads each block's ``block_M`` rows of ``A`` as one TMA box starting at row
``by * block_M``; where that box runs past ``M`` the TMA unit fills the missing rows with zeros.
The fill is correct but not free: the kernel's time grows with the number of filled rows. Three
kernels avoid it:

* :func:`clamped_program`: the last row of tiles starts at ``m - block_M`` instead, so its box
  lies inside ``A`` whenever ``m >= block_M``. Its first rows are rows the tile above also
  computes; both blocks compute them from the same data in the same order and store the same
  values, so the overlap is harmless.
* :func:`two_box_program`: a 128-row tile for ``64 < m < 128`` (one row of tiles, so there is
  nothing to clamp to): ``A`` comes in as two 64-row TMA boxes, each clamped to ``m - 64``, into
  the two halves of one shared tile, and each half of ``C`` goes back to the rows it came from.
* :func:`short_box_program`: for ``m <= 64`` (one row of 64-row tiles) a box of ``A`` only
  ``a_rows`` tall (``m`` rounded up to 8), and :func:`short_partial_program`, the same for the
  split-K partial kernel.

Past 128 rows the rows are wasted another way: ``wgmma`` is 64 rows tall per warpgroup, so 275
rows take three 128-row tiles, the third 19 rows full. :func:`swapped_program` puts M on the
instruction's *width* instead (any multiple of 8 up to 256): it computes ``C^T = B^T A^T``, so 275
rows become two tiles 144 wide.

Each is notebook 02's kernel (:func:`.kernel.gemm_relu_program`) with a few lines changed
(:func:`variant_of`: the GEMM body is written once, and :func:`changes` prints what a variant
changes); the short partial is :func:`.split_k.gemm_partial_program` with the short box's lines.
``rule.choose`` says which kernel a shape gets (``GemmChoice.last_rows``); notebook 02b shows them.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
import difflib
import functools
import inspect
import textwrap

from ...exercise_kit import mutated
from .kernel import gemm_relu_program
from .split_k import gemm_partial_program

SLICE = 64      # wgmma's rows: the smallest tile, and the two-box kernel's box

#: where the GEMM body's lines sit in the kernel (the edits below are whole lines)
_IN_FACTORY, _IN_KERNEL, _IN_LOOP = " " * 4, " " * 12, " " * 16


def variant_of(program, name: str, *edits):
    """``program`` (a factory) rebuilt from its own source with each ``(old, new)`` edit applied
    (``old`` occurs exactly once; :func:`tilelang_tutorial.exercise_kit.mutated`), named ``name``.
    The variant keeps ``program`` as ``base``, for :func:`changes`."""
    variant = mutated(program, *edits)
    variant.__name__ = variant.__qualname__ = name
    variant.base = program
    return variant


def changes(variant) -> str:
    """The lines ``variant`` changes in the factory it was built on, as a diff (``-`` its
    factory's line, ``+`` the variant's)."""
    before = textwrap.dedent(inspect.getsource(variant.base)).splitlines()
    after = textwrap.dedent(inspect.getsource(variant)).splitlines()
    return "\n".join(line for line in difflib.unified_diff(before, after, n=0, lineterm="")
                     if not line.startswith(("---", "+++", "@@")))


def _lines(indent, *lines):
    return "\n".join(indent + line for line in lines)


def _renamed(kernel_name, old="gemm_relu_kernel"):
    """The edits that give the variant's kernel its own name (the generated code's)."""
    return (f"def {old}(", f"def {kernel_name}("), (f"return {old}", f"return {kernel_name}")


def _refuse_unless(condition, message):
    """An edit that makes the factory refuse knobs the variant cannot take, before it traces."""
    line = '    m = T.dynamic("m") if dynamic_m else M'
    return line, _lines(_IN_FACTORY, f"if not ({condition}):", f"    raise ValueError({message})") + "\n" + line


#: notebook 02's store of C (both ways), which a variant replaces
_STORE = _lines(_IN_KERNEL, "if store_via_shared:",
                "    C_shared = T.alloc_shared((block_M, block_N), in_dtype)",
                "    T.copy(C_local, C_shared)",
                "    T.copy(C_shared, C[by * block_M, bx * block_N])",
                "else:",
                "    T.copy(C_local, C[by * block_M, bx * block_N])")
_SWIZZLE = _IN_KERNEL + "T.use_swizzle(swizzle_panel, order=swizzle_order, enable=swizzle_panel > 0)\n"
_LOAD_A = "T.copy(A[by * block_M, ko * block_K], A_shared)"

#: ``C = ReLU(A @ B)`` with the last row of tiles moved up to end at row ``m``: its box of ``A``
#: lies inside ``A`` whenever ``m >= block_M``.
clamped_program = variant_of(
    gemm_relu_program, "clamped_program", *_renamed("gemm_relu_clamped"),
    ("T.clear(C_local)", "# The tile's first row: by * block_M, but never past m - block_M (0 when m < block_M).\n"
                         + _IN_KERNEL + "row0 = T.min(by * block_M, T.max(m - block_M, 0))\n"
                         + _IN_KERNEL + "T.clear(C_local)"),
    (_LOAD_A, "T.copy(A[row0, ko * block_K], A_shared)"),
    ("T.copy(C_shared, C[by * block_M, bx * block_N])", "T.copy(C_shared, C[row0, bx * block_N])"),
    ("T.copy(C_local, C[by * block_M, bx * block_N])", "T.copy(C_local, C[row0, bx * block_N])"),
)

#: ``C = ReLU(A @ B)`` with each ``2 x SLICE``-row tile of ``A`` loaded as two 64-row TMA boxes, each
#: starting no later than row ``m - 64``, into one shared tile (one multiply per step); the two
#: halves of ``C`` are stored at the rows their boxes came from.
two_box_program = variant_of(
    gemm_relu_program, "two_box_program", *_renamed("gemm_relu_two_box"),
    _refuse_unless(f"block_M == {2 * SLICE} and block_K == {SLICE} and not store_via_shared",
                   f'f"two_box_program needs block_M = {2 * SLICE}, block_K = {SLICE} and store_via_shared False, '
                   'got block_M={block_M}, block_K={block_K}, store_via_shared={store_via_shared}"'),
    ("T.clear(C_local)", _lines("", f"last_box = T.max(m - {SLICE}, 0)",
                                _IN_KERNEL + "top = T.min(by * block_M, last_box)              # the rows of A the upper half holds",
                                _IN_KERNEL + f"bottom = T.min(by * block_M + {SLICE}, last_box)   # ... and the lower half",
                                _IN_KERNEL + "T.clear(C_local)")),
    (_LOAD_A, _lines("", "# Regions on both sides (not corners): each copy is one 64-row TMA box into its half.",
                     _IN_LOOP + f"T.copy(A[top:top + {SLICE}, ko * block_K:(ko + 1) * block_K], A_shared[0:{SLICE}, 0:block_K])",
                     _IN_LOOP + f"T.copy(A[bottom:bottom + {SLICE}, ko * block_K:(ko + 1) * block_K],",
                     _IN_LOOP + f"       A_shared[{SLICE}:{2 * SLICE}, 0:block_K])")),
    (_STORE, _lines(_IN_KERNEL, f"T.copy(C_local[0:{SLICE}, 0:block_N], C[top:top + {SLICE}, bx * block_N:(bx + 1) * block_N])",
                    f"T.copy(C_local[{SLICE}:{2 * SLICE}, 0:block_N], C[bottom:bottom + {SLICE}, "
                    "bx * block_N:(bx + 1) * block_N])")),
)

#: a short box's loads of ``A``: one box ``a_rows`` tall per 64 columns of the step (a row of 128
#: bytes, the shared tile's swizzle unit); the ``if`` s test Python ints, decided when the kernel is
#: built. ``k0`` is the step's first column of ``A``.
_SHORT_LOADS = _lines(_IN_LOOP, "T.copy(A[0:a_rows, k0:k0 + 64], A_shared[0:a_rows, 0:64])",
                      "if block_K > 64:",
                      "    T.copy(A[0:a_rows, k0 + 64:k0 + 128], A_shared[0:a_rows, 64:128])",
                      "if block_K > 128:",
                      "    T.copy(A[0:a_rows, k0 + 128:k0 + 192], A_shared[0:a_rows, 128:192])",
                      "    T.copy(A[0:a_rows, k0 + 192:k0 + 256], A_shared[0:a_rows, 192:256])").lstrip()
_SHORT_KNOBS = (f"block_M == {SLICE} and block_K in (64, 128, 256) and a_rows % 8 == 0 and 8 <= a_rows <= {SLICE}",
                f'f"a short box needs block_M = {SLICE}, block_K in 64, 128, 256 and a_rows a multiple of 8 in '
                f'8..{SLICE}, got block_M={{block_M}}, block_K={{block_K}}, a_rows={{a_rows}}"')

#: ``C = ReLU(A @ B)`` for ``m <= a_rows <= 64`` (one row of tiles): each box of ``A`` is only
#: ``a_rows`` tall. The tile's other rows are never loaded; the rows of ``C`` they make are never
#: stored (row i of ``C`` reads row i of ``A`` only). The op builds it only where ``m <= a_rows``.
short_box_program = variant_of(
    gemm_relu_program, "short_box_program", *_renamed("gemm_relu_short_box"),
    ("dynamic_m=False, store_via_shared=False):", f"dynamic_m=False, store_via_shared=False, a_rows={SLICE}):"),
    _refuse_unless(*_SHORT_KNOBS),
    ("T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by)",
     "T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx"),
    (_SWIZZLE, ""),
    (_LOAD_A, "k0 = ko * block_K\n" + _IN_LOOP + _SHORT_LOADS),
    ("T.copy(B[ko * block_K, bx * block_N], B_shared)", "T.copy(B[k0, bx * block_N], B_shared)"),
    (_STORE, _IN_KERNEL + "T.copy(C_local[0:a_rows, 0:block_N], C[0:a_rows, bx * block_N:(bx + 1) * block_N])"),
)

#: :func:`.split_k.gemm_partial_program` with :func:`short_box_program`'s boxes of ``A``
#: (``m <= a_rows <= 64``).
short_partial_program = variant_of(
    gemm_partial_program, "short_partial_program", *_renamed("gemm_partial_short_box", "gemm_partial_kernel"),
    ('in_dtype="float16", accum_dtype="float32"):', f'in_dtype="float16", accum_dtype="float32", a_rows={SLICE}):'),
    ('    m = T.dynamic("m")\n', _lines(_IN_FACTORY, f"if not ({_SHORT_KNOBS[0]}):", f"    raise ValueError({_SHORT_KNOBS[1]})",
                                     'm = T.dynamic("m")\n')),
    ("T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), split, threads=threads) as (bx, by, bz)",
     "T.Kernel(T.ceildiv(N, block_N), split, threads=threads) as (bx, bz)"),
    ("T.copy(A[by * block_M, (bz * steps_per_split + ko) * block_K], A_shared)",
     "k0 = (bz * steps_per_split + ko) * block_K\n" + _IN_LOOP + _SHORT_LOADS),
    ("T.copy(B[(bz * steps_per_split + ko) * block_K, bx * block_N], B_shared)", "T.copy(B[k0, bx * block_N], B_shared)"),
    ("T.copy(acc, W[bz, by * block_M, bx * block_N])", "T.copy(acc[0:a_rows, 0:block_N], W[bz, 0:a_rows, bx * block_N:(bx + 1) * block_N])"),
)

#: ``C = ReLU(A @ B)`` computed tile by tile as ``C^T = B^T A^T``: each block holds ``block_N`` rows
#: of N (the tensor cores' 64-row side, one warpgroup per 64) by ``block_M`` columns of M (their
#: width) in its fragment, then stores the tile transposed, through shared memory, into C.
#: ``block_M`` is still the block's rows of M, so the grid covers C as notebook 02's kernel does.
swapped_program = variant_of(
    gemm_relu_program, "swapped_program", *_renamed("gemm_relu_swapped"),
    _refuse_unless("store_via_shared is True and not swizzle_panel",
                   '"swapped_program stores C through shared memory and has no block swizzle: store_via_shared '
                   'must be True and swizzle_panel 0, got " f"{store_via_shared}, {swizzle_panel}"'),
    ("C_local = T.alloc_fragment((block_M, block_N), accum_dtype)", "C_local = T.alloc_fragment((block_N, block_M), accum_dtype)"),
    (_SWIZZLE, ""),
    ("T.gemm(A_shared, B_shared, C_local, policy=warp_policy)",
     "# (B_shared)^T (block_N x block_K) times (A_shared)^T (block_K x block_M)\n"
     + _IN_LOOP + "T.gemm(B_shared, A_shared, C_local, transpose_A=True, transpose_B=True, policy=warp_policy)"),
    (_lines(_IN_KERNEL, "for i, j in T.Parallel(block_M, block_N):", "    C_local[i, j] = T.max(C_local[i, j], 0)") + "\n" + _STORE,
     _lines(_IN_KERNEL, "C_shared = T.alloc_shared((block_M, block_N), in_dtype)",
            "for i, j in T.Parallel(block_N, block_M):",
            "    C_shared[j, i] = T.max(C_local[i, j], 0)          # ReLU, cast, and the transpose back",
            "T.copy(C_shared, C[by * block_M, bx * block_N])   # one bounded (TMA) store")),
)


def short_rows(M: int) -> int:
    """The short box's height for M <= 64 rows: M rounded up to a multiple of 8 (the swizzle's row group)."""
    return max(8, -(-M // 8) * 8)


#: GemmChoice.last_rows -> the factory the op builds ("filled": notebook 02's kernel, the TMA
#: filling rows past M with zeros; "short": short_box_program with the choice's a_rows; "swapped":
#: M on the instruction's width)
PROGRAMS = {"filled": None, "clamped": clamped_program, "two boxes": two_box_program, "short": short_box_program,
            "swapped": swapped_program}


@functools.lru_cache(maxsize=None)
def _bound(factory, a_rows):
    """``factory`` with ``a_rows`` fixed, one object per pair (the op's build cache keys on it)."""
    def program(*args, **kwargs):
        return factory(*args, a_rows=a_rows, **kwargs)
    program.__name__ = program.__qualname__ = f"{factory.__name__}[a_rows={a_rows}]"
    return program


def program_for(last_rows: str, a_rows: int = 0):
    """The factory for a choice's ``last_rows`` (None: notebook 02's ``gemm_relu_program``)."""
    if last_rows not in PROGRAMS:
        raise ValueError(f"last_rows must be one of {sorted(PROGRAMS)}, got {last_rows!r}")
    if last_rows == "short":
        return _bound(short_box_program, a_rows)
    return PROGRAMS[last_rows]


def partial_for(last_rows: str, a_rows: int = 0):
    """The split-K partial factory for a choice (None: split_k's ``gemm_partial_program``)."""
    return _bound(short_partial_program, a_rows) if last_rows == "short" else None


#: the emulator's checks for a short box: not "uninit" -- the tile's rows past a_rows are read by
#: T.gemm without ever being written, by design (they only make rows of C that are never stored)
EMULATOR_CHECKS = {"short": "races,limits"}
