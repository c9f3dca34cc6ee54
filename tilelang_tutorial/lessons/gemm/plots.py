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


def plot_gemm_tflops(records, *, ax=None):
    """One panel per dtype: seed and tuned TileLang, torch relu(a@b) and cuBLAS a@b (same run),
    plus the measured cuBLAS peak as a horizontal line. Returns the figure (or None if empty)."""
    import matplotlib.pyplot as plt

    groups = cubic_records(records)
    if not groups:
        return None
    dtypes = sorted(groups)
    if ax is None:
        fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4), squeeze=False)
        axes = axes[0]
    else:
        axes = [ax]
        fig = ax.figure
    for a, dt in zip(axes, dtypes):
        by_variant = groups[dt]
        any_list = next(iter(by_variant.values()))
        for variant, style in (("seed", "o--"), ("tuned", "o-")):
            pts = by_variant.get(variant)
            if pts:
                a.plot([p for p, _ in pts], [_get(r, "value") for _, r in pts], style, label=f"TileLang {variant}")
        a.plot([p for p, _ in any_list], [_get(r, "reference")["value"] for _, r in any_list], "s-",
               label="torch relu(a @ b)")
        a.plot([p for p, _ in any_list], [_get(r, "ceiling")["value"] for _, r in any_list], "^:",
               label="cuBLAS a @ b (same size)")
        peak = _get(any_list[0][1], "peers").get("cublas_peak", {}).get("value")
        if peak:
            a.axhline(peak, color="gray", lw=1, label=f"cuBLAS peak (measured) {peak:.0f}")
        a.set_xscale("log", base=2)
        a.set_xlabel("M = N = K")
        a.set_ylabel("TFLOP/s")
        a.set_title(f"ReLU(A @ B), {dt}")
        a.set_ylim(bottom=0)
        a.legend(fontsize=8)
    fig.tight_layout()
    return fig
