"""``full``: the default terminal output, a ruff-style header plus an annotated code frame.

Meant for people reading a terminal: it shows the offending code with carets under the
reported range, where the dtype came from (the related locations) and what the fix does.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from mpcheck.diagnostics import Diagnostic, Related

from .base import ReportContext, cell_lines, display_path, last_row, one_line, summary_line, visible

CONTEXT = 2  # source lines shown above and below the reported range
MAX_SPAN = 6  # ranges longer than this show their first and last two lines only
TAB = "    "


def render_full(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """One block per finding, blocks separated by a blank line."""
    return "\n".join(_block(d, ctx) for d in visible(diagnostics))


def _block(d: Diagnostic, ctx: ReportContext) -> str:
    path = display_path(d.filename, ctx.root)
    # a notebook's rows are its cells' rows: the frame shows the cell's own lines
    source = cell_lines(ctx, d.filename, d.cell) if d.cell else ctx.source_lines(d.filename)
    frame = _Frame.build(d, source)
    lines = [summary_line(d, ctx)]
    width = 1
    if frame is not None:
        lines.extend(frame.lines)
        width = frame.width
    notes = [
        f"note: {_where(d, r, path, ctx)}:{r.start.row}:{r.start.column}: {one_line(r.message)}"
        for r in d.related
    ]
    if d.fix is not None:
        notes.append(f"help: {one_line(d.fix.message)}")
    lines.extend(f"{' ' * width} = {note}" for note in notes)
    return "\n".join(lines) + "\n"


def _where(d: Diagnostic, r: Related, path: str, ctx: ReportContext) -> str:
    """The related place's file (another file of the project, or the finding's own) and cell."""
    if r.filename:
        return display_path(r.filename, ctx.root)
    return f"{path}:cell {d.cell}" if d.cell else path


def _char_width(char: str) -> int:
    if char == "\t":
        return len(TAB)
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _offset(text: str, column: int) -> int:
    """Display offset of a 1-based column; columns past the end count one cell each."""
    index = column - 1
    return sum(_char_width(c) for c in text[:index]) + max(index - len(text), 0)


class _Frame:
    """The gutter-and-source part of a block, rustc/ruff style."""

    def __init__(self, lines: list[str], width: int) -> None:
        self.lines = lines
        self.width = width

    @classmethod
    def build(cls, d: Diagnostic, source: Sequence[str]) -> _Frame | None:
        start = d.start
        if not 1 <= start.row <= len(source):
            return None  # no source (stdin, unreadable, or changed since analysis)
        end_row = min(last_row(start, d.end), len(source))
        end_col = d.end.column if end_row == d.end.row else len(source[end_row - 1]) + 1

        first = max(start.row - CONTEXT, 1)
        last = min(end_row + CONTEXT, len(source))
        while first < start.row and not source[first - 1].strip():
            first += 1
        while last > end_row and not source[last - 1].strip():
            last -= 1
        width = len(str(last))
        gutter = " " * width + " |"

        def row_line(row: int, mark: str = "") -> str:
            return f"{row:>{width}} | {mark}{source[row - 1].replace(chr(9), TAB)}".rstrip()

        out = [gutter]
        start_text = source[start.row - 1]
        start_off = _offset(start_text, start.column)
        if end_row == start.row:
            out.extend(row_line(r) for r in range(first, start.row + 1))
            carets = "^" * max(_offset(start_text, end_col) - start_off, 1)
            out.append(f"{gutter} {' ' * start_off}{carets} {d.code}")
            out.extend(row_line(r) for r in range(start.row + 1, last + 1))
        else:
            # A multi-line range: a rail down the left joins the start to the end caret.
            out.extend(row_line(r, "  ") for r in range(first, start.row))
            if start_text[: start.column - 1].strip():
                out.append(row_line(start.row, "  "))
                out.append(f"{gutter}  {'_' * (start_off + 1)}^")
            else:
                out.append(row_line(start.row, "/ "))
            inner = list(range(start.row + 1, end_row + 1))
            if len(inner) > MAX_SPAN:
                inner = [*inner[:2], 0, *inner[-2:]]
            out.extend(row_line(r, "| ") if r else "..." for r in inner)
            end_off = _offset(source[end_row - 1], max(end_col - 1, 1))
            out.append(f"{gutter} |{'_' * (end_off + 1)}^ {d.code}")
            out.extend(row_line(r, "  ") for r in range(end_row + 1, last + 1))
        out.append(gutter)
        return cls(out, width)
