"""The engine's side of the project phase: a file's summary, made by walking it.

A file is parsed and walked once, silently (no rule listens), with the summaries of what
it imports; what each top-level function returns becomes plain data
(:mod:`mpcheck.project.summary`) for the files that import it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import libcst as cst

from mpcheck.hooks import Site, SiteKind
from mpcheck.infer.analysis import FileAnalysis
from mpcheck.infer.imported import value_of
from mpcheck.names import ImportTable
from mpcheck.parsing import Unparsable, parse
from mpcheck.project.index import ModuleIndex
from mpcheck.project.store import Cached, Dependencies, Lookup, Summaries, Symbol
from mpcheck.project.summary import Function, ModuleSummary
from mpcheck.source import SourceError, SourceFile

__all__ = ["FileSummariser", "ProjectSession", "forget", "summaries_for"]


class _Silent:
    """A listener that wants nothing: summarising reports no findings."""

    def wants(self, kind: SiteKind) -> bool:
        return False

    def deliver(self, kind: SiteKind, site: Site) -> None:
        """Never called: :meth:`wants` says no to every kind."""


class FileSummariser:
    """Reads a file's imports cheaply (CPython's parser), and walks it when summarised."""

    def __init__(self, root: Path, *, module_half_capable: bool = True) -> None:
        self._root = root
        self._half = module_half_capable

    def imports(self, path: Path) -> Iterable[tuple[str, int]]:
        """The module-level imports: the edges that order summaries (one found only inside
        a function is summarised when first asked for, which is as correct, if later)."""
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return []
        found: list[tuple[str, int]] = []
        for node in tree.body:
            if isinstance(node, ast.Import):
                found += [(alias.name, 0) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                found += [(f"{base}.{a.name}" if base else a.name, node.level) for a in node.names]
        return found

    def summarise(self, path: Path, lookup: Lookup) -> ModuleSummary | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        module = parse(data)
        if isinstance(module, Unparsable):
            return None
        table = ImportTable.of(module)
        if b"torch" not in data:  # nothing to walk, but it may re-export what others define
            return ModuleSummary("", _shown_path(path, self._root), reexports=_reexports(table))
        walk = FileAnalysis(
            module,
            table,
            _Silent(),
            module_half_capable=self._half,
            source=data,
            project=lambda dotted, level: lookup(path, dotted, level),
        )
        try:
            walk.run()
        except (RecursionError, ValueError, KeyError, AttributeError, TypeError):
            return None  # the file's own check reports what went wrong with it
        return self.summary_of(walk, path)

    def summary_of(self, walk: FileAnalysis, path: Path) -> ModuleSummary:
        """The summary a finished walk of ``path`` gives (a check's walk gives the same)."""
        module, table = walk.module, walk.imports
        shown = _shown_path(path, self._root)
        try:
            text = SourceFile.decode(walk.source).text  # not ``module.code``: a full codegen
        except SourceError:
            text = ""
        functions = {}
        for name, fn in walk.functions.items():
            fact = walk.summaries.get(fn)
            if fact is None:
                continue
            params = [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]
            names = tuple(p.name.value for p in params)
            start = text.find(f"def {name}(")

            def place(node: cst.CSTNode, start: int = start) -> tuple[int, int]:
                """Where ``node`` is, found by its text after its function's ``def``: cheap,
                unlike a position pass over the whole file, and only needed for messages."""
                offset = text.find(module.code_for_node(node), max(start, 0))
                if offset < 0:
                    return 0, 0
                line_start = text.rfind("\n", 0, offset) + 1
                return text.count("\n", 0, offset) + 1, offset - line_start + 1

            functions[name] = Function(names, value_of(fact, place, shown))
        return ModuleSummary("", shown, functions=functions, reexports=_reexports(table))


def _reexports(table: ImportTable) -> dict[str, tuple[str, int, str]]:
    """Each imported name's origin, so lookups through this module reach it."""
    reexports = {name: (target, 0, "") for name, target in table.aliases.items()}
    reexports |= {n: (t, table.levels[n], "") for n, t in table.relative.items()}
    return reexports


def _shown_path(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


_STORES: dict[tuple[str, bool], tuple[Summaries, FileSummariser]] = {}


def summaries_for(
    root: str, module_half_capable: bool, cached: Cached | None = None
) -> tuple[Summaries, FileSummariser]:
    """The process's summaries of the project at ``root`` (made on first use; ``cached``
    serves summaries kept from earlier runs and must be given by that first use)."""
    key = (root, module_half_capable)
    if key not in _STORES:
        summariser = FileSummariser(Path(root), module_half_capable=module_half_capable)
        _STORES[key] = (Summaries(ModuleIndex((Path(root),)), summariser, cached), summariser)
    return _STORES[key]


def forget() -> None:
    """Drop every summary: a new run must see the files as they are now."""
    _STORES.clear()


class ProjectSession:
    """One file's check against the project: the lookups its walk makes, and afterwards
    its walk's summary, kept so that files importing it need not walk it again."""

    def __init__(self, root: str, filename: str, module_half_capable: bool) -> None:
        self._summaries, self._summariser = summaries_for(root, module_half_capable)
        self._path = Path(filename)
        self._summaries.begin(self._path)

    def lookup(self, dotted: str, level: int) -> Symbol | None:
        return self._summaries.lookup(self._path, dotted, level)

    def end(self, walk: FileAnalysis | None) -> tuple[ModuleSummary | None, Dependencies]:
        """Close the check; its summary and what it consulted."""
        summary = None if walk is None else self._summariser.summary_of(walk, self._path)
        return summary, self._summaries.end(self._path, summary)
