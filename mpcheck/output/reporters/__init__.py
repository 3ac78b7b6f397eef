"""Turn diagnostics into text for people, editors and CI systems.

``render(fmt, diagnostics, ctx)`` is the single entry point; each format lives in its own
small module and only decides layout (shared helpers are in :mod:`.base`). Renderers are
pure: they read source only through ``ctx.source_lines`` and return the text to print.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from mpcheck.diagnostics import Diagnostic

from .base import Renderer, ReportContext

__all__ = ["DEFAULT_FORMAT", "FORMATS", "ReportContext", "render"]

# Each format's module and function, imported only when that format is used: a run loads
# one renderer, not twelve.
_RENDERERS: dict[str, tuple[str, str]] = {
    "full": ("full", "render_full"),
    "concise": ("text", "render_concise"),
    "json": ("json_output", "render_json"),
    "json-lines": ("json_output", "render_json_lines"),
    "github": ("github", "render_github"),
    "sarif": ("sarif", "render_sarif"),
    "junit": ("junit", "render_junit"),
    "gitlab": ("gitlab", "render_gitlab"),
    "pylint": ("text", "render_pylint"),
    "grouped": ("text", "render_grouped"),
    "azure": ("azure", "render_azure"),
    "rdjson": ("rdjson", "render_rdjson"),
}

FORMATS: tuple[str, ...] = tuple(_RENDERERS)
DEFAULT_FORMAT = "full"


def render(fmt: str, diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """The full text to print for ``fmt``; it ends in a newline unless it is empty.

    ``diagnostics`` arrive sorted and include ``# noqa``-suppressed ones: SARIF reports
    them as suppressed, every other format drops them.
    """
    try:
        module, function = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown output format {fmt!r}; expected one of: {', '.join(FORMATS)}"
        ) from None
    renderer: Renderer = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    return renderer(diagnostics, ctx)
