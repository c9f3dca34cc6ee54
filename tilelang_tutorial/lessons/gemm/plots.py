"""Notebook 02's plot: TFLOP/s against problem size, drawn only from recorded results."""
from __future__ import annotations


def _get(r, key):
    return r.get(key) if hasattr(r, "get") else r[key]


def cubic_records(records):
    """Records of square problems (M = N = K), grouped {dtype: {variant: [(size, record)]}}."""
    out = {}
    for r in records:
        s = _get(r, "shape")
        if not (s["M"] == s["N"] == s["K"]):
            continue
        variant = _get(r, "config").get("variant", _get(r, "kernel"))
        out.setdefault(_get(r, "dtype"), {}).setdefault(variant, []).append((s["M"], r))
    for by_variant in out.values():
        for lst in by_variant.values():
            lst.sort(key=lambda t: t[0])
    return out


def builds_the_measured_program(factory, record) -> bool:
    """True when ``factory`` (a notebook's kernel cell, with :func:`.kernel.gemm_relu_program`'s
    signature) builds, for this ``gemm`` record's shape, dtype and configuration, exactly the
    program the record measured (the same TVMScript, so the same fingerprint)."""
    from ... import results
    from .configs import GemmConfig

    config = GemmConfig(**{k: record["config"][k] for k in GemmConfig.__dataclass_fields__})
    shape = record["shape"]
    program = factory(None, shape["N"], shape["K"], in_dtype=record["dtype"], dynamic_m=True, **config.as_dict())
    return results.fingerprint([program]) == record["fingerprint"]


def whose_figures(factory, records) -> str:
    """One line: are these recorded figures of the reader's kernel, or only of the package's copy?"""
    if not records:
        return "no current records to compare your kernel cell with"
    same = [builds_the_measured_program(factory, r) for r in records]
    if all(same):
        return ("your kernel cell builds exactly the programs these records measured "
                f"({len(records)} records): the figures are your kernel's")
    return (f"your kernel cell differs from the program {same.count(False)} of these {len(records)} records measured: "
            "the figures are of the package's copy, not of your edit (time yours on a GPU: the next cell)")


def recorded_figure(factory, *, dtype: str = "float16", sizes=(2048, 4096, 8192)):
    """Notebook 02's one picture: the recorded seed and tuned kernels against torch ``relu(a @ b)``
    and cuBLAS ``a @ b`` on the squares, the 4096³ figures in words, and whether ``factory`` (the
    reader's kernel cell) builds the programs measured. Returns the figure."""
    from ... import report

    squares = {"dtype": dtype, "shape.K": list(sizes)}
    figure = report.plot("gemm", x="shape.M", by="config.variant", where=squares,
                         series={"torch relu(a @ b)": "reference.value", "cuBLAS a @ b": "ceiling.value"},
                         logx=True, xlabel="M = N = K", ylabel="TFLOP/s",
                         title=f"ReLU(A @ B), {dtype}, H200: the tuned kernel reaches cuBLAS, the seed does not")
    for record in report.records("gemm", where={"dtype": dtype, "shape.K": 4096, "shape.M": 4096}):
        print(f"4096^3 {record['config']['variant']:<5}: {record['value']:.0f} TFLOP/s, "
              f"{record['ratio_to_ceiling']:.2f} of cuBLAS ({record['ceiling']['value']:.0f}), "
              f"{record['ratio_to_reference']:.2f}x torch ({record['reference']['value']:.0f})")
    print(whose_figures(factory, report.records("gemm", where=squares)))
    return figure


def recorded_cublas_tflops(size: int = 4096, dtype: str = "float16") -> float:
    """cuBLAS's ``a @ b`` rate (TFLOP/s) recorded beside the ``gemm`` records at ``size``^3."""
    from ... import report

    return report.records("gemm", where={"dtype": dtype, "shape.K": size})[0]["ceiling"]["value"]
