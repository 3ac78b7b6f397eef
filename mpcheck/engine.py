"""One file in, diagnostics out: prefilter, parse once, analyse, report, suppress.

Positions are the expensive libcst metadata, so they are computed only for
files that have something to report, and only then.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from mpcheck import noqa
from mpcheck.diagnostics import Diagnostic, Edit, Fix, Position, Related, Severity
from mpcheck.infer.analysis import FileAnalysis
from mpcheck.names import ImportTable
from mpcheck.rule import Report, Rule, RuleContext
from mpcheck.sites import CallSite, ClassSite, FunctionSite, ReturnSite, SetItemSite
from mpcheck.training import TrainingSite

# A file that mentions none of these cannot hold a finding: it is not parsed.
PREFILTER = re.compile(rb"torch|flash_attn|xformers|accelerate|apex")
_LINE_REF = re.compile("\x00(\\d+)\x00")

# CPython refuses more than 200 nested brackets; libcst's native parser overflows its stack
# (a segfault, not an exception) somewhere above 1,000. Files nested deeper than CPython
# allows are rejected with CPython's message before libcst sees them.
MAX_NESTING = 200
_BRACKETS = b"()[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = [0] * 256
for _open, _close in (b"()", b"[]", b"{}"):
    _STEP[_open], _STEP[_close] = 1, -1

INVALID_SYNTAX = ("MPC001", "invalid-syntax")
INTERNAL_ERROR = ("MPC002", "internal-error")


@dataclass(frozen=True)
class Options:
    """Analysis switches that come from configuration."""

    module_half_capable: bool = True
    unused_noqa: bool = True


@dataclass
class _Dispatch:
    """Fans the analysis' sites out to the rules that asked for them."""

    rules: Sequence[Rule]
    calls: list[Rule] = field(init=False)
    setitems: list[Rule] = field(init=False)
    classes: list[Rule] = field(init=False)
    functions: list[Rule] = field(init=False)
    training: list[Rule] = field(init=False)
    returns: list[Rule] = field(init=False)

    def __post_init__(self) -> None:
        self.calls = [r for r in self.rules if "check_call" in r.hooks()]
        self.setitems = [r for r in self.rules if "check_setitem" in r.hooks()]
        self.classes = [r for r in self.rules if "check_class" in r.hooks()]
        self.functions = [r for r in self.rules if "check_function" in r.hooks()]
        self.training = [r for r in self.rules if "check_training" in r.hooks()]
        self.returns = [r for r in self.rules if "check_return" in r.hooks()]

    @property
    def wants_calls(self) -> bool:
        return bool(self.calls)

    @property
    def wants_setitems(self) -> bool:
        return bool(self.setitems)

    @property
    def wants_classes(self) -> bool:
        return bool(self.classes)

    def on_call(self, site: CallSite) -> None:
        for rule in self.calls:
            rule.check_call(site)

    def on_setitem(self, site: SetItemSite) -> None:
        for rule in self.setitems:
            rule.check_setitem(site)

    def on_class(self, site: ClassSite) -> None:
        for rule in self.classes:
            rule.check_class(site)

    @property
    def wants_functions(self) -> bool:
        return bool(self.functions)

    @property
    def wants_training(self) -> bool:
        return bool(self.training)

    def on_training(self, site: TrainingSite) -> None:
        for rule in self.training:
            rule.check_training(site)

    def on_function(self, site: FunctionSite) -> None:
        for rule in self.functions:
            rule.check_function(site)

    @property
    def wants_returns(self) -> bool:
        return bool(self.returns)

    def on_return(self, site: ReturnSite) -> None:
        for rule in self.returns:
            rule.check_return(site)


