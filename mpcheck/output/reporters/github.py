"""``github``: GitHub Actions workflow commands, shown as annotations on the PR diff.

GitHub keeps at most 10 annotations of each level per step (and 50 per job) and silently
drops the rest. So when there are more findings than that, the annotations go out most
severe first (errors, then warnings: should the job's cap bite, the errors are the ones
kept), every finding is then printed as a plain ``path:row:col: CODE message`` log line,
and one closing ``::notice::`` says how many were not annotated: nothing is lost without
a trace. mpcheck's two severities map onto GitHub's ``error`` and ``warning`` levels; the
``notice`` level is left for that closing message.

What the runner accepts shapes each command:

* ``file`` is resolved against the repository root (``$GITHUB_WORKSPACE``), not the working
  directory, so it is made relative to the workspace when mpcheck runs below it (a
  ``working-directory:`` step, a container job); elsewhere it is relative to the root.
* The runner rejects ``col``/``endColumn`` on an annotation whose ``line`` and ``endLine``
  differ, and draws multi-line annotations under their last line: a range spanning lines is
  annotated on its first line, from its start column to the end of that line.
* The log shows only the message of an annotation, so the message starts with the
  ``path:row:col:`` location, as ruff's does.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from mpcheck.diagnostics import Diagnostic, Severity

from .base import (
    GITHUB_DATA,
    GITHUB_PROPERTY,
    STDIN,
    TOOL_NAME,
    ReportContext,
    absolute,
    display_path,
    escape,
    in_file,
    relative_to_root,
    source_line,
    summary_line,
    visible,
)

MAX_PER_LEVEL = 10
WORKSPACE_VAR = "GITHUB_WORKSPACE"
# Most severe first; every Severity must appear here (a test checks it).
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning"}
_RANK = {severity: rank for rank, severity in enumerate(LEVELS)}


def annotation_path(filename: str, ctx: ReportContext) -> str:
    """``filename`` as the runner resolves it: relative to ``$GITHUB_WORKSPACE`` if below it."""
    workspace = os.environ.get(WORKSPACE_VAR, "")
    if workspace and filename != STDIN:
        relative = relative_to_root(absolute(filename, ctx.root), Path(workspace))
        if relative is not None:
            return relative
    return display_path(filename, ctx.root)


def annotation_span(d: Diagnostic, ctx: ReportContext) -> tuple[int, int, int, int]:
    """``(line, col, endLine, endColumn)`` the runner accepts: always on a single line."""
    row, col = d.start.row, d.start.column
    if d.end.row == row:
        end_col = d.end.column
    else:
        text = source_line(ctx, d.filename, row)
        end_col = len(text) + 1 if text is not None else col
    return row, col, row, max(end_col, col)  # the runner also rejects endColumn < col


def annotation(d: Diagnostic, ctx: ReportContext) -> str:
    """``::error title=…,file=…,line=…::path:row:col: CODE message`` with GitHub's escaping."""
    line, col, end_line, end_col = annotation_span(d, ctx)
    properties = {
        "title": f"{TOOL_NAME} ({d.code})",
        "file": annotation_path(d.filename, ctx),
        "line": line,
        "col": col,
        "endLine": end_line,
        "endColumn": end_col,
    }
    props = ",".join(
        f"{key}={escape(str(value), GITHUB_PROPERTY)}" for key, value in properties.items()
    )
    where = f"{display_path(d.filename, ctx.root)}:{d.start.row}:{d.start.column}"
    data = f"{where}: {d.code} {d.message}"
    return f"::{LEVELS[d.severity]} {props}::{escape(data, GITHUB_DATA)}"


def _annotated(shown: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The findings GitHub will keep: up to 10 per level, most severe level first.

    The sort is stable, so within a level the findings keep their (file, row) order.
    """
    per_level: Counter[Severity] = Counter()
    chosen = []
    for d in sorted(shown, key=lambda d: _RANK[d.severity]):
        per_level[d.severity] += 1
        if per_level[d.severity] <= MAX_PER_LEVEL:
            chosen.append(d)
    return chosen


def render_github(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """Annotations in input order; past GitHub's cap, the most severe ones plus a full list."""
    shown = visible(in_file(d, ctx) for d in diagnostics)  # notebooks: the file's own lines
    chosen = _annotated(shown)
    if len(chosen) == len(shown):
        return "".join(annotation(d, ctx) + "\n" for d in shown)
    lines = [annotation(d, ctx) for d in chosen]
    lines += [summary_line(d, ctx, fix_marker=False) for d in shown]
    missing = len(shown) - len(chosen)
    verb = "was" if missing == 1 else "were"
    notice = (
        f"{missing} of {len(shown)} findings {verb} not annotated (GitHub shows at most "
        f"{MAX_PER_LEVEL} annotations per level in a step); all {len(shown)} are listed "
        "in the log above"
    )
    lines.append(f"::notice::{escape(notice, GITHUB_DATA)}")
    return "".join(line + "\n" for line in lines)
