import pytest

from tilelang_tutorial import report, results
from tilelang_tutorial.inspector import KernelInspector, NotAKernelError, inspect_kernel, launch_facts, resource_usage
from tilelang_tutorial.lessons.tiles import scale_copy
from tilelang_tutorial.report import LatencyReport

from test_results_store import PROV, _record


@pytest.fixture(scope="module")
def kernel():
    return scale_copy.build_scale_copy(4096, dtype="float16", arch="sm_90a")


def test_rejects_what_is_not_a_kernel(kernel):
    for bad in (None, "kernel", scale_copy.scale_copy_program, kernel.prim_func):
        with pytest.raises(NotAKernelError, match="compiled TileLang kernel"):
            KernelInspector(bad)
    with pytest.raises(NotAKernelError, match="compile it first"):
        KernelInspector(scale_copy.scale_copy_program)


def test_launch_facts(kernel):
    facts = launch_facts(kernel)
    assert facts["kernels"] == ["scale_copy_kernel"]
    assert facts["grid"]["blockIdx.x"] == "32"  # 4096 / 128
    assert facts["grid"]["blockIdx.y"].endswith("// 64")
    assert facts["threads_written"][0] == 128 and facts["launch_bounds"] == [128]
    assert facts["dynamic_shared_bytes"] == ["16384"]  # 64 x 128 fp16
    use = resource_usage(kernel)["scale_copy_kernel"]
    assert 0 < use["registers"] <= 255 and use["spill_stores"] == 0


def test_summary_is_the_static_fallback(kernel):
    insp = KernelInspector(kernel, latency=LatencyReport.from_record(results.Record(_record(), PROV)))
    text = insp.summary()
    for part in ("sm_90a", "scale_copy_kernel", "registers/thread", "RECORDED", "NVIDIA H200", "floor at copy"):
        assert part in text, part
    png = insp.latency.png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_says_when_ptxas_serialized_the_wgmma(kernel):
    """notebook 02's 128 x 256 tile on one consumer warpgroup: ptxas, short of registers, waits after
    every wgmma; the summary says so (and says nothing of it for a kernel without wgmma)"""
    from tilelang_tutorial.lessons.gemm import kernel as gr

    wide = gr.build_gemm_relu(4096, 4096, config=gr.SEED_CONFIG.replace(block_N=256), arch="sm_90a")
    assert "wgmma serialized by ptxas (insufficient register resources for the wgmma pipeline)" in \
        KernelInspector(wide).summary()
    assert "serialized" not in KernelInspector(kernel).summary()


def test_widget_has_the_tabs_and_a_chart(kernel):
    import ipywidgets as W

    insp = KernelInspector(kernel, latency=LatencyReport.measured(kernel_ms=0.05, reference=("torch", 0.07), floor_ms=0.04))
    w = insp.widget()
    tabs = [c for c in w.children if isinstance(c, W.Tab)][0]
    assert [tabs.get_title(i) for i in range(len(tabs.children))] == ["CUDA", "Host code", "PTX", "Launch facts", "Layouts"]
    assert "scale_copy_kernel" in insp._cuda.value and "style=" in insp._cuda.value  # highlighted inline
    assert insp._chart.value[:4] == b"\x89PNG"
    insp._show_ptx()
    assert ".entry scale_copy_kernel" in insp._ptx.value
    insp._show_layouts()
    assert "y_frag" in insp._layouts.value


def test_controls_recompile_and_refresh(kernel):
    calls = []

    def rebuild(**p):
        calls.append(p)
        return scale_copy.build_scale_copy(4096, dtype="float16", arch="sm_90a", **p)

    insp = KernelInspector(kernel, controls={"block_M": [64, 32]}, rebuild=rebuild, initial={"block_M": 64})
    insp.widget()
    insp._dropdowns["block_M"].value = 32
    assert calls[-1] == {"block_M": 32}
    assert "// 32" in insp._facts.value and "compiled" in insp._status.value
    with pytest.raises(ValueError, match="rebuild"):
        KernelInspector(kernel, controls={"block_M": [64]})


def test_missing_records_are_not_shown_as_figures():
    rep = report.latency("tile", where={"kernel": "no-such-kernel"})
    assert rep.bars == [] and "no record matching" in rep.text()


def test_one_display_carries_the_widget_and_its_static_fallback(kernel):
    insp = KernelInspector(kernel, latency=LatencyReport.measured(kernel_ms=0.05, reference=("torch", 0.07)))
    bundle = insp._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "scale_copy_kernel" in bundle["text/plain"] and "<img" in bundle["text/html"]


def test_inspect_kernel_displays_once(kernel, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    insp = inspect_kernel(kernel)
    assert shown == [insp]
