"""One file in, diagnostics out: prefilter, parse once, analyse, report, suppress.

Positions are the expensive libcst metadata, so they are computed only for
files that have something to report, and only then.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from mpcheck.codes import INTERNAL_ERROR, INVALID_SYNTAX, UNUSED_NOQA
from mpcheck.diagnostics import Diagnostic, Edit, Fix, Position, Related, Severity
from mpcheck.engine.analysis import FileAnalysis
from mpcheck.files.parsing import Unparsable, parse
from mpcheck.files.source import SourceError, SourceFile
from mpcheck.output.fix_names import Scopes, unbound
from mpcheck.pipeline.dispatch import Dispatch
from mpcheck.pipeline.readings import PremiseReadings
from mpcheck.project.names import ImportTable
from mpcheck.ruleset.rule import Report, Rule, RuleContext
from mpcheck.settings.config import DEFAULT_MAX_FILE_SIZE

if TYPE_CHECKING:
    from mpcheck.project.models import ModelUses
    from mpcheck.project.store import Dependencies, Symbol
    from mpcheck.project.summary import ModuleSummary, Place
    from mpcheck.settings.config import Settings

# A file that mentions none of these cannot hold a finding: it is not parsed.
PREFILTER = re.compile(rb"torch|flash_attn|xformers|accelerate|apex")
_LINE_REF = re.compile("\x00(\\d+)\x00")
# A ``noqa`` comment that may name one of our codes (a superset: MPC100 reports only those).
_MPC_NOQA = re.compile(rb"noqa[^\r\n]*mpc", re.IGNORECASE)


@dataclass(frozen=True)
class Options:
    """Analysis switches that come from configuration."""

    module_half_capable: bool = True
    # ``models-run-in-half``: the project says its users run every module in half (evidence)
    models_run_in_half: bool = False
    # ``open-world-premises``: premises resting only on a half path the records cannot
    # follow are reported too (:attr:`mpcheck.engine.evidence.HalfEvidence.unseen`)
    open_world_premises: bool = False
    unused_noqa: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    # Where the project's modules are imported from (the run's root): imports of other
    # project files are followed through their summaries. None: each file alone.
    project_root: str | None = None
    # "site": imports of installed libraries are followed too (summarised like project
    # files); "normal": the project's own files only, as mypy and pyright do by default.
    follow_imports: str = "normal"
    # The persistent cache's directory (None: no cache); see :mod:`mpcheck.pipeline.incremental`.
    cache_dir: str | None = None
    # The oldest torch the project supports, (major, minor); None: the latest.
    target_torch_version: tuple[int, int] | None = None
    # More directories imports resolve from (``src`` in the configuration).
    source_roots: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        project_root: str | None,
        *,
        cache_dir: str | None = None,
        unused_noqa: bool = True,
        module_half_capable: bool | None = None,
    ) -> Options:
        """The options ``settings`` give: one constructor for the CLI, the flake8 plugin and
        the server, so no client forgets a setting (the server once dropped ``src``).

        ``module_half_capable`` overrides the setting (flake8's own option) when given."""
        half = settings.module_half_capable if module_half_capable is None else module_half_capable
        return cls(
            module_half_capable=half,
            models_run_in_half=half and settings.models_run_in_half,
            open_world_premises=settings.open_world_premises,
            unused_noqa=unused_noqa,
            max_file_size=settings.max_file_size,
            project_root=project_root,
            follow_imports=settings.follow_imports,
            cache_dir=cache_dir,
            target_torch_version=settings.target_torch_version,
            source_roots=tuple(map(str, settings.source_roots)),
        )


class ProjectLink(Protocol):
    """A check's view of the project (:class:`mpcheck.project.summarise.ProjectSession`):
    the lookups its walk makes, then the walk's summary and what it consulted."""

    def lookup(self, dotted: str, level: int) -> Symbol | None: ...

    def end(self, walk: FileAnalysis | None) -> tuple[ModuleSummary | None, Dependencies]: ...


@dataclass
class Analysed:
    """What analysing a file gives before selection and suppression: its findings, and for
    the project phase its summary and the summaries it consulted."""

    diagnostics: list[Diagnostic]
    summary: ModuleSummary | None = None
    dependencies: Dependencies = field(default_factory=dict)


def check_source(
    source: bytes | str,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options = Options(),
) -> list[Diagnostic]:
    """All diagnostics for one file, suppressed ones included (marked ``suppressed``)."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    found = analyse_source(data, filename, rules, options).diagnostics
    return suppress(found, data, filename, rules, options)


def analyse_source(
    data: bytes,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options = Options(),
    *,
    link: ProjectLink | None = None,
) -> Analysed:
    """The findings of ``rules`` on one file, before ``noqa`` is applied. ``link``: the
    project as the walk sees it (default: a session of ``options.project_root``'s project)."""
    if len(data) > options.max_file_size:
        message = (
            f"the file is {_size(len(data))}, above max-file-size ({_size(options.max_file_size)})"
            "; it was not analysed (raise max-file-size to check it)"
        )
        return Analysed([_file_level(INTERNAL_ERROR, message, filename, Position(1, 1))])
    if not PREFILTER.search(data):
        return Analysed(_undecodable(data, filename))
    return _analyse(data, filename, rules, options, link)


def suppress(
    diagnostics: Sequence[Diagnostic],
    data: bytes,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options = Options(),
) -> list[Diagnostic]:
    """The findings of the selected ``rules``, marked where a ``noqa`` comment suppresses
    them, with unused ``noqa`` comments reported (MPC100)."""
    enabled = {r.code for r in rules} | {INVALID_SYNTAX.code, INTERNAL_ERROR.code}
    selected = [d for d in diagnostics if d.code in enabled]
    unused_noqa = options.unused_noqa and UNUSED_NOQA.code in enabled
    if not might_noqa(data):  # (the cache passes no bytes for a file it knows has none)
        return sorted(selected, key=Diagnostic.sort_key)  # no directive: nothing to scan for
    if not selected and not (unused_noqa and _MPC_NOQA.search(data)):
        return []  # nothing to suppress, and no directive naming our codes to find unused
    if selected and selected[0].code == INVALID_SYNTAX.code:
        return selected
    from mpcheck.output import noqa  # only files with a directive pay for tokenizing

    text = data.decode("utf-8", errors="replace")
    sup = noqa.scan(text)
    marked = noqa.apply(
        selected,
        sup,
        filename=filename,
        unused_noqa=unused_noqa,
        enabled_codes=enabled,
    )
    return sorted(marked, key=Diagnostic.sort_key)


def might_noqa(data: bytes) -> bool:
    """Whether the bytes hold ``noqa`` in any case: a directive may be among them."""
    return b"noqa" in data.lower()  # (bytes.lower is ASCII-only, and many times a regex's speed)


def _undecodable(data: bytes, filename: str) -> list[Diagnostic]:
    """A file the prefilter skips must still be readable Python: say so when it is not."""
    if data.isascii():
        return []
    try:
        SourceFile.decode(data)
    except SourceError as exc:
        return [_file_level(INVALID_SYNTAX, str(exc), filename, Position(1, 1))]
    return []


def _size(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB" if n >= 1024**2 else f"{n / 1024:.0f} KiB"


def _analyse(
    data: bytes,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options,
    link: ProjectLink | None,
) -> Analysed:
    parsed = parse(data)
    if isinstance(parsed, Unparsable):
        code = INVALID_SYNTAX if parsed.syntax else INTERNAL_ERROR
        return Analysed([_file_level(code, parsed.message, filename, parsed.position)])
    try:
        return _run_rules(parsed, data, filename, rules, options, link)
    except RecursionError:
        message = "the file is nested too deeply to analyse; it was skipped"
        return Analysed([_file_level(INTERNAL_ERROR, message, filename, Position(1, 1))])
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop a run
        message = f"mpcheck failed on this file ({_described(exc)}); please report it"
        return Analysed([_file_level(INTERNAL_ERROR, message, filename, Position(1, 1))])


def _described(exc: BaseException) -> str:
    """``Type: message`` of an error caught at the file's guard, which must not raise
    itself: some errors fail to render (a libcst parser error about a snippet the engine
    parsed computes its context from lines it does not have)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - the guard reports, whatever the error's own __str__ does
        text = f"{type(exc).__name__} raised while describing itself"
    return f"{type(exc).__name__}: {text}"


def _run_rules(
    module: cst.Module,
    source: bytes,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options,
    link: ProjectLink | None,
) -> Analysed:
    reports: list[Report] = []
    walk: list[FileAnalysis] = []  # (built below; told of the first finding)

    def report(found: Report) -> None:
        if not reports and walk:
            walk[0].found()  # (:meth:`~mpcheck.engine.base.Walk.found`)
        reports.append(found)

    imports = ImportTable.of(module)
    ctx = RuleContext(
        module,
        filename,
        report,
        imports=imports,
        target_torch=options.target_torch_version,
    )
    instances = [rule(ctx) for rule in rules]
    session = link if link is not None else _project(filename, options)
    dispatch = Dispatch(instances)
    readings = PremiseReadings(rules, ctx)  # (regions only CUDA runs, read again as off)
    analysis = FileAnalysis(
        module,
        imports,
        dispatch,
        module_half_capable=options.module_half_capable,
        half_setting=options.models_run_in_half,
        open_world=options.open_world_premises,
        source=source,
        project=None if session is None else session.lookup,
        target_torch=options.target_torch_version,
        uses=_uses(filename, source, options, getattr(session, "buffers", None)),
        readings=readings,
    )
    walk.append(analysis)
    try:
        try:
            analysis.run()
        except BaseException:
            if session is not None:
                session.end(None)
            raise
        done = Analysed([])
        if session is not None:
            done.summary, done.dependencies = session.end(analysis)
        dispatch.finish()
        reports.extend(readings.added(reports))
        for code, exc in readings.failed().items():
            dispatch.failed.setdefault(code, exc)
        if reports:
            root = options.project_root
            # (a call pointed elsewhere for its own reasons first, then the facts' origins)
            found = analysis.decided_at(_reported_nodes(reports))
            elsewhere = _elsewhere({**found, **analysis.elsewhere}, root)
            decided = _elsewhere(found, root)
            done.diagnostics = _to_diagnostics(
                module, filename, _unique(reports), ctx.line_refs, elsewhere, source, decided
            )
        done.diagnostics += dispatch.failures(filename)
        return done
    finally:
        analysis.release()


def _reported_nodes(reports: Sequence[Report]) -> Iterator[cst.CSTNode]:
    """The nodes a finding shows: where it is reported, and its related locations."""
    for report in reports:
        yield report.node
        yield from (node for node, _ in report.related)


def _elsewhere(places: Mapping[cst.CSTNode, Place], root: str | None) -> dict[cst.CSTNode, Related]:
    """For a call whose result's dtype was decided in another file: that place, as a
    related location in that file."""
    out = {}
    for node, place in places.items():
        where = Position(place.line, place.column)
        path = os.path.join(root, place.path) if root else place.path
        end = Position(place.line, place.column + 1)
        out[node] = Related(_unplaced(place), where, end, path)
    return out


def _unplaced(place: Place) -> str:
    """A place's words without its own location: a note shown at ``models.py:396`` need not
    end "(models.py:396)" (the message quoting the same words does)."""
    for spot in (f"{place.path}:{place.line}", f"line {place.line}"):
        for tail in (f" ({spot})", f" at {spot}"):
            if place.text.endswith(tail):
                return place.text.removesuffix(tail)
    return place.text


def _uses(
    filename: str, source: bytes, options: Options, buffers: Mapping[str, bytes] | None = None
) -> ModelUses:
    """Where the project makes its models half (:mod:`mpcheck.project.models`): the whole
    project's records when it has a root (the cached ones a whole run made), else this
    file's own; asked about this file's classes."""
    from mpcheck.project.models import module_of, uses_for, uses_of_sources

    root = options.project_root
    if root is not None and filename != "-" and options.follow_imports != "skip":
        absolute, top = os.path.abspath(filename), os.path.abspath(root)
        if absolute.startswith(os.path.join(top, "")):
            shown = os.path.relpath(absolute, top).replace(os.sep, "/")
            return uses_for(root, options.cache_dir, buffers).at(module_of(shown))
    return uses_of_sources({filename: source}, alone=True).at(module_of(filename))


def _project(filename: str, options: Options) -> ProjectLink | None:
    """The check of ``filename`` against the files it imports (loaded only when used)."""
    if options.project_root is None or filename == "-" or options.follow_imports == "skip":
        return None
    from mpcheck.project.summarise import ProjectSession

    site = options.follow_imports == "site"
    return ProjectSession(
        options.project_root,
        filename,
        options.module_half_capable,
        site=site,
        target_torch=options.target_torch_version,
        roots=options.source_roots,
    )


def _unique(reports: Iterable[Report]) -> list[Report]:
    seen: set[tuple[str, int]] = set()
    out = []
    for report in reports:
        key = (report.rule.code, id(report.node))
        if key not in seen:
            seen.add(key)
            out.append(report)
    return out


def _to_diagnostics(
    module: cst.Module,
    filename: str,
    reports: Sequence[Report],
    refs: Sequence[cst.CSTNode],
    elsewhere: Mapping[cst.CSTNode, Related],
    source: bytes | None = None,
    decided: Mapping[cst.CSTNode, Related] | None = None,
) -> list[Diagnostic]:
    """``decided``: the nodes whose facts' dtypes were decided in another file; a finding at
    one of them (``torch.empty`` of another file's cache, reported where it is made) names
    that file too."""
    # positions are only paid for by files with something to report: imported here, too
    from mpcheck.files.positions import positions as place

    wanted = [r.node for r in reports] + list(refs)
    for report in reports:
        wanted += (node for node, _ in report.related)
        wanted += (e.node for e in report.fix.edits) if report.fix is not None else ()
    positions = place(module, wanted, _text(source))

    def span(node: cst.CSTNode) -> tuple[Position, Position]:
        r = positions[node]
        return Position(r.start.line, r.start.column + 1), Position(r.end.line, r.end.column + 1)

    def fill(message: str) -> str:
        return _LINE_REF.sub(
            lambda m: f"line {positions[refs[int(m.group(1))]].start.line}", message
        )

    scopes = Scopes(module)
    out = []
    for report in reports:
        start, end = span(report.node)
        related = tuple(
            found
            for node, text in report.related
            # (a node pointed at another file with no words of its own shows that file only)
            for found in (Related(fill(text), *span(node)) if text else None, elsewhere.get(node))
            if found is not None
        )
        origin = (decided or {}).get(report.node)
        if origin is not None and origin not in related:
            related = (origin, *related)
        fix = None
        if report.fix is not None and not any(
            unbound(e.code, e.node, scopes.of, scopes.path) for e in report.fix.edits
        ):
            edits = tuple(Edit(e.code, *span(e.node)) for e in report.fix.edits)
            fix = Fix(fill(report.fix.message), edits, report.fix.applicability)
        rule = report.rule
        out.append(
            Diagnostic(
                rule.code,
                rule.name,
                fill(report.message),
                report.severity or rule.severity,
                filename,
                start,
                end,
                related,
                fix,
                noqa_row=start.row,
            )
        )
    return out


def _text(source: bytes | None) -> str | None:
    """The text positions count in (as :class:`SourceFile` decodes it), when it decodes."""
    if source is None:
        return None
    try:
        return SourceFile.decode(source).text
    except SourceError:
        return None


def _file_level(
    code_name: tuple[str, str], message: str, filename: str, pos: Position
) -> Diagnostic:
    code, name = code_name
    end = Position(pos.row, pos.column + 1)
    return Diagnostic(code, name, message, Severity.ERROR, filename, pos, end, noqa_row=pos.row)
