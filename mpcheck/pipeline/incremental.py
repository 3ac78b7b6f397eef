"""Checking a file through the persistent cache (:mod:`mpcheck.pipeline.cache`).

A file's cached entry holds when its bytes hash the same and every project file whose summary
its analysis consulted either hashes the same or still summarises to the same digest. When it
holds, the stored findings are used (and the stored summary is offered to its importers); when
it does not, the file is analysed with every rule, the entry rewritten, and only then are the
selected rules and ``noqa`` comments applied, so a new selection never needs re-analysis.

A file whose modification time and size are those recorded is taken to hash the same without
being read; a warm run reads only the files that may hold a ``noqa`` directive.

A module the run will check that another file's check needs summarised is checked there and
then (:data:`mpcheck.project.store.Walker`): its entry is written when its walk is over, so
its own turn, in this process or another ``-j`` worker, takes it from the cache instead of
parsing and walking the file a second time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from mpcheck.diagnostics import Diagnostic
from mpcheck.pipeline import claims
from mpcheck.pipeline.cache import (
    Dependency,
    Entry,
    FileCache,
    Stamp,
    content_hash,
    fingerprint,
    stamp,
)
from mpcheck.pipeline.nested import Nested
from mpcheck.pipeline.one_file import Analysed, Options, analyse_source, might_noqa, suppress
from mpcheck.project import summarise
from mpcheck.project.models import uses_for
from mpcheck.project.store import CYCLE, Dependencies, Lookup, Summaries
from mpcheck.project.summarise import summaries_for
from mpcheck.project.summary import ModuleSummary, digest_of
from mpcheck.ruleset.rule import Rule, all_rules

__all__ = ["check_cached", "forget", "plan", "shared_first", "warnings"]

# The files of the run (absolute paths) and the options each is checked with: a module one
# of them imports is checked when first summarised only if the run checks it, with these
# options (a one-file check must not check everything its file imports).
_planned: Mapping[str, Options] = {}
_token = ""  # the run this process works for (see ``plan``)


class _Run:
    """One process's view of the cache for one set of options: entries, content hashes (each
    file read once per run) and, when imports are followed, the project's summaries."""

    def __init__(self, options: Options, cache_dir: str) -> None:
        self.rules = all_rules()
        settings = {
            "module_half_capable": options.module_half_capable,
            "models_run_in_half": options.models_run_in_half,
            "open_world_premises": options.open_world_premises,
            "max_file_size": options.max_file_size,
            "project_root": options.project_root,
            "target_torch_version": options.target_torch_version,
            "follow_imports": options.follow_imports,
            "source_roots": list(options.source_roots),
            "rules": sorted(r.code for r in self.rules),
        }
        if options.project_root is not None and options.follow_imports != "skip":
            # a cast in any file of the project decides the severity of findings in others
            settings["model_uses"] = uses_for(options.project_root, cache_dir).digest
        modules = {rule.__module__ for rule in self.rules}
        key = fingerprint((sys.modules[m] for m in modules if m in sys.modules), settings)
        self.cache = FileCache(Path(cache_dir), key)
        self._contents: dict[str, str | None] = {}  # by absolute path: no Path per lookup
        self._stamps: dict[str, tuple[Stamp, bool] | None] = {}  # taken before each read
        self.options = options
        self.walked: set[str] = set()  # files checked in this process while summarised
        self.summaries: Summaries | None = None
        if options.project_root is not None and options.follow_imports != "skip":
            root, half = options.project_root, options.module_half_capable
            site = options.follow_imports == "site"
            target = options.target_torch_version
            self.summaries, summariser = summaries_for(
                root,
                half,
                self._cached_summary,
                site=site,
                target_torch=target,
                roots=options.source_roots,
            )
            self._summariser = summariser
            if self.summaries.walker is None:
                self.summaries.walker = self._check_while_summarising

    def content(self, path: str, data: bytes | None = None) -> str | None:
        """The hash of the file's bytes: ``data`` when given (the bytes being checked), else
        read once per run."""
        if data is not None:
            self._contents[path] = content_hash(data)
        elif path not in self._contents:
            self.stamp(path)  # before reading: a later change then shows in the stamp
            try:
                with open(path, "rb") as file:
                    self._contents[path] = content_hash(file.read())
            except OSError:
                self._contents[path] = None
        return self._contents[path]

    def stamp(self, path: str) -> Stamp | None:
        """The file's (modification time, size) as first seen in this run."""
        if path not in self._stamps:
            self._stamps[path] = stamp(path)
        found = self._stamps[path]
        return None if found is None else found[0]

    def trusted_stamp(self, path: str) -> Stamp | None:
        """The stamp to record: None for a file modified too recently to be judged by it."""
        self.stamp(path)
        found = self._stamps[path]
        return found[0] if found is not None and found[1] else None

    def same(self, path: str, content: str, recorded: Stamp | None) -> bool:
        """Whether the file still holds the bytes that hashed to ``content``: by its stamp
        when that is unchanged, else by hashing it."""
        if recorded is not None and self.stamp(path) == recorded:
            return True
        return self.content(path) == content

    def holds(self, entry: Entry, content: str | None) -> bool:
        if content is None or entry.content != content:
            return False
        return self.dependencies_hold(entry)

    def dependencies_hold(self, entry: Entry) -> bool:
        for name, dep in entry.dependencies.items():
            if self.same(name, dep.content, dep.stamp):
                continue
            if dep.digest == CYCLE or self.summaries is None:
                return False
            if self.summaries.digest(Path(name)) != dep.digest:
                return False
        return True

    def _cached_summary(self, path: Path) -> tuple[ModuleSummary | None, Dependencies] | None:
        """A summary kept from an earlier run of ``path``, if its entry still holds, or
        recorded meanwhile by another ``-j`` worker that was walking it (:mod:`.claims`)."""
        kept = self._kept_summary(path)
        if kept is None and not claims.acquire(str(path)):
            kept = self._kept_summary(path)
        return kept

    def _kept_summary(self, path: Path) -> tuple[ModuleSummary | None, Dependencies] | None:
        entry = self.cache.load(path)
        if entry is None or entry.summary is None:
            return None  # no summary stored: its check did not walk it (no torch in it)
        if not entry.checked and not _ours(entry):
            return None  # a summary only the run that wrote it may use
        if not self.same(str(path), entry.content, entry.stamp):
            return None
        if not self.dependencies_hold(entry):
            return None
        summary = ModuleSummary.from_json(entry.summary)
        if summary is None:
            return None
        return summary, {Path(p): d.digest for p, d in entry.dependencies.items()}

    def _check_while_summarising(
        self, path: Path, lookup: Lookup
    ) -> tuple[ModuleSummary, Callable[[Dependencies, bool], None]] | None:
        """Check ``path`` as its summary is asked for, when the run checks it with these
        options and its own check would walk it (declined otherwise: it is summarised)."""
        name = str(path)
        walked = self._walk_to_check(path, lookup)
        if walked is None:
            claims.release(name)  # summarised, not recorded: the file's own check records it
            return None
        data, content, analysed, summary = walked

        def finish(dependencies: Dependencies, kept: bool) -> None:
            analysed.dependencies = dependencies
            if kept:
                self.record(path, data, content, analysed)
                self.walked.add(name)
            elif claims.sharing():
                # not kept as a check (it met an import cycle its own check would not): its
                # summary is recorded for this run's other workers, whose lookups then see
                # what this one's do, and its own check walks it again
                self.record(path, data, content, analysed, checked=False)
            claims.finished(name)

        return summary, finish

    def _walk_to_check(
        self, path: Path, lookup: Lookup
    ) -> tuple[bytes, str | None, Analysed, ModuleSummary] | None:
        """The file's bytes, their hash, its check and its summary, when its own check
        would walk it (see ``_check_while_summarising``)."""
        name = str(path)
        if _planned.get(name) != self.options or name in self.walked:
            return None
        self.stamp(name)  # before reading, as a check does
        try:
            with open(name, "rb") as file:
                data = file.read()
        except OSError:
            return None
        if b"torch" not in data or len(data) > self.options.max_file_size:
            return None  # the summariser does not walk it: neither does this
        link = Nested(path, lookup, self._summariser)
        analysed = analyse_source(data, name, self.rules, self.options, link=link)
        if analysed.summary is None:
            return None  # it failed: its own check will say why, the summariser does the rest
        return data, self.content(name, data), analysed, analysed.summary

    def record(
        self,
        path: Path,
        data: bytes,
        content: str | None,
        analysed: Analysed,
        *,
        checked: bool = True,
    ) -> None:
        """Write the entry of a file just analysed (``checked``: as its own check would)."""
        summary = analysed.summary
        deps = {
            str(p): Dependency(self.content(str(p)) or "", digest, self.trusted_stamp(str(p)))
            for p, digest in analysed.dependencies.items()
        }
        text = None if summary is None else summary.to_json()  # (its digest hashes it)
        self.cache.store(
            path,
            Entry(
                content or "",
                tuple(analysed.diagnostics) if checked else (),
                text,
                None if text is None else digest_of(text),
                deps,
                self.trusted_stamp(str(path)),
                might_noqa(data),
                _token,
                checked,
            ),
        )


