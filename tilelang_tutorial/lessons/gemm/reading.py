"""Reading generated code in notebooks 02 and 02b: numbered excerpts of the CUDA, what a kernel
uses read off its source, and instruction counts in its PTX. Every figure is read from the code
it is given, never written down in advance."""
from __future__ import annotations

import re


def excerpt_lines(source: str, start: str, stop: str, keep: str | None = None, width: int = 150) -> list:
    """The numbered lines of ``source`` from the first line matching the regular expression
    ``start`` to the next one matching ``stop`` (only those matching ``keep``, if given, and the two
    ends), as printed by :func:`excerpt`."""
    lines = source.splitlines()
    first = next(i for i, line in enumerate(lines) if re.search(start, line))
    last = next(i for i in range(first, len(lines)) if re.search(stop, lines[i]))
    shown = []
    for i in range(first, last + 1):
        if keep is None or i in (first, last) or re.search(keep, lines[i]):
            text = lines[i].rstrip()
            shown.append(f"{i + 1:4d}  {text[:width]}{' ...' if len(text) > width else ''}")
    return shown


def excerpt(source: str, start: str, stop: str, keep: str | None = None, width: int = 150) -> None:
    """Print :func:`excerpt_lines`: a numbered excerpt of generated code."""
    print("\n".join(excerpt_lines(source, start, stop, keep, width)))


def _found(pattern: str, cuda: str) -> str | None:
    """The distinct matches of ``pattern`` in ``cuda``, joined (None when there is none)."""
    found = sorted(set(re.findall(pattern, cuda)))
    return ", ".join(found) if found else None


def generated_features(cuda: str) -> dict:
    """What a generated GEMM kernel uses, read off its CUDA: one row of the architecture table."""
    def first(*options):
        return ", ".join(label for label, value in options if value) or "-"

    waits = _found(r"cp_async_wait<\d+>", cuda)
    shapes = re.findall(r"(wgmma_ss|mma_sync)<[^>]*?, (\d+), (\d+), (\d+),", cuda)
    return {
        "threads launched": re.search(r"__launch_bounds__\((\d+)", cuda).group(1),
        "global -> shared copy": first(("TMA (tma_load)", re.search(r"tma_load\(", cuda)),
                                       ("cp.async", re.search(r"cp_async_gs<", cuda)),
                                       ("predicated cp.async", re.search(r"cp_async_gs_conditional", cuda))),
        "pipeline synchronisation": first(("mbarrier wait / arrive", re.search(r"\]\.wait\(", cuda)), (waits, waits)),
        "producer warpgroup": first(("yes, with setmaxnreg", re.search(r"warpgroup_reg_alloc", cuda))),
        "MMA operands from shared": first(("descriptors", re.search(r"GmmaDescriptor", cuda)),
                                          ("ldmatrix", re.search(r"ldmatrix", cuda))),
        "tensor-core instruction": ", ".join(sorted({f"{op} m{m}n{n}k{k}" for op, m, n, k in shapes})) or "-",
    }


def print_table(columns: dict) -> None:
    """``{column title: {row: value}}`` as a text table, rows in the first column's order."""
    rows = list(next(iter(columns.values())))
    width = max(len(str(v)) for column in columns.values() for v in column.values()) + 2
    width = max(width, *(len(title) + 2 for title in columns))
    label = max(len(r) for r in rows) + 2
    print(f"{'':{label}}" + "".join(f"{title:>{width}}" for title in columns))
    for row in rows:
        print(f"{row:{label}}" + "".join(f"{str(column[row]):>{width}}" for column in columns.values()))


#: instructions the architecture table counts: {what to print: a regular expression on the PTX}
PTX_INSTRUCTIONS = {
    "mma.sync": r"\bmma\.sync\.", "ldmatrix": r"\bldmatrix\.", "cp.async (Ampere)": r"\bcp\.async\.c[ag]\.",
    "wgmma.mma_async": r"\bwgmma\.mma_async\.", "cp.async.bulk.tensor (TMA)": r"\bcp\.async\.bulk\.tensor\.",
    "tcgen05.mma": r"\btcgen05\.mma\.", "tcgen05.ld": r"\btcgen05\.ld\.",
}


def ptx_counts(ptx: str) -> dict:
    """How many times each instruction of :data:`PTX_INSTRUCTIONS` occurs in the PTX text ``ptx``."""
    return {name: len(re.findall(pattern, ptx)) for name, pattern in PTX_INSTRUCTIONS.items()}
