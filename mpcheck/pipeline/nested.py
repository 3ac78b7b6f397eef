"""The project as a module's check sees it when that check runs inside another file's walk.

A module summarised for an importer may be checked at that moment (with the cache:
:mod:`mpcheck.pipeline.incremental`; without it: :mod:`mpcheck.pipeline.walked_once`). The
store already has the module's import cycle open and collects what it consults, so the check
looks names up through the store's own lookup and records no dependencies of its own.
"""

from __future__ import annotations

from pathlib import Path

from mpcheck.engine.analysis import FileAnalysis
from mpcheck.project.store import Dependencies, Lookup, Symbol
from mpcheck.project.summarise import FileSummariser
from mpcheck.project.summary import ModuleSummary

__all__ = ["Nested"]


class Nested:
    """The link of a module's check run inside another file's walk."""

    def __init__(self, path: Path, lookup: Lookup, summariser: FileSummariser) -> None:
        self._path = path
        self._lookup = lookup
        self._summariser = summariser

    def lookup(self, dotted: str, level: int) -> Symbol | None:
        return self._lookup(self._path, dotted, level)

    def end(self, walk: FileAnalysis | None) -> tuple[ModuleSummary | None, Dependencies]:
        summary = None if walk is None else self._summariser.summary_of(walk, self._path)
        return summary, {}