def check_source(
    source: bytes | str,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options = Options(),
) -> list[Diagnostic]:
    """All diagnostics for one file, suppressed ones included (marked ``suppressed``)."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    if not PREFILTER.search(data):
        diagnostics: list[Diagnostic] = []
    else:
        diagnostics = _analyse(data, filename, rules, options)
    if not diagnostics and b"noqa" not in data:
        return []
    if diagnostics and diagnostics[0].code == INVALID_SYNTAX[0]:
        return diagnostics
    text = data.decode("utf-8", errors="replace")
    sup = noqa.scan(text)
    enabled = {r.code for r in rules} | {INVALID_SYNTAX[0], INTERNAL_ERROR[0]}
    marked = noqa.apply(
        diagnostics,
        sup,
        filename=filename,
        unused_noqa=options.unused_noqa and "MPC100" in enabled,
        enabled_codes=enabled,
    )
    return sorted(marked, key=Diagnostic.sort_key)


def _syntax_error(data: bytes, exc: cst.ParserSyntaxError) -> tuple[str, Position]:
    """CPython's message and position when it agrees the file is invalid.

    libcst's parser often reports the token after the real mistake; CPython's
    own error is the one users recognise. Only paid for files that fail.
    """
    try:
        compile(data, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        if err.lineno:
            return f"SyntaxError: {err.msg}", Position(err.lineno, max(err.offset or 1, 1))
    except (ValueError, RecursionError, MemoryError):
        pass
    return f"SyntaxError: {exc.message}", Position(exc.editor_line, exc.editor_column)


def _too_deep(data: bytes) -> tuple[str, Position] | None:
    """CPython's error for a file nested deeper than it allows, which would crash libcst.

    Counting brackets inside strings and comments overestimates the depth, so a file over
    the limit by that count is compiled to be sure; almost every file never gets that far.
    """
    brackets = data.translate(None, _NOT_BRACKETS)
    if len(brackets) <= 2 * MAX_NESTING:
        return None
    # clamped at 0, so closing brackets in a string cannot hide the nesting that follows
    depths = accumulate(map(_STEP.__getitem__, brackets), lambda a, b: max(a + b, 0))
    if max(depths) <= MAX_NESTING:
        return None
    try:
        compile(data, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return f"SyntaxError: {err.msg}", Position(err.lineno or 1, max(err.offset or 1, 1))
    except (ValueError, RecursionError, MemoryError):
        return "the file is nested too deeply to parse", Position(1, 1)
    return None


def _analyse(
    data: bytes, filename: str, rules: Sequence[type[Rule]], options: Options
) -> list[Diagnostic]:
    deep = _too_deep(data)
    if deep is not None:
        return [_file_level(INVALID_SYNTAX, deep[0], filename, deep[1])]
    try:
        module = cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        message, pos = _syntax_error(data, exc)
        return [_file_level(INVALID_SYNTAX, message, filename, pos)]
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        message = f"cannot decode the file: {exc}"
        return [_file_level(INVALID_SYNTAX, message, filename, Position(1, 1))]
    except RecursionError:
        message = "the file is nested too deeply to parse"
        return [_file_level(INVALID_SYNTAX, message, filename, Position(1, 1))]

    try:
        return _run_rules(module, data, filename, rules, options)
    except RecursionError:
        message = "the file is nested too deeply to analyse; it was skipped"
        return [_file_level(INTERNAL_ERROR, message, filename, Position(1, 1))]
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop a run
        message = f"mpcheck failed on this file ({type(exc).__name__}: {exc}); please report it"
        return [_file_level(INTERNAL_ERROR, message, filename, Position(1, 1))]


def _run_rules(
    module: cst.Module,
    source: bytes,
    filename: str,
    rules: Sequence[type[Rule]],
    options: Options,
) -> list[Diagnostic]:
    reports: list[Report] = []
    imports = ImportTable.of(module)
    ctx = RuleContext(module, filename, reports.append, imports=imports)
    instances = [rule(ctx) for rule in rules]
    FileAnalysis(
        module,
        imports,
        _Dispatch(instances),
        module_half_capable=options.module_half_capable,
        source=source,
    ).run()
    for instance in instances:
        instance.finish()
    if not reports:
        return []
    return _to_diagnostics(module, filename, _unique(reports), ctx.line_refs)


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
    module: cst.Module, filename: str, reports: Sequence[Report], refs: Sequence[cst.CSTNode]
) -> list[Diagnostic]:
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

    def span(node: cst.CSTNode) -> tuple[Position, Position]:
        r: CodeRange = positions[node]
        return Position(r.start.line, r.start.column + 1), Position(r.end.line, r.end.column + 1)

    def fill(message: str) -> str:
        return _LINE_REF.sub(
            lambda m: f"line {positions[refs[int(m.group(1))]].start.line}", message
        )

    out = []
    for report in reports:
        start, end = span(report.node)
        related = tuple(Related(fill(text), *span(node)) for node, text in report.related)
        fix = None
        if report.fix is not None:
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


def _file_level(
    code_name: tuple[str, str], message: str, filename: str, pos: Position
) -> Diagnostic:
    code, name = code_name
    end = Position(pos.row, pos.column + 1)
    return Diagnostic(code, name, message, Severity.ERROR, filename, pos, end, noqa_row=pos.row)
