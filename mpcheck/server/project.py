"""The project as the editor sees it: the CLI's summaries, with open buffers over the disk.

A check in the editor must see the files it imports, as ``mpcheck check`` does (a finding
whose cause is in another file is otherwise missing), and it must see them as the user is
editing them: an unsaved buffer stands for its file. The summaries are the CLI's own
(:mod:`mpcheck.project`), made lazily by import; they are dropped whenever a buffer or a
file on disk changes, so no check is answered from a stale summary.
"""

from __future__ import annotations

import os
from pathlib import Path

from mpcheck.engine.analysis import FileAnalysis
from mpcheck.pipeline.one_file import Options, ProjectLink
from mpcheck.project.index import ModuleIndex, site_roots
from mpcheck.project.models import forget_uses
from mpcheck.project.store import Dependencies, Summaries, Symbol
from mpcheck.project.summarise import FileSummariser
from mpcheck.project.summary import ModuleSummary

_Key = tuple[str, bool, bool, tuple[int, int] | None, tuple[str, ...]]


class _Session:
    """One document's check against the project (what ``ProjectSession`` is to the CLI)."""

    def __init__(
        self,
        store: Summaries,
        summariser: FileSummariser,
        path: Path,
        buffers: dict[str, bytes],
    ) -> None:
        self._store, self._summariser, self._path = store, summariser, path
        self.buffers = buffers  # the project's model records read open buffers over files
        store.begin(path)

    def lookup(self, dotted: str, level: int) -> Symbol | None:
        return self._store.lookup(self._path, dotted, level)

    def end(self, walk: FileAnalysis | None) -> tuple[ModuleSummary | None, Dependencies]:
        summary = None if walk is None else self._summariser.summary_of(walk, self._path)
        return summary, self._store.end(self._path, summary)


class Overlay:
    """Open buffers (by real path) over the files on disk, and the summaries made from them.

    Used from the server's one analysis thread only; the event loop changes ``buffers`` and
    calls :meth:`forget` between analyses' reads, which a dict tolerates."""

    def __init__(self) -> None:
        self.buffers: dict[str, bytes] = {}
        self._stores: dict[_Key, tuple[Summaries, FileSummariser]] = {}

    def read(self, path: Path) -> bytes:
        data = self.buffers.get(os.path.realpath(path))
        return data if data is not None else path.read_bytes()

    def set_buffer(self, path: str, data: bytes | None) -> None:
        """An open document's text (None: closed, its file on disk counts again)."""
        real = os.path.realpath(path)
        if data is None:
            self.buffers.pop(real, None)
        else:
            self.buffers[real] = data
        self.forget()

    def forget(self) -> None:
        """Drop every summary: a file changed, and any summary may depend on it."""
        self._stores.clear()
        forget_uses()  # where models are cast may have changed too

    def link(self, filename: str, options: Options) -> ProjectLink | None:
        """The check of ``filename`` against the project at ``options.project_root``."""
        root = options.project_root
        if root is None or options.follow_imports == "skip":
            return None
        site = options.follow_imports == "site"
        roots = options.source_roots
        key = (root, options.module_half_capable, site, options.target_torch_version, roots)
        if key not in self._stores:
            summariser = FileSummariser(
                Path(root),
                module_half_capable=options.module_half_capable,
                target_torch=options.target_torch_version,
                read=self.read,
            )
            index = ModuleIndex((Path(root), *map(Path, roots)), site_roots() if site else ())
            self._stores[key] = (
                Summaries(index, summariser, partner=summariser.partner),
                summariser,
            )
        store, summariser = self._stores[key]
        return _Session(store, summariser, Path(filename), self.buffers)