_RUNS: dict[tuple[Options, str], _Run] = {}


def _run(options: Options, cache_dir: str) -> _Run:
    key = (options, cache_dir)
    if key not in _RUNS:
        _RUNS[key] = _Run(options, cache_dir)
    return _RUNS[key]


def check_cached(
    filename: str, rules: Sequence[type[Rule]], options: Options
) -> tuple[list[Diagnostic], str]:
    """What :func:`~mpcheck.pipeline.one_file.check_source` gives for the file, from the cache
    when it
    can, and whether it came from there (``"cached"``) or from analysing it (``"analysed"``).
    Raises OSError when the file has to be read and cannot be."""
    assert options.cache_dir is not None
    run = _run(options, options.cache_dir)
    name = os.path.abspath(filename)
    path = Path(name)
    seen = run.stamp(name)  # before reading: a change after it shows next time
    entry = run.cache.load(path)
    if entry is not None and not entry.checked:
        entry = None  # (a summary for this run's lookups only: the file is to be checked)
    if (
        entry is not None
        and not entry.noqa
        and entry.stamp is not None
        and entry.stamp == seen
        and run.dependencies_hold(entry)
    ):  # unchanged, and no directive in it: its bytes are not needed
        found = [replace(d, filename=filename) for d in entry.diagnostics]
        outcome = "analysed" if name in run.walked or _ours(entry) else "cached"
        return suppress(found, b"", filename, rules, options), outcome
    with open(name, "rb") as file:
        data = file.read()
    content = run.content(name, data)
    if not (entry is not None and run.holds(entry, content)) and not claims.acquire(name):
        entry = run.cache.load(path)  # another worker checked it meanwhile
        if entry is not None and not entry.checked:
            entry = None
    if entry is not None and run.holds(entry, content):
        # (its summary is not offered to the project's store: an importer that needs it
        # reads it back through ``_cached_summary``, and a warm run needs none)
        found = [replace(d, filename=filename) for d in entry.diagnostics]
        outcome = "analysed" if name in run.walked or _ours(entry) else "cached"
    else:
        outcome = "analysed"
        analysed = analyse_source(data, filename, run.rules, options)
        found = analysed.diagnostics
        run.record(path, data, content, analysed)
        claims.finished(name)
    return suppress(found, data, filename, rules, options), outcome


