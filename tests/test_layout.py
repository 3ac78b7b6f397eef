"""mpcheck's layout: no import circle among its modules, no deep chain of its own classes.

Every ``import`` counts, wherever it stands (in a function, under ``TYPE_CHECKING``): a
late import hides a circle from Python, not from a reader.

There is no line limit: the engine once had one, and six modules sat at 590-599 lines,
cut where the limit fell rather than where a concern ends. A module holds one concern,
which review judges; the engine's parts are composed (each given the parts it asks), so a
class hierarchy cannot spread one concern over many files either.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

PACKAGE = Path(__file__).resolve().parent.parent / "mpcheck"
# A rule on ``Rule`` and a reporter on its base are one level; a part on a part is not wanted.
MAX_CLASS_DEPTH = 2


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
    code = "def late():\n    from mpcheck.pipeline import pool\nfrom . import names\n"
    path = tmp_path / "x.py"
    path.write_text(code)
    known = {"mpcheck", "mpcheck.pipeline", "mpcheck.pipeline.pool", "mpcheck.names", "mpcheck.x"}
    assert _imported("mpcheck.x", path, known) == {"mpcheck.pipeline.pool", "mpcheck.names"}


def _depths(sources: dict[str, str]) -> dict[str, int]:
    """How many of mpcheck's own classes each class of ``sources`` (by module) extends, in a
    chain; a base is matched by its last name, so two classes sharing a name count as one."""
    bases: dict[str, list[str]] = {}
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                names = [
                    b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                    for b in node.bases
                ]
                bases.setdefault(node.name, []).extend(names)

    def depth(name: str, seen: frozenset[str]) -> int:
        own = [b for b in bases.get(name, []) if b in bases and b not in seen]
        return max((1 + depth(b, seen | {b}) for b in own), default=0)

    return {name: depth(name, frozenset({name})) for name in bases}


def test_no_class_chain_deeper_than_two() -> None:
    sources = {str(p): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    deep = {name: d for name, d in _depths(sources).items() if d > MAX_CLASS_DEPTH}
    assert not deep, f"compose parts instead of extending: {deep}"


def test_depth_counts_a_chain_of_the_projects_classes() -> None:
    code = "class A(ABC): ...\nclass B(A): ...\nclass C(B): ...\nclass D(C): ...\n"
    assert _depths({"x": code}) == {"A": 0, "B": 1, "C": 2, "D": 3}


def test_every_package_is_installed() -> None:
    """A new package under mpcheck/ must be listed for setuptools, or installs lack it."""
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    packages = {_module_name(p) for p in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, f"add to [tool.setuptools] packages: {sorted(packages - listed)}"
