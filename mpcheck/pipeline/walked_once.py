"""A run without the cache checks a module when another file first needs it summarised.

With the cache, :mod:`mpcheck.pipeline.incremental` checks a module of the run as its summary
is first asked for and writes the findings to the cache, so its own turn reads them back
instead of parsing and walking the file again. ``--no-cache`` (and the flake8 plugin's and
API's batch runs) had no such place: a module summarised for an importer was parsed and walked
once silently, for its summary, and again at its own turn, with the rules (on transformers,
a sixth of all parsing). This keeps the findings of such a check in memory, in the process
that made it, until the file's own turn takes them.

A check is kept only where its own turn would have given the same findings: the file is one
the run checks, with the same rules and options, and its walk met no import cycle its own
check would not (the store's ``kept`` flag, as for the cache); any other walk is its summary
only, and the file is checked again at its turn, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

from mpcheck.diagnostics import Diagnostic
from mpcheck.pipeline.nested import Nested
from mpcheck.pipeline.one_file import Options, analyse_source, suppress
from mpcheck.project.store import Dependencies, Lookup, Summaries
from mpcheck.project.summarise import summaries_for
from mpcheck.project.summary import ModuleSummary
from mpcheck.ruleset.rule import Rule, rules_by_code

__all__ = ["plan", "take"]

# A file of the run, by absolute path: the name its check reports, its rules' codes, its options
Planned = tuple[str, tuple[str, ...], Options]

_planned: Mapping[str, Planned] = {}
_done: dict[str, list[Diagnostic]] = {}  # files checked while summarised, not yet taken
_taken: set[str] = set()  # (a file is checked once per run: never while summarised after)


def plan(files: Mapping[str, Planned]) -> None:
    """The files this process's run checks without the cache (absolute path: the filename
    its check reports, its rules, its options); set before the first check, in each worker."""
    global _planned
    _planned = files
    _done.clear()
    _taken.clear()
    for _, _, options in files.values():
        summaries = _summaries(options) if options.cache_dir is None else None
        if summaries is not None and summaries.walker is None:
            summaries.walker = partial(_check_while_summarising, summaries)


def take(name: str) -> list[Diagnostic] | None:
    """The findings of ``name`` (absolute path), after suppression, when it was checked while
    summarised in this process (each handed out once); None: check it now."""
    _taken.add(name)
    return _done.pop(name, None)


def _summaries(options: Options) -> Summaries | None:
    if options.project_root is None or options.follow_imports == "skip":
        return None
    summaries, _ = summaries_for(
        options.project_root,
        options.module_half_capable,
        site=options.follow_imports == "site",
        target_torch=options.target_torch_version,
        roots=options.source_roots,
    )
    return summaries


def _check_while_summarising(
    summaries: Summaries, path: Path, lookup: Lookup
) -> tuple[ModuleSummary, Callable[[Dependencies, bool], None]] | None:
    """Check ``path`` as ``summaries`` is asked for its summary, when the run checks it, its
    own check would walk it and look names up in the same summaries (a nested project's
    configuration may make another store); declined otherwise: it is summarised, and
    checked at its turn."""
    name = str(path)
    planned = _planned.get(name)
    if planned is None or name in _taken or name in _done:
        return None
    filename, codes, options = planned
    if options.cache_dir is not None or _summaries(options) is not summaries:
        return None  # (the cache's own walker checks the files it has)
    try:
        with open(name, "rb") as file:
            data = file.read()
    except OSError:
        return None
    if b"torch" not in data or len(data) > options.max_file_size:
        return None  # the summariser does not walk it: neither does this
    _, summariser = summaries_for(
        options.project_root or "",
        options.module_half_capable,
        site=options.follow_imports == "site",
        target_torch=options.target_torch_version,
        roots=options.source_roots,
    )
    by_code = rules_by_code()
    rules: Sequence[type[Rule]] = tuple(by_code[c] for c in codes if c in by_code)
    link = Nested(path, lookup, summariser)
    analysed = analyse_source(data, filename, rules, options, link=link)
    if analysed.summary is None:
        return None  # it failed: its own check will say why, the summariser does the rest

    def finish(_dependencies: Dependencies, kept: bool) -> None:
        if kept:
            _done[name] = suppress(analysed.diagnostics, data, filename, rules, options)

    return analysed.summary, finish
