"""The package's shape: imports run one way (no cycles, importlib included), shared machinery
never imports a lesson, and a lesson is one folder."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tilelang_tutorial"
ENTRY_POINTS = {"tilelang_tutorial.__main__"}   # the command line may reach every lesson


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if not p.name.startswith("test_")}


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """Every tilelang_tutorial module ``module`` imports, at any depth of its code, including
    ``importlib.import_module("...")`` and ``__import__("...")`` with a literal name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module) if node.level else node.module
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                targets = [str(node.args[0].value)]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != module and not module.startswith(t + "."):   # a module's own packages are implicit
                found.add(t)
    return found


@pytest.fixture(scope="module")
def graph():
    mods = _modules()
    return {m: imports_of(m, p, set(mods)) for m, p in mods.items()}


def test_no_import_cycles(graph):
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_shared_machinery_never_imports_a_lesson(graph):
    bad = {m: sorted(n for n in deps if n.startswith("tilelang_tutorial.lessons"))
           for m, deps in graph.items()
           if not m.startswith("tilelang_tutorial.lessons") and m not in ENTRY_POINTS}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"shared modules importing lessons: {bad}"


def test_the_checker_sees_importlib_imports():
    src = 'import importlib\nimportlib.import_module("tilelang_tutorial.lessons.gemm")\n'
    tmp = PACKAGE / "_probe_importlib.py"
    tmp.write_text(src)
    try:
        assert "tilelang_tutorial.lessons.gemm" in imports_of("tilelang_tutorial._probe_importlib", tmp,
                                                              set(_modules()))
    finally:
        tmp.unlink()


def test_no_central_list_of_lessons():
    """Adding a lesson touches its folder, its notebook and the README only: nothing else names
    the lesson folders."""
    names = [p.name for p in (PACKAGE / "lessons").iterdir() if (p / "__init__.py").exists()]
    for path in list(PACKAGE.glob("*.py")) + list((PACKAGE / "layouts").glob("*.py")) + [PACKAGE / "lessons" / "__init__.py"]:
        text = path.read_text(encoding="utf-8")
        for name in names:
            assert f"lessons.{name}" not in text and f"lessons/{name}" not in text, (
                f"{path.relative_to(PACKAGE.parent)} names the lesson {name!r}")
