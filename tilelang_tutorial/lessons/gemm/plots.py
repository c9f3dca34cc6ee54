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


#: (N, K), each a multiple of no block (:func:`checks.is_ragged`), where the reader's kernel cell must
#: also build the package's program: the records' sizes are multiples of every block, where a loop
#: of ``K // block_K`` steps and one of ``T.ceildiv(K, block_K)`` build the same program.
RAGGED_N_K = (264, 200)


def _builds_the_package_program_where_tiles_are_partial(factory, record) -> bool:
    """True when ``factory`` builds the same program as the package's for ``record``'s dtype and
    configuration at :data:`RAGGED_N_K`, where every dimension ends in a partial tile."""
    from ... import results
    from . import program_of
    from .configs import GemmConfig

    config = GemmConfig(**{k: record["config"][k] for k in GemmConfig.__dataclass_fields__}).as_dict()
    N, K = RAGGED_N_K
    mine, package = (f(None, N, K, in_dtype=record["dtype"], dynamic_m=True, **config)
                     for f in (factory, program_of(record["config"])))
    return results.fingerprint([mine]) == results.fingerprint([package])


def whose_figures(factory, records) -> str:
    """One line: are these recorded figures of the reader's kernel, or only of the package's copy?
    The kernel cell must build each record's program at the record's shape, and the package's
    program at a shape where every tile dimension is partial (:data:`RAGGED_N_K`)."""
    from .configs import GemmConfig, defaults_of

    if not records:
        return "no current records to compare your kernel cell with"
    yours = defaults_of(factory)
    seeds = {GemmConfig(**{k: r["config"][k] for k in GemmConfig.__dataclass_fields__})
             for r in records if r["config"].get("variant") == "seed"}
    if seeds and seeds != {yours}:
        return (f"your kernel cell's defaults ({yours.name}) are not the seed configuration these records measured "
                f"({', '.join(sorted(c.name for c in seeds))}): the figures are of the package's copy, not of your "
                "edit (time yours on a GPU: the next cell)")
    same = [builds_the_measured_program(factory, r) for r in records]
    if not all(same):
        return (f"your kernel cell differs from the program {same.count(False)} of these {len(records)} records "
                "measured: the figures are of the package's copy, not of your edit (time yours on a GPU: the next cell)")
    N, K = RAGGED_N_K
    if not all(_builds_the_package_program_where_tiles_are_partial(factory, r) for r in records):
        return (f"your kernel cell builds the programs these records measured at their sizes, multiples of every "
                f"block, but another program than the package's at N = {N}, K = {K}, where the last tiles are "
                "partial: the figures are of the package's copy, not of your edit (does your grid or K loop drop a "
                "partial tile? T.ceildiv counts it)")
    return ("your kernel cell builds exactly the programs these records measured "
            f"({len(records)} records), and the package's program where the last tiles are partial: the figures are "
            "your kernel's")


def recorded_figure(factory, *, dtype: str = "float16", sizes=(2048, 4096, 8192)):
    """Notebook 02's one picture: the recorded seed and tuned kernels against torch ``relu(a @ b)``
    and cuBLAS ``a @ b`` on the squares (the card in its title), the 4096³ figures read in a
    sentence, and whether ``factory`` (the reader's kernel cell) builds the programs measured.
    Returns the figure, or None (after saying why) when nothing current is recorded."""
    from ... import report

    squares = {"dtype": dtype, "shape.K": list(sizes)}
    shown = report.records("gemm", where=squares)
    card = f", recorded on {shown[0].provenance['gpu']}" if shown else ""
    figure = report.plot("gemm", x="shape.M", by="config.variant", where=squares,
                         series={"torch relu(a @ b)": "reference.value", "cuBLAS a @ b": "ceiling.value"},
                         logx=True, xlabel="M = N = K", ylabel="TFLOP/s", title=f"ReLU(A @ B), {dtype}{card}")
    at_4096 = {r["config"]["variant"]: r for r in report.records("gemm", where={"dtype": dtype, "shape.K": 4096,
                                                                                 "shape.M": 4096})}
    for variant, record in at_4096.items():
        print(f"4096^3 {variant:<5}: {record['value']:.0f} TFLOP/s, "
              f"{record['ratio_to_ceiling']:.2f} of cuBLAS ({record['ceiling']['value']:.0f}), "
              f"{record['ratio_to_reference']:.2f}x torch ({record['reference']['value']:.0f})")
    if {"seed", "tuned"} <= set(at_4096):
        seed, tuned = at_4096["seed"], at_4096["tuned"]
        print(f"Read at 4096^3: the seed reaches {seed['ratio_to_ceiling']:.0%} of cuBLAS's a @ b alone; the tuned "
              f"kernel {tuned['ratio_to_ceiling']:.0%} of it, and {tuned['ratio_to_reference']:.2f}x torch's "
              "relu(a @ b), whose separate ReLU pass the fused epilogue does not pay.")
    print(whose_figures(factory, shown))
    return figure


def recorded_cublas_tflops(size: int = 4096, dtype: str = "float16") -> float | None:
    """cuBLAS's ``a @ b`` rate (TFLOP/s) recorded beside the current ``gemm`` records at ``size``^3
    (None when none is current)."""
    from ... import report

    recs = report.records("gemm", where={"dtype": dtype, "shape.K": size})
    return recs[0]["ceiling"]["value"] if recs else None
