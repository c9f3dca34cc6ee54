"""Notebook 04b (the schedule written by hand): its kernel cells, the figures its prose reads, the
exercise checkers' reading of the emulator, and the notebook's exercise starter."""
import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from tilelang_tutorial import emulate, report
from tilelang_tutorial.lessons.mla import hand_scheduled_exercises as H
from tilelang_tutorial.lessons.mla import hand_scheduled_notebook as N
from tilelang_tutorial.lessons.mla import hand_scheduled_wrong_answers as wrong
from tilelang_tutorial.lessons.mla.solutions import hand_scheduled_repair as solution

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "04b_mla_hand_scheduled.ipynb"


def _cells():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def _module_from_cells(tmp_path, name, sources):
    """The notebook's imports cell and the given code cells, as one module (TileLang reads the
    source of a prim_func, so it must live in a file)."""
    path = tmp_path / f"{name}.py"
    path.write_text("\n\n".join(sources) + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _range_words(lo: float, hi: float) -> str:
    """How the prose quotes a recorded range: "0.79 to 0.84", or one figure when both ends round alike."""
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f} to {hi:.2f}"


def test_prose_reads_the_recorded_ranges():
    """The sentences of section 6 quote these ranges: refreshing results/mla.json must update them."""
    recorded = report.records("mla", where={"config.label": list(N.POINTS)})
    ranges = N.recorded_ranges(recorded)
    text = " ".join(s for t, s in _cells() if t == "markdown")
    text = re.sub(r"\s+", " ", text)
    for key in [("h128", "seesaw"), ("h128", "ws"), ("h128", "auto"), ("h16 (TP8)", "auto")]:
        words = _range_words(*ranges[key])
        assert words in text, f"section 6 should read {key}: {words}"
    lo = min(ranges[("h16 (TP8)", s)][0] for s in ("ws", "seesaw"))
    hi = max(ranges[("h16 (TP8)", s)][1] for s in ("ws", "seesaw"))
    assert f"{_range_words(lo, hi)} of the copy bandwidth" in text
    streamed = [r["value"] for r in recorded if r["config"]["label"] == "h16 (TP8)" and r["config"]["schedule"] != "auto"]
    assert f"({min(streamed):.2f} to {max(streamed):.2f} TB/s)" in text
    points = {(r["shape"]["batch"], r["shape"]["kv_len"]) for r in recorded if r["config"]["label"] == "h128"}
    words = {2: "two", 4: "four", 6: "six", 8: "eight", 10: "ten", 12: "twelve"}
    assert f"over the {words.get(len(points), len(points))} recorded batch and length points" in text
    for label in N.POINTS:      # "at every recorded point the order is seesaw, then ws, then auto"
        by_point = {}
        for r in (r for r in recorded if r["config"]["label"] == label):
            by_point.setdefault((r["shape"]["batch"], r["shape"]["kv_len"]), {})[r["config"]["schedule"]] = r["value"]
        for point, values in by_point.items():
            assert values["seesaw"] >= values["ws"] > values["auto"], (label, point, values)
    h128 = [r for r in recorded if r["config"]["label"] == "h128" and r["config"]["schedule"] == "seesaw"]
    assert f"{min(r['value'] for r in h128):.0f} to {max(r['value'] for r in h128):.0f} TFLOP/s" in text


def test_notebook_cites_only_public_material():
    text = " ".join(s for _, s in _cells())
    for banned in ("blog post", "the post", "issue 1", "issue 2"):
        assert banned not in text.lower(), banned
    assert "https://github.com/deepseek-ai/FlashMLA" in text
    words = sum(len(s.split()) for t, s in _cells() if t == "markdown")
    assert words <= 3000, words


