"""Module names <-> files of the project being checked: where ``import pkg.mod`` lands.

The whole-project phase needs to find the file behind an import without running Python's
import machinery. A file belongs to the package chain of ``__init__.py`` files above it; the
directory above the topmost one is its import root (so ``src/`` layouts and plain script
folders both work). Namespace packages (a directory without ``__init__.py``) resolve from a
root like any other package. Nothing is read or stat'ed until asked, and every answer is
cached, so ``mpcheck check one_file.py`` touches only what that file imports.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from mpcheck.records import dataclass

__all__ = ["ModuleIndex", "Target"]


@dataclass(frozen=True)
class Target:
    """Where an imported dotted name lives: a module file and the attribute path inside it.

    ``from pkg.layers import rope`` may name the module ``pkg/layers/rope.py`` (``attr`` is
    empty) or a name ``rope`` defined in ``pkg/layers/__init__.py`` (``attr`` is ``rope``).
    """

    module: str
    path: Path
    attr: str = ""


class ModuleIndex:
    """Resolves absolute and relative imports of project files to other project files.

    ``roots`` are extra directories to import from, as on ``sys.path`` (the project root, a
    configured source directory); each file's own import root and its own directory (for
    scripts importing a sibling) are always searched first.
    """

    def __init__(self, roots: tuple[Path, ...] = ()) -> None:
        self._roots = tuple(r.resolve() for r in roots)
        self._is_file = cache(Path.is_file)
        self._is_dir = cache(Path.is_dir)
        self._package_chain = cache(self._chain)

    def module_name(self, path: Path) -> str:
        """``pkg.sub.mod`` for ``<root>/pkg/sub/mod.py``; ``pkg.sub`` for its ``__init__.py``."""
        parts = list(self._package_chain(path.resolve().parent))
        if path.stem != "__init__":
            parts.append(path.stem)
        return ".".join(parts) or path.stem

    def import_root(self, path: Path) -> Path:
        """The directory Python would need on ``sys.path`` to import ``path`` by its name."""
        directory = path.resolve().parent
        for _ in self._package_chain(directory):
            directory = directory.parent
        return directory

    def resolve(self, importer: Path, module: str, level: int = 0) -> Target | None:
        """The project file that ``import module`` (``level`` dots: a relative import) reaches
        from ``importer``, or None for a module outside the project (torch, the stdlib)."""
        parts = [p for p in module.split(".") if p]
        if level:
            base = importer.resolve().parent
            for _ in range(level - 1):
                base = base.parent
            return self._find(base, parts, ".".join(self._relative_prefix(importer, level)))
        if not parts:
            return None
        for root in self._search_path(importer):
            found = self._find(root, parts, "")
            if found is not None:
                return found
        return None

    def _relative_prefix(self, importer: Path, level: int) -> list[str]:
        package = list(self._package_chain(importer.resolve().parent))
        return package[: len(package) - (level - 1)] if level > 1 else package

    def _search_path(self, importer: Path) -> tuple[Path, ...]:
        here = importer.resolve().parent
        first = (self.import_root(importer), here)
        return tuple(dict.fromkeys(first + self._roots))

    def _find(self, base: Path, parts: list[str], prefix: str) -> Target | None:
        """The longest module prefix of ``parts`` under ``base``; the rest is an attribute.

        ``a.b.c`` is ``a/b/c.py``, ``a/b/c/__init__.py``, or name ``c`` of ``a/b.py`` (or of
        ``a/b/__init__.py``). A relative import (``prefix`` set) may also land on ``base``'s
        own ``__init__.py``: ``from . import x`` is ``x`` of the package when no ``x.py``
        exists. A namespace directory has no file of its own to summarise.
        """
        lowest = 0 if prefix else 1
        for cut in range(len(parts), lowest - 1, -1):
            head, tail = parts[:cut], parts[cut:]
            stem = base.joinpath(*head)
            name = ".".join(([prefix] if prefix else []) + head)
            candidates = [stem / "__init__.py"]
            if head:
                candidates.insert(0, stem.with_name(stem.name + ".py"))
            for candidate in candidates:
                if self._is_file(candidate):
                    return Target(name, candidate, ".".join(tail))
            if head and not tail and self._is_dir(stem):
                return None
        return None

    def _chain(self, directory: Path) -> tuple[str, ...]:
        """Package names from the topmost ``__init__.py`` directory down to ``directory``."""
        names: list[str] = []
        while self._is_file(directory / "__init__.py"):
            names.append(directory.name)
            if directory.parent == directory:
                break
            directory = directory.parent
        return tuple(reversed(names))
