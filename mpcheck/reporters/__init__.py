"""Turn diagnostics into text for people, editors and CI systems.

``render(fmt, diagnostics, ctx)`` is the single entry point; each format lives in its own
small module and only decides layout (shared helpers are in :mod:`.base`). Renderers are
pure: they read source only through ``ctx.source_lines`` and return the text to print.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpcheck.diagnostics import Diagnostic

from .azure import render_azure
from .base import Renderer, ReportContext
from .full import render_full
from .github import render_github
from .gitlab import render_gitlab
from .json_output import render_json, render_json_lines
from .junit import render_junit
from .rdjson import render_rdjson
from .sarif import render_sarif
from .text import render_concise, render_grouped, render_pylint

__all__ = ["DEFAULT_FORMAT", "FORMATS", "ReportContext", "render"]

_RENDERERS: dict[str, Renderer] = {
    "full": render_full,
    "concise": render_concise,
    "json": render_json,
    "json-lines": render_json_lines,
    "github": render_github,
    "sarif": render_sarif,
    "junit": render_junit,
    "gitlab": render_gitlab,
    "pylint": render_pylint,
    "grouped": render_grouped,
    "azure": render_azure,
    "rdjson": render_rdjson,
}

FORMATS: tuple[str, ...] = tuple(_RENDERERS)
DEFAULT_FORMAT = "full"


def render(fmt: str, diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """The full text to print for ``fmt``; it ends in a newline unless it is empty.

    ``diagnostics`` arrive sorted and include ``# noqa``-suppressed ones: SARIF reports
    them as suppressed, every other format drops them.
    """
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown output format {fmt!r}; expected one of: {', '.join(FORMATS)}"
        ) from None
    return renderer(diagnostics, ctx)
