"""environment.yml and pyproject.toml agree; the README starts with the two commands."""
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = (ROOT / "environment.yml").read_text()
    entries = [l.strip()[2:].strip() for l in env.splitlines() if l.strip().startswith("- ")]
    env_names = {_name(e) for e in entries if not e.startswith("-") and e not in ("pip", "pip:")}
    wanted = project["dependencies"] + project["optional-dependencies"]["test"] + project["optional-dependencies"]["lab"]
    missing = {_name(r) for r in wanted} - env_names
    assert not missing, f"in pyproject.toml but not environment.yml: {missing}"
    pins = {_name(e): e for e in entries}
    assert pins["tilelang"].replace(" ", "") == "tilelang==0.1.15"
    assert "tilelang==0.1.15" in project["dependencies"]
    assert "-e ." in entries, "environment.yml must install the tutorial package"


def test_readme_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, re.S)
    first = [l.split("#")[0].strip() for l in blocks[0].splitlines() if l.strip() and not l.startswith("#")]
    assert first == ["./tutorial lab", "./tutorial test"], first
    assert "./tutorial test" in (ROOT / ".ci" / "run").read_text()


def test_nvcc_from_pypi_compiles_with_the_system_toolkit_hidden(tmp_path):
    """Where no CUDA toolkit is installed, ./tutorial setup installs NVIDIA's nvcc wheels; with no
    nvcc on PATH and no CUDA_HOME, the runtime and TileLang must find and use that one."""
    import os
    import subprocess
    import sys

    import pytest

    from tilelang_tutorial import runtime

    if runtime.pypi_nvcc() is None:
        pytest.skip("nvidia-cuda-nvcc is not installed here (./tutorial setup installs it only without a toolkit)")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not os.path.exists(os.path.join(p, "nvcc")))
    env["TILELANG_CACHE_DIR"] = str(tmp_path)       # a cold cache: nvcc must really run
    code = ("import tilelang_tutorial as tt, tilelang.env as e; from tilelang_tutorial import runtime;"
            "from tilelang_tutorial.lessons.tiles.scale_copy import build_scale_copy;"
            "k = build_scale_copy(1000, dtype='float16', arch='sm_90a');"
            "print(runtime.nvcc_path()); print(e.CUDA_HOME); print('__global__' in k.get_kernel_source())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    nvcc, cuda_home, compiled = out.stdout.strip().splitlines()[-3:]
    assert "nvidia" in nvcc and nvcc.startswith(cuda_home) and compiled == "True", out.stdout


def test_tutorial_prints_its_whole_help_and_names_an_unknown_command():
    import subprocess

    script = ROOT / "tutorial"
    header = [l for l in script.read_text().splitlines()[1:40]]
    header = header[:next(i for i, l in enumerate(header) if not l.startswith("#"))]
    help_ok = subprocess.run([str(script)], capture_output=True, text=True, timeout=60)
    assert help_ok.returncode == 0
    assert help_ok.stdout.strip().splitlines()[-1] == header[-1].lstrip("# ").strip(), "the help stops short"
    for command in ("lab", "test", "browser", "setup", "bench", "doctor"):
        assert f"./tutorial {command}" in help_ok.stdout
    bad = subprocess.run([str(script), "nonsense"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[0] == "unknown command: nonsense" and help_ok.stdout.strip() in bad.stderr


def test_readme_names_doctor_beside_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    first_block = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, re.S)[0]
    after = readme[readme.index(first_block) + len(first_block):][:600]
    assert "./tutorial doctor" in first_block or "./tutorial doctor" in after


def test_the_editable_install_prints_no_setuptools_warning(tmp_path):
    """setuptools warns "Editable installation ..." for its import-hook editable mode; the
    package-dir mapping in pyproject.toml gives it the plain .pth mode, which does not."""
    import os
    import subprocess
    import sys
    import venv

    if os.environ.get("TUTORIAL_PYTHON"):   # ./tutorial's prepared-interpreter mode: the offline GPU runner
        pytest.skip("TUTORIAL_PYTHON is set: this interpreter is used as it is, nothing is installed (no index)")
    venv.EnvBuilder(with_pip=True).create(tmp_path / "env")
    py = str(tmp_path / "env" / "bin" / "python")
    out = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    noise = [l for l in (out.stdout + out.stderr).splitlines() if "Warning" in l or "Editable install" in l]
    assert not noise, noise
    pth = "".join(p.read_text() for p in (tmp_path / "env").rglob("__editable__*.pth"))
    assert str(ROOT) in pth
