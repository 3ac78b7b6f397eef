"""``github``: GitHub Actions workflow commands, shown as annotations on the PR diff.

GitHub keeps at most 10 annotations of each level per step (and 50 per job) and silently
drops the rest. So when there are more findings than that, the annotations go out most
severe first (errors, then warnings: should the job's cap bite, the errors are the ones
kept), every finding is then printed as a plain ``path:row:col: CODE message`` log line,
and one closing ``::notice::`` says how many were not annotated: nothing is lost without
a trace. mpcheck's two severities map onto GitHub's ``error`` and ``warning`` levels; the
``notice`` level is left for that closing message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from mpcheck.diagnostics import Diagnostic, Severity

from .base import (
    GITHUB_DATA,
    GITHUB_PROPERTY,
    TOOL_NAME,
    ReportContext,
    display_path,
    escape,
    summary_line,
    visible,
)

MAX_PER_LEVEL = 10
# Most severe first; every Severity must appear here (a test checks it).
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning"}
_RANK = {severity: rank for rank, severity in enumerate(LEVELS)}


def annotation(d: Diagnostic, ctx: ReportContext) -> str:
    """``::error title=…,file=…,line=…::CODE message`` with GitHub's escaping."""
    properties = {
        "title": f"{TOOL_NAME} ({d.code})",
        "file": display_path(d.filename, ctx.root),
        "line": d.start.row,
        "col": d.start.column,
        "endLine": d.end.row,
        "endColumn": d.end.column,
    }
    props = ",".join(
        f"{key}={escape(str(value), GITHUB_PROPERTY)}" for key, value in properties.items()
    )
    return f"::{LEVELS[d.severity]} {props}::{escape(f'{d.code} {d.message}', GITHUB_DATA)}"


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
    shown = visible(diagnostics)
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
