"""``rdjson``: reviewdog's Diagnostic Format, for review comments and suggested changes.

reviewdog counts columns in UTF-8 bytes, so character columns are converted using the
source text when it is available (and passed through unchanged when it is not).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpcheck.diagnostics import Diagnostic, Position, Severity

from .base import (
    HOMEPAGE,
    TOOL_NAME,
    ReportContext,
    display_path,
    in_file,
    json_text,
    source_line,
    visible,
)

SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING"}


def _position(position: Position, line: str | None) -> dict[str, int]:
    column = position.column
    if line is not None:
        prefix = line[: column - 1]
        column += len(prefix.encode("utf-8")) - len(prefix)
    return {"line": position.row, "column": column}


def render_rdjson(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """One rdjson document with every visible finding."""

    def span(start: Position, end: Position, filename: str) -> dict[str, Any]:
        return {
            "start": _position(start, source_line(ctx, filename, start.row)),
            "end": _position(end, source_line(ctx, filename, end.row)),
        }

    entries = []
    # notebooks: on the file's own lines, and no suggestion (a cell edit is no JSON edit)
    for d in visible(in_file(d, ctx) for d in diagnostics):
        path = display_path(d.filename, ctx.root)
        entry: dict[str, Any] = {
            "message": d.message,
            "location": {"path": path, "range": span(d.start, d.end, d.filename)},
            "severity": SEVERITIES[d.severity],
            "code": {"value": d.code, "url": d.url},
        }
        # reviewdog offers a suggestion as a one-click commit: only fixes safe to apply blindly
        # (an unsafe fix needs `mpcheck check --fix --unsafe-fixes` and a human's reading).
        if d.fix is not None and d.fix.edits and d.fix.applicability == "safe":
            entry["suggestions"] = [
                {"range": span(e.start, e.end, d.filename), "text": e.content} for e in d.fix.edits
            ]
        if d.related:
            entry["related_locations"] = [
                {
                    "message": r.message,
                    "location": {
                        "path": display_path(r.filename, ctx.root) if r.filename else path,
                        "range": span(r.start, r.end, r.filename or d.filename),
                    },
                }
                for r in d.related
            ]
        entries.append(entry)
    document = {"source": {"name": TOOL_NAME, "url": HOMEPAGE}, "diagnostics": entries}
    return json_text(document, indent=2) + "\n"
