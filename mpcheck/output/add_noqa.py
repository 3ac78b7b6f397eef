"""``--add-noqa``: suppress every current finding where it is, to adopt mpcheck on a codebase
that already has some, and then hold the line on new code.

Each directive goes on the last row of the finding's logical line, where ``noqa`` is read
(after a closing bracket or a multi-line string, never inside one); an existing
``# noqa: CODES`` gets the missing codes, a blanket ``# noqa`` is left alone. Only those bytes
change: the file's encoding, BOM and line endings are kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from mpcheck.codes import INTERNAL_ERROR, INVALID_SYNTAX, UNUSED_NOQA
from mpcheck.diagnostics import Diagnostic
from mpcheck.files.source import SourceFile
from mpcheck.output import noqa

__all__ = ["with_noqa", "with_noqa_text"]

# Findings a directive cannot or should not silence: the file did not parse or was not
# analysed (a directive would hide that forever), and unused directives themselves.
NOT_SUPPRESSIBLE = frozenset({INVALID_SYNTAX.code, INTERNAL_ERROR.code, UNUSED_NOQA.code})


def with_noqa(data: bytes, diagnostics: Iterable[Diagnostic]) -> tuple[bytes, int]:
    """``data`` with a directive for each unsuppressed finding, and how many were added.

    Notebook findings (``cell`` set) are left out: ``mpcheck.files.notebook.with_noqa_notebook``
    writes those into their cells.
    """
    source = SourceFile.decode(data)
    text, added = _with_noqa(source, [d for d in diagnostics if not d.cell])
    return (source.encode(text) if text != source.text else data), added


def with_noqa_text(text: str, diagnostics: Iterable[Diagnostic]) -> tuple[str, int]:
    """``text`` (one file's, or one notebook cell's) with the directives, and how many."""
    return _with_noqa(SourceFile.from_text(text), list(diagnostics))


def _with_noqa(source: SourceFile, diagnostics: Iterable[Diagnostic]) -> tuple[str, int]:
    sup = noqa.scan(source.text)
    wanted: dict[int, list[str]] = {}
    for d in diagnostics:
        if d.suppressed or d.code in NOT_SUPPRESSIBLE:
            continue
        row = noqa.noqa_row_for(d.start.row, sup)
        codes = wanted.setdefault(row, [])
        if d.code not in codes:
            codes.append(d.code)
    existing = {c.row: c for c in sup.comments}
    text = source.text
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in ``text``
    added = 0
    for row, codes in sorted(wanted.items()):
        comment = existing.get(row)
        line_start = source.line_starts[row - 1]
        if comment is not None:
            if comment.codes is None:
                continue  # a blanket noqa already covers everything
            missing = [c for c in sorted(codes) if not comment.matches(c)]
            if not missing:
                continue
            start = line_start + comment.start_col - 1
            end = line_start + comment.end_col - 1
            edits.append((start, end, f"# noqa: {', '.join([*comment.codes, *missing])}"))
            added += len(missing)
            continue
        line = source.lines[row - 1]
        end = line_start + len(line)
        body = line.rstrip()
        edits.append((line_start + len(body), end, f"  # noqa: {', '.join(sorted(codes))}"))
        added += len(codes)
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text, added
