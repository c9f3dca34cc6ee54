"""environment.yml and pyproject.toml agree; the README starts with the two commands."""
import re
import tomllib
from pathlib import Path

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
    first = [l for l in blocks[0].splitlines() if l.strip() and not l.startswith("#")]
    assert first == ["./tutorial lab", "./tutorial test"], first
    assert "./tutorial test" in (ROOT / ".ci" / "run").read_text()
