"""Notebook 04b (the schedule written by hand): its kernel cells, the exercise checkers' reading of
the emulator, and the notebook's exercise starter."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from tilelang_tutorial import emulate
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


def test_kernel_cells_do_not_redefine_each_others_names(tmp_path):
    """Run in one namespace (as the notebook does), the ws cell's program built after the seesaw
    cell must still be the package's ws program (a kernel cell must not redefine another's names)."""
    from tilelang_tutorial.lessons.mla import op

    cells = _cells()
    imports = next(s for t, s in cells if t == "code" and "import tilelang_tutorial as tt" in s)
    imports = "\n".join(line for line in imports.splitlines() if not line.startswith(("print(", "DEVICE")))
    helpers = next(s for t, s in cells if t == "code" and s.startswith("# notebook 04's helpers"))
    kernels = [s for t, s in cells if t == "code" and s.startswith("# Kernel cell:")]
    assert len(kernels) == 4
    module = _module_from_cells(tmp_path, "nb04b_kernels", [imports, helpers] + kernels)
    for schedule, factory in (("ws", module.mla_decode_ws_program), ("seesaw", module.mla_decode_seesaw_program)):
        package = op.program_for(128, "float16", split=True, softmax_scale=None, schedule=schedule, arch="sm_90a")
        assert factory(128, "float16", split=True).script() == package.script(), schedule


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
    inputs = mla.reference.make_paged_inputs(5, 128, [1, 1300, 447, 130, 1344], device="cuda", seed=7,
                                             flat_large_last=True)
    for schedule in ("ws", "seesaw"):
        program = mla.op.program_for(128, "float16", split=True, softmax_scale=None, schedule=schedule, arch="sm_90a")
        assert N.check_schedule(schedule, program, inputs, num_split=3).ok
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    for place in (", on the GPU, ", ", in the emulator (CPU), "):
        assert sum(place in line and "output OK: " in line and "lse OK: " in line for line in lines) == 2, printed
