"""``gitlab``: GitLab Code Quality report (a Code Climate subset) for merge request widgets.

GitLab compares fingerprints between the base and head pipelines to show new and fixed
findings, so they must be stable when code moves and unique per finding. GitLab reads
``location.path`` relative to the repository, so paths (and the fingerprints built from
them) are relative to the repository root, wherever in it mpcheck ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpcheck.diagnostics import Diagnostic, Severity

from .base import (
    ReportContext,
    absolute,
    display_path,
    fingerprints,
    in_file,
    json_text,
    last_row,
    repository_root,
)

SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor"}


def render_gitlab(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """A JSON array of issues; ``[]`` when clean, which GitLab reads as "no findings"."""
    issues: list[dict[str, Any]] = []
    root = repository_root(ctx.root)
    prints = fingerprints(diagnostics, ctx, root)  # a notebook's: from its cell's line
    diagnostics = [in_file(d, ctx) for d in diagnostics]  # notebooks: the file's own lines
    # Fingerprints count suppressed findings too, so silencing one never renumbers the rest.
    for d, fingerprint in zip(diagnostics, prints, strict=True):
        if d.suppressed:
            continue
        issues.append(
            {
                "description": f"{d.code}: {d.message}",
                "check_name": d.code,
                "fingerprint": fingerprint,
                "severity": SEVERITIES[d.severity],
                "location": {
                    "path": display_path(absolute(d.filename, ctx.root), root),
                    "lines": {"begin": d.start.row, "end": last_row(d.start, d.end)},
                },
            }
        )
    return json_text(issues, indent=2) + "\n"
