"""The engine's layout: no import circle among mpcheck's modules, no engine module too long.

Every ``import`` counts, wherever it stands (in a function, under ``TYPE_CHECKING``): a
late import hides a circle from Python, not from a reader.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

PACKAGE = Path(__file__).resolve().parent.parent / "mpcheck"
# The engine: the walk, what it knows of torch, and the values it reports to rules.
ENGINE = ("infer/", "training.py", "training_api.py", "facts.py", "sites.py", "torch_api.py")
MAX_ENGINE_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The mpcheck modules ``path`` imports (``from a import b``: ``a.b`` if b is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [s for s in subs if s in known] or [base]
            if len(targets) < len(subs):  # names defined in ``base`` itself, not submodules
                targets.append(base)
        found.update(t for t in targets if t in known and t != name)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` as a path of module names, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_import_circle_among_mpcheck_modules() -> None:
    modules = _modules()
    graph = {name: _imported(name, path, set(modules)) for name, path in modules.items()}
    circle = _cycle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_cycle_finder_sees_a_circle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_imports_in_functions_and_relative_imports_count(tmp_path: Path) -> None:
    code = "def late():\n    from mpcheck.engine import check_source\nfrom . import names\n"
    path = tmp_path / "x.py"
    path.write_text(code)
    known = {"mpcheck", "mpcheck.engine", "mpcheck.names", "mpcheck.x"}
    assert _imported("mpcheck.x", path, known) == {"mpcheck.engine", "mpcheck.names"}


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if str(p.relative_to(PACKAGE)).startswith(ENGINE)],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_engine_module_is_short(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_ENGINE_LINES, f"{path.name}: {lines} lines; split it by concern"


def test_every_package_is_installed() -> None:
    """A new package under mpcheck/ must be listed for setuptools, or installs lack it."""
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    packages = {_module_name(p) for p in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, f"add to [tool.setuptools] packages: {sorted(packages - listed)}"
