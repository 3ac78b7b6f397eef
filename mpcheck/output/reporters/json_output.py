"""``json`` and ``json-lines``: ruff's JSON schema, plus ``severity`` and ``related``.

For scripts and editor integrations that already parse ``ruff --output-format json``;
``json-lines`` suits streaming consumers and log pipelines (one finding per line).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpcheck.diagnostics import Diagnostic, Fix, Position

from .base import ReportContext, json_text, visible


def _location(position: Position) -> dict[str, int]:
    return {"row": position.row, "column": position.column}


def _fix(fix: Fix | None) -> dict[str, Any] | None:
    if fix is None:
        return None
    return {
        "applicability": fix.applicability,
        "message": fix.message,
        "edits": [
            {
                "content": edit.content,
                "location": _location(edit.start),
                "end_location": _location(edit.end),
            }
            for edit in fix.edits
        ],
    }


def json_object(d: Diagnostic) -> dict[str, Any]:
    """One finding as ruff would emit it (``filename`` stays absolute, as in ruff)."""
    return {
        "cell": d.cell or None,
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "filename": d.filename,
        "location": _location(d.start),
        "end_location": _location(d.end),
        "fix": _fix(d.fix),
        "noqa_row": d.noqa_row or None,
        "url": d.url,
        "severity": d.severity.value,
        "related": [
            {
                "message": r.message,
                "location": _location(r.start),
                "end_location": _location(r.end),
                **({"filename": r.filename} if r.filename else {}),
            }
            for r in d.related
        ],
    }


def render_json(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """An indented JSON array; keys sorted like ruff's."""
    objects = [json_object(d) for d in visible(diagnostics)]
    return json_text(objects, indent=2, sort_keys=True) + "\n"


def render_json_lines(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """One compact JSON object per line."""
    return "".join(
        json_text(json_object(d), sort_keys=True, separators=(",", ":")) + "\n"
        for d in visible(diagnostics)
    )