def shared_first(least: int) -> list[str]:
    """The planned files at least ``least`` others import (module-level), in the order the
    ``-j`` workers check them before anything else: each after those it imports.

    Each worker keeps its own summaries, so a module many files need (``modeling_utils.py``)
    was walked in every worker. Checked first, each by one worker while the other waits for
    it when it needs it (:mod:`mpcheck.pipeline.claims`), they are walked once and read from the
    cache by the other. The import graph is read once, before the workers fork, and they
    inherit it. Only for a run that will analyse most of its files: when most have an entry
    in the cache, few are analysed and those find the shared summaries there, so reading
    every import list (2 s on transformers) would be most of a warm run's time.
    """
    groups: dict[Options, list[str]] = {}
    for name, options in _planned.items():
        groups.setdefault(options, []).append(name)
    found: list[str] = []
    for options, names in groups.items():
        assert options.cache_dir is not None  # (only such files are planned)
        run = _run(options, options.cache_dir)
        summaries = run.summaries
        if summaries is None:
            continue  # imports are not followed
        if 2 * sum(run.cache.has(Path(name)) for name in names) > len(names):
            continue
        summaries.map_imports(Path(name) for name in names)
        shared = [Path(n) for n in names if summaries.importer_count(Path(n)) >= least]
        found += map(str, summaries.dependency_order(shared, _size))
    return found


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def plan(files: Mapping[str, Options], token: str = "") -> None:
    """The files this process's run will check (absolute paths) and their options, and the
    run's token: an entry another process of the same run wrote (it checked the file while
    summarising it for its own) counts as analysed, not cached."""
    global _planned, _token
    _planned, _token = files, token


def _ours(entry: Entry) -> bool:
    """Written by another process of this run (a file checked while summarised there)."""
    return bool(_token) and entry.run == _token


def forget() -> None:
    """Start a new run: files may have changed since the last one in this process."""
    global _planned, _token
    _RUNS.clear()
    _planned, _token = {}, ""
    summarise.forget()


def warnings() -> list[str]:
    """What went wrong with the cache in this process (e.g. a read-only directory)."""
    return [run.cache.warning for run in _RUNS.values() if run.cache.warning]
