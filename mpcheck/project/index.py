"""Module names <-> files of the project being checked: where ``import pkg.mod`` lands.

The whole-project phase needs to find the file behind an import without running Python's
import machinery. A file belongs to the package chain of ``__init__.py`` files above it; the
directory above the topmost one is its import root (so ``src/`` layouts and plain script
folders both work). Namespace packages (a directory without ``__init__.py``) resolve from a
root like any other package. Nothing is read or stat'ed until asked, and every answer is
cached, so ``mpcheck check one_file.py`` touches only what that file imports.

With ``follow-imports = "site"`` the installed libraries (``site-packages``) are searched
too, after the project: a library module is then summarised like a project file. torch is
never followed (the engine knows it), and each library is its own island: its modules'
import cycles are found among its own modules only, so following one library never reads
another's import lists.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["NEVER_FOLLOWED", "ModuleIndex", "Target", "site_roots"]

NEVER_FOLLOWED = frozenset({"torch"})  # installed packages the engine knows by itself
SITE_DIRS = ("site-packages", "dist-packages")


def site_roots() -> tuple[Path, ...]:
    """The installed-library directories: this interpreter's, in ``sys.path`` order, then
    those of the active virtual environment (``VIRTUAL_ENV``: mpcheck installed apart from
    the project, with pipx, still sees the project's libraries)."""
    found = [Path(p) for p in sys.path if p and Path(p).name in SITE_DIRS]
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        found += sorted(Path(venv).glob("lib/python3*/site-packages"))
        found.append(Path(venv) / "Lib" / "site-packages")  # Windows
    return tuple(dict.fromkeys(p for p in found if p.is_dir()))


@dataclass(frozen=True, slots=True)
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

    def __init__(self, roots: tuple[Path, ...] = (), site: tuple[Path, ...] = ()) -> None:
        self._roots = tuple(r.resolve() for r in roots)
        self._site = tuple(r.resolve() for r in site)
        # A listing per directory, not a stat per candidate: a run asks about tens of
        # thousands of candidate files in a few hundred directories.
        self._listing = cache(_listing)
        self._package_chain = cache(self._chain)
        # ``Path.resolve`` asks the file system about every component, and a run resolves
        # the same few thousand paths and imports hundreds of thousands of times.
        self.resolved: Callable[[Path], Path] = cache(Path.resolve)
        # by the importer's directory: every file of a directory resolves an import alike
        self._targets: dict[tuple[str, str, int], Target | None] = {}
        # Each answer and file once: tens of thousands of imports name a thousand-odd files.
        self._interned: dict[tuple[str, str, str], Target] = {}
        self._files: dict[str, Path] = {}

    def module_name(self, path: Path) -> str:
        """``pkg.sub.mod`` for ``<root>/pkg/sub/mod.py``; ``pkg.sub`` for its ``__init__.py``."""
        parts = list(self._package_chain(self.resolved(path).parent))
        if path.stem != "__init__":
            parts.append(path.stem)
        return ".".join(parts) or path.stem

    def import_root(self, path: Path) -> Path:
        """The directory Python would need on ``sys.path`` to import ``path`` by its name."""
        directory = self.resolved(path).parent
        for _ in self._package_chain(directory):
            directory = directory.parent
        return directory

    def resolve(self, importer: Path, module: str, level: int = 0) -> Target | None:
        """The project file that ``import module`` (``level`` dots: a relative import) reaches
        from ``importer``, or None for a module outside the project (torch, the stdlib)."""
        key = (self._directory(importer), sys.intern(module), level)
        if key not in self._targets:
            self._targets[key] = self._resolve(importer, module, level)
        return self._targets[key]

    def _directory(self, importer: Path) -> str:
        """The importer's directory, one string per directory (a key of many entries)."""
        return sys.intern(os.path.dirname(self.resolved(importer)))

    def _resolve(self, importer: Path, module: str, level: int) -> Target | None:
        parts = [p for p in module.split(".") if p]
        if level:
            base = self.resolved(importer).parent
            for _ in range(level - 1):
                base = base.parent
            return self._find(base, parts, ".".join(self._relative_prefix(importer, level)))
        if not parts:
            return None
        for root in self._search_path(importer) + self._site:
            found = self._find(root, parts, "")
            if found is not None:
                if parts[0] in NEVER_FOLLOWED and self.library(found.path) is not None:
                    return None
                return found
        return None

    def library(self, path: Path) -> Path | None:
        """The installed top-level package (or module) ``path`` belongs to; None for a file
        of the project (or when installed libraries are not followed)."""
        path = self.resolved(path)
        for root in self._site:
            if path.is_relative_to(root) and path != root:
                return root / path.relative_to(root).parts[0]
        return None

    def _relative_prefix(self, importer: Path, level: int) -> list[str]:
        package = list(self._package_chain(self.resolved(importer).parent))
        return package[: len(package) - (level - 1)] if level > 1 else package

    def _search_path(self, importer: Path) -> tuple[Path, ...]:
        here = self.resolved(importer).parent
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
        files, dirs = self._listing(os.fspath(base))
        # Every candidate with a head lies under ``parts[0]``: when ``base`` has no such
        # module or package (most imports name another library), none is looked for.
        named = bool(parts) and (parts[0] in dirs or f"{parts[0]}.py" in files)
        for cut in range(len(parts) if named else 0, lowest - 1, -1):
            head, tail = parts[:cut], parts[cut:]
            stem = os.path.join(base, *head)
            candidates = [stem + ".py"] if head else []
            candidates.append(os.path.join(stem, "__init__.py"))
            for candidate in candidates:
                if self._is_file(candidate):
                    name = ".".join(([prefix] if prefix else []) + head)
                    return self._target(name, candidate, ".".join(tail))
            if head and not tail and self._is_dir(stem):
                return None
        return None

    def _is_file(self, path: str) -> bool:
        directory, name = os.path.split(path)
        return name in self._listing(directory)[0]

    def _is_dir(self, path: str) -> bool:
        directory, name = os.path.split(path)
        return name in self._listing(directory)[1]

    def _target(self, module: str, path: str, attr: str) -> Target:
        key = (module, path, attr)
        if key not in self._interned:
            file = self._files.setdefault(path, Path(path))
            self._interned[key] = Target(module, file, attr)
        return self._interned[key]

    def _chain(self, directory: Path) -> tuple[str, ...]:
        """Package names from the topmost ``__init__.py`` directory down to ``directory``."""
        names: list[str] = []
        while self._is_file(os.path.join(directory, "__init__.py")):
            names.append(directory.name)
            if directory.parent == directory:
                break
            directory = directory.parent
        return tuple(reversed(names))


def _listing(directory: str) -> tuple[frozenset[str], frozenset[str]]:
    """The files and the directories in ``directory`` (none when it cannot be read). Names
    compare exactly, as the import system's do, even where the file system ignores case."""
    files: list[str] = []
    dirs: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    if entry.is_file():
                        files.append(entry.name)
                    elif entry.is_dir():
                        dirs.append(entry.name)
                except OSError:  # a dangling or unreadable entry is neither
                    continue
    except OSError:  # most often not there: ``torch/nn/`` under each import root
        pass
    return (frozenset(files), frozenset(dirs)) if files or dirs else _NOTHING


_NOTHING: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