def test_kernel_cells_do_not_redefine_each_others_names(tmp_path):
    """Run in one namespace (as the notebook does), the ws cell's program built after the seesaw
    cell must still be the package's ws program (seesaw once redefined REGS_PRODUCER)."""
    from tilelang_tutorial.lessons.mla import op

    cells = _cells()
    imports = next(s for t, s in cells if t == "code" and "import tilelang_tutorial as tt" in s)
    imports = "\n".join(line for line in imports.splitlines() if not line.startswith(("print(", "DEVICE")))
    kernels = [s for t, s in cells if t == "code" and s.startswith("# Kernel cell:")]
    assert len(kernels) == 3
    module = _module_from_cells(tmp_path, "nb04b_kernels", [imports] + kernels)
    for schedule, factory in (("ws", module.mla_decode_ws_program), ("seesaw", module.mla_decode_seesaw_program)):
        package = op.program_for(128, "float16", split=True, softmax_scale=None, schedule=schedule, arch="sm_90a")
        assert N.same_program(factory(128, "float16", split=True), package), schedule


def test_the_notebook_starter_is_the_registered_wrong_answer(tmp_path):
    """Exercise 1's starter cell is the program ``ring_starter`` builds, so the exercise tests
    cover what the reader is handed."""
    cells = _cells()
    starter = next(s for t, s in cells if t == "code" and s.startswith("def ring_program"))
    starter = starter.split("\nring_result")[0]
    module = _module_from_cells(tmp_path, "nb04b_ring", ["import tilelang\nimport tilelang.language as T", starter])
    assert module.ring_program(5).script() == wrong.ring_starter(5).script()
    assert module.ring_program(5).script() != solution.ring_program(5).script()


def test_deadlock_reports_are_read():
    """The hints come from the emulator's report: if its wording changes, this says so."""
    x = torch.randn(5 * 128)
    with pytest.raises(emulate.Deadlock) as info:
        emulate.run(wrong.ring_producer_waits_first(5), x, torch.empty(5 * 128))
    waits = H.parse_deadlock(info.value)
    assert len(waits) == len(info.value.waits) == 3
    producer = next(w for w in waits if w["role"].startswith("the producer"))
    assert producer == {"role": H.ROLES[256], "barrier": "empty", "stage": 0, "parity": 0, "phase": 0,
                        "arrived": 0, "count": 256, "k": 0}
    assert any("should ask for parity 1" in h for h in H.deadlock_hints(waits))


def test_block_hints_name_the_symptom():
    x = torch.arange(3 * 128, dtype=torch.float32)
    out = 2 * x
    out[0:64] = float("inf")                      # never written
    out[128 + 64:256] = float("nan")              # read from unwritten shared memory
    out[256:256 + 64] = 2 * x[0:64]               # block 2 holds block 0's data
    hints = H.block_hints(out, x, 3)
    assert "block 0, left half (stage 0) was never written" in hints[0]
    assert "block 1, right half" in hints[1] and "read before the producer had written" in hints[1]
    assert "block 2, left half (stage 0) holds the data of block 0" in hints[2]


def test_shared_memory_figure_is_read_from_the_kernel():
    kernel = H._package_seesaw_kernel()
    assert H.measured_shared_bytes(kernel) == solution.SHARED_MEMORY["seesaw_bytes"]
    assert H.measured_shared_bytes(kernel) + 2 * H.P_TILE_BYTES > H.HOPPER_SMEM_PER_BLOCK


@pytest.mark.gpu   # conftest skips it without a GPU
def test_ring_and_schedules_on_the_gpu(capsys):
    """On a Hopper GPU: the ring solution runs after the emulator, and check_schedule runs both
    hand-written schedules on the GPU too."""
    import tilelang_tutorial as tt
    from tilelang_tutorial.lessons import mla

    if tt.current_arch() != "sm_90a":
        pytest.skip("the hand-written schedules need sm_90a")
    res = H.check_ring(solution.ring_program, verbose=False)
    assert res.ok and "on the GPU" in str(res), str(res)
    inputs = mla.reference.make_paged_inputs(3, 128, [1, 300, 449], device="cuda", seed=7)
    for schedule in ("ws", "seesaw"):
        program = mla.op.program_for(128, "float16", split=True, softmax_scale=None, schedule=schedule, arch="sm_90a")
        assert N.check_schedule(schedule, program, inputs, num_split=2).ok
    printed = capsys.readouterr().out
    assert printed.count("on the GPU: OK") == 2 and printed.count("in the emulator (CPU): OK") == 2
