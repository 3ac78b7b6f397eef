"""What ``mpcheck check`` prints: the report in the chosen format (and ``-o``/``--extra-output``
files), the summary line and ``--statistics``."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path

from mpcheck import __version__
from mpcheck.cli.args import EXIT_CLEAN, EXIT_FINDINGS, UsageError
from mpcheck.cli.terminal import colorize, printable, use_color
from mpcheck.diagnostics import Diagnostic, RuleInfo, Severity
from mpcheck.files.source import SourceError, SourceFile
from mpcheck.output.reporters import FORMATS, render
from mpcheck.output.reporters.base import ReportContext
from mpcheck.ruleset.rule import Rule

# Imported where used, not here: a one-file check loads none of fixes (difflib, tempfile),
# notebooks, tracebacks or the step summary (tests/test_startup_imports.py holds this).


def write_stdout(text: str) -> None:
    """A file name's undecodable bytes go out as the bytes they were, whatever the locale;
    a character the output's encoding lacks (``PYTHONIOENCODING=ascii``) as its escape."""
    if sys.stdout is None:  # ``>&-``: Python found no standard output at start-up
        raise UsageError("standard output is closed; redirect it, or write the report with -o")
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a replaced stream (tests, embedding): it takes text
        sys.stdout.write(text)
    else:
        buffer.write(text.encode(sys.stdout.encoding or "utf-8", _ESCAPE))
        buffer.flush()


def _escape(exc: UnicodeError) -> tuple[str | bytes, int]:
    """``surrogateescape`` for a name's undecodable bytes, ``backslashreplace`` otherwise."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    chunk = exc.object[exc.start : exc.end]
    if all("\udc80" <= c <= "\udcff" for c in chunk):
        return bytes(ord(c) - 0xDC00 for c in chunk), exc.end
    return codecs.backslashreplace_errors(exc)


_ESCAPE = "mpcheck-escape"
codecs.register_error(_ESCAPE, _escape)


def display_path(filename: str, cwd: Path) -> str:
    try:
        return Path(filename).relative_to(cwd).as_posix()
    except ValueError:
        return Path(filename).as_posix().lstrip("/")


def emit(
    args: argparse.Namespace,
    diagnostics: list[Diagnostic],
    rules: Sequence[type[Rule]],
    cwd: Path,
    fail_on: str = "warning",
) -> int:
    shown = [d for d in diagnostics if not d.suppressed]
    _lines.cache_clear()  # files may have changed since an earlier run in this process
    if args.statistics:
        text = _statistics(shown, rules, as_json=args.output_format == "json")
    else:
        text = render(args.output_format, diagnostics, _report_context(rules, cwd))
        if args.output_format in ("full", "concise", "grouped"):
            text = printable(text)
            if not args.quiet:
                text += ("\n" if text else "") + _summary(shown)
    if args.output_file is not None:
        _write_report(args.output_file, text)
    else:
        text_format = args.output_format in ("full", "concise", "grouped")
        if text_format and use_color(args.color, sys.stdout, os.environ):
            text = colorize(text)
        write_stdout(text)
    for fmt, path in extra_outputs(args.extra_output):
        _write_report(path, render(fmt, diagnostics, _report_context(rules, cwd)))
    # GitHub Actions: a per-rule table on the run's page ($GITHUB_STEP_SUMMARY, if set).
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        from mpcheck.output.job_summary import write_step_summary

        write_step_summary(diagnostics, _RuleInfos(rules), root=cwd)
    failing = [d for d in shown if fail_on == "warning" or d.severity is Severity.ERROR]
    return EXIT_FINDINGS if failing and not args.exit_zero else EXIT_CLEAN


def _report_context(rules: Sequence[type[Rule]], cwd: Path) -> ReportContext:
    return ReportContext(
        root=cwd,
        rules=_RuleInfos(rules),
        source_lines=_lines,
        tool_version=__version__,
    )


def extra_outputs(values: Sequence[str]) -> list[tuple[str, Path]]:
    """``--extra-output sarif:out.sarif``: one run, several reports (the Action's SARIF)."""
    out = []
    for value in values:
        fmt, sep, path = value.partition(":")
        if not sep or not path or fmt not in FORMATS:
            raise UsageError(
                f"--extra-output: expected FORMAT:FILE with FORMAT one of {', '.join(FORMATS)}, "
                f"got {value!r}"
            )
        out.append((fmt, Path(path)))
    return out


def _write_report(path: Path, text: str) -> None:
    """In one step: a failed run never leaves a partial report."""
    from mpcheck.output.fixes import write_atomically

    try:
        write_atomically(path, text.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc


class _RuleInfos(Mapping[str, RuleInfo]):
    """Each rule's info by code, built when a reporter reads it: building one renders the
    rule's documentation, which only SARIF prints."""

    def __init__(self, rules: Sequence[type[Rule]]) -> None:
        self._rules = {r.code: r for r in rules}
        self._infos: dict[str, RuleInfo] = {}

    def __getitem__(self, code: str) -> RuleInfo:
        if code not in self._infos:
            self._infos[code] = self._rules[code].info()
        return self._infos[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)


def _summary(shown: Sequence[Diagnostic]) -> str:
    if not shown:
        return "All checks passed!\n"
    from mpcheck.output.fixes import applicable

    fixable = sum(1 for d in shown if applicable(d, unsafe=False))
    hidden = sum(1 for d in shown if d.fix is not None) - fixable
    errors = sum(1 for d in shown if d.severity is Severity.ERROR)
    counts = [_count(errors, "error"), _count(len(shown) - errors, "warning")]
    extra = f"\n[*] {fixable} fixable with the `--fix` option." if fixable else ""
    if hidden:
        s = "fix" if hidden == 1 else "fixes"
        extra += f"\n({hidden} hidden {s} can be enabled with the `--unsafe-fixes` option.)"
    return f"Found {' and '.join(c for c in counts if c)}.{extra}\n"


def _count(n: int, noun: str) -> str:
    return "" if n == 0 else f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _statistics(shown: Sequence[Diagnostic], rules: Sequence[type[Rule]], as_json: bool) -> str:
    """Findings per rule, most frequent first, with the rule's severity and how many of its
    findings ``--fix`` would fix (``[*]``: all of them; ``[-]``: some)."""
    from mpcheck.output.fixes import applicable

    names = {r.code: r.name for r in rules}
    by_code: dict[str, list[Diagnostic]] = {}
    for d in shown:
        by_code.setdefault(d.code, []).append(d)
    rows: list[dict[str, str | int]] = []
    lines = []
    for code, found in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        name, severity = names.get(code, found[0].name), str(found[0].severity)
        safe = sum(1 for d in found if applicable(d, unsafe=False))
        unsafe = sum(1 for d in found if d.fix is not None) - safe
        row: dict[str, str | int] = {"code": code, "name": name, "count": len(found)}
        rows.append(row | {"severity": severity, "fixable": safe, "unsafe_fixable": unsafe})
        mark = "[*]" if safe == len(found) else "[-]" if safe else "   "
        lines.append(f"{len(found):>5}\t{code}\t{severity:<7}\t{mark} {name}\n")
    return json.dumps(rows, indent=2) + "\n" if as_json else "".join(lines)


@cache
def _lines(filename: str) -> list[str]:
    """The file's lines as positions count them (for the source excerpt under a finding)."""
    try:
        return SourceFile.decode(Path(filename).read_bytes()).lines
    except (OSError, SourceError):
        return []
