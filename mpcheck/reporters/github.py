"""``github``: GitHub Actions workflow commands, shown as annotations on the PR diff.

GitHub keeps at most 10 annotations of each level per step (50 per job) and silently drops
the rest, so past that cap findings are printed as plain log lines and a closing notice
says how many were not annotated: nothing is lost without a trace.
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
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning"}


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


def render_github(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """The first 10 findings of each level as annotations, the rest as plain lines."""
    per_level: Counter[Severity] = Counter()
    lines = []
    for d in visible(diagnostics):
        per_level[d.severity] += 1
        if per_level[d.severity] <= MAX_PER_LEVEL:
            lines.append(annotation(d, ctx))
        else:
            lines.append(summary_line(d, ctx, fix_marker=False))
    overflow = sum(max(n - MAX_PER_LEVEL, 0) for n in per_level.values())
    if overflow:
        noun = "finding was" if overflow == 1 else "findings were"
        notice = (
            f"{overflow} {noun} not annotated (GitHub shows at most {MAX_PER_LEVEL} "
            "annotations per level in a step); see the full list in the log above"
        )
        lines.append(f"::notice::{escape(notice, GITHUB_DATA)}")
    return "".join(line + "\n" for line in lines)
