"""One-line-per-finding text formats: ``concise``, ``pylint`` and ``grouped``.

``concise`` is what editors' problem matchers, ``grep`` and ``vim``'s quickfix parse;
``pylint`` feeds tools that already understand pylint's parseable output (e.g. Jenkins'
warnings plugin); ``grouped`` is a compact per-file overview for people.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpcheck.diagnostics import Diagnostic

from .base import ReportContext, display_path, in_file, one_line, summary_line, visible


def render_concise(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """``path:row:col: CODE [*] message``."""
    return "".join(summary_line(d, ctx) + "\n" for d in visible(diagnostics))


def render_pylint(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """``path:row: [CODE] message``, as pylint's ``parseable`` output and ruff's ``pylint``."""
    return "".join(  # notebooks: the file's own lines (pylint's readers know no cells)
        f"{display_path(d.filename, ctx.root)}:{d.start.row}: [{d.code}] {one_line(d.message)}\n"
        for d in visible(in_file(d, ctx) for d in diagnostics)
    )


def render_grouped(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """A ``path:`` header per file, then aligned ``row:col CODE message`` lines (``cell
    N:row:col`` in a notebook, as ``concise`` shows it)."""
    by_file: dict[str, list[Diagnostic]] = {}
    for d in visible(diagnostics):
        by_file.setdefault(d.filename, []).append(d)
    blocks = []
    for filename, items in by_file.items():
        rows = [f"cell {d.cell}:{d.start.row}" if d.cell else str(d.start.row) for d in items]
        row_width = max(len(row) for row in rows)
        col_width = max(len(str(d.start.column)) for d in items)
        lines = [f"{display_path(filename, ctx.root)}:"]
        for d, row in zip(items, rows, strict=True):
            marker = " [*]" if d.fix is not None and d.fix.applicability == "safe" else ""
            where = f"{row:>{row_width}}:{d.start.column:<{col_width}}"
            lines.append(f"  {where} {d.code}{marker} {one_line(d.message)}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
