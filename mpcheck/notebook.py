"""Jupyter notebooks checked as ruff checks them: code cells joined, magics masked, cells mapped.

The code cells are joined in order into one Python source (so a name defined in cell 1 is known
in cell 3); IPython magics (``%``, ``%%`` cells), shell lines (``!``), help (``x?``) and their
assignments (``files = !ls``), with the lines a trailing ``\\`` continues, become blank lines
(``pass`` where indented, so a block keeps a statement), so every row of the joined source is
one row of one cell. Findings are mapped back to ``(cell, row)``; fixes are applied per cell
and the notebook is written back with its own JSON layout (indent, key order, non-ASCII
escaping, trailing newline), everything else untouched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mpcheck.diagnostics import Diagnostic, Position
from mpcheck.engine import Options, check_source
from mpcheck.fixes import apply_fixes, write_fixed
from mpcheck.rule import Rule

_MAGIC = re.compile(r"^\s*(%|!|\?)|^\s*\w[\w.]*\?\??\s*$")
# ``files = !ls``, ``t = %timeit -o f()``: IPython's system and magic assignments (never
# Python: no Python expression starts with ``!``, or with ``%`` but not ``%=``)
_ASSIGNED = re.compile(r"^\s*[\w.\[\](), *]+?\s*=\s*(!|%(?!=))")


class NotebookError(Exception):
    """The file is not a notebook mpcheck can read (bad JSON, no cells)."""


@dataclass(frozen=True)
class Cell:
    """One code cell: its index among all cells (1-based, as Jupyter shows) and its lines."""

    number: int
    lines: tuple[str, ...]
    first_row: int  # the cell's first row in the joined source


@dataclass(frozen=True)
class Notebook:
    data: dict[str, Any]
    cells: tuple[Cell, ...]
    indent: int | None
    ensure_ascii: bool
    trailing_newline: bool

    @property
    def source(self) -> str:
        """The code cells joined, magics masked: what the engine checks."""
        return "".join(line for cell in self.cells for line in _masked(cell.lines))

    def locate(self, row: int) -> tuple[Cell, int]:
        """The cell holding joined ``row`` and the row within that cell."""
        found = self.cells[0]
        for cell in self.cells:
            if cell.first_row <= row:
                found = cell
        return found, row - found.first_row + 1


def load(text: str) -> Notebook:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a Jupyter notebook (no `cells` list)")
    cells: list[Cell] = []
    row = 1
    for number, raw in enumerate(data["cells"], start=1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        source = raw.get("source", "")
        text_ = "".join(source) if isinstance(source, list) else str(source)
        lines = tuple(text_.splitlines(keepends=True)) or ("",)
        if not lines[-1].endswith("\n"):
            lines = (*lines[:-1], lines[-1] + "\n")
        cells.append(Cell(number, lines, row))
        row += len(lines)
    return Notebook(data, tuple(cells), *_layout(text))


def _layout(text: str) -> tuple[int | None, bool, bool]:
    """The indent, ASCII escaping and final newline the notebook was written with."""
    match = re.search(r"^\{\s*\n( +)\"", text)
    indent = len(match.group(1)) if match else None
    ensure_ascii = not any(ord(c) > 127 for c in text)
    return indent, ensure_ascii, text.endswith("\n")


def _masked(lines: Sequence[str]) -> list[str]:
    """Magics and shell lines as blank lines (``pass`` where indented: ``for f in files:
    !rm {f}`` keeps its block), with the lines their trailing ``\\`` continues (``!python
    train.py \\`` then ``--lr 1e-4``, as IPython reads them); a ``%%`` cell entirely."""
    if lines and lines[0].lstrip().startswith("%%"):
        return ["\n"] * len(lines)
    masked: list[str] = []
    continued = False
    for line in lines:
        if continued:
            masked.append("\n")
        elif _MAGIC.match(line) or _ASSIGNED.match(line):
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            masked.append(f"{indent}pass\n" if indent else "\n")
        else:
            masked.append(line)
            continue
        continued = line.rstrip("\r\n").endswith("\\")
    return masked


def check_notebook(
    text: str, filename: str, rules: Sequence[type[Rule]], options: Options | None = None
) -> list[Diagnostic]:
    """Diagnostics with rows relative to their cell (``Diagnostic.cell`` says which)."""
    notebook = load(text)
    if not notebook.cells:
        return []
    found = check_source(notebook.source, filename, rules, options or Options())
    return [_to_cell(notebook, d) for d in found]


def _to_cell(notebook: Notebook, diag: Diagnostic) -> Diagnostic:
    cell, row = notebook.locate(diag.start.row)
    shift = cell.first_row - 1

    def moved(pos: Position) -> Position:
        return Position(pos.row - shift, pos.column)

    related = tuple(
        replace(r, start=moved(r.start), end=moved(r.end))
        for r in diag.related
        if not r.filename and notebook.locate(r.start.row)[0] == cell  # another cell: no position
    ) + tuple(r for r in diag.related if r.filename)
    fix = diag.fix
    if fix is not None:
        edits = tuple(replace(e, start=moved(e.start), end=moved(e.end)) for e in fix.edits)
        fix = replace(fix, edits=edits)
    return replace(
        diag,
        cell=cell.number,
        start=Position(row, diag.start.column),
        end=moved(diag.end),
        related=related,
        fix=fix,
        noqa_row=diag.noqa_row - shift if diag.noqa_row else 0,
    )


def fix_notebook(text: str, diagnostics: Sequence[Diagnostic], *, unsafe: bool) -> tuple[str, int]:
    """The notebook's text with fixes applied in their cells, and how many went in."""
    notebook = load(text)
    applied = 0
    for cell in notebook.cells:
        mine = [d for d in diagnostics if d.cell == cell.number]
        if not mine:
            continue
        fixed, count = apply_fixes("".join(cell.lines), mine, unsafe=unsafe)
        if not count:
            continue
        applied += count
        raw = notebook.data["cells"][cell.number - 1]
        original = raw.get("source", "")
        joined = original if isinstance(original, str) else "".join(original)
        if not joined.endswith("\n") and fixed.endswith("\n"):
            fixed = fixed[:-1]  # load() gave the last line a newline the cell does not have
        raw["source"] = fixed.splitlines(keepends=True) if isinstance(original, list) else fixed
    if not applied:
        return text, 0
    out = json.dumps(notebook.data, indent=notebook.indent, ensure_ascii=notebook.ensure_ascii)
    return out + ("\n" if notebook.trailing_newline else ""), applied


def fix_notebook_file(path: Path, diagnostics: Sequence[Diagnostic], *, unsafe: bool) -> int:
    data = path.read_bytes()
    fixed, applied = fix_notebook(data.decode("utf-8"), diagnostics, unsafe=unsafe)
    if applied:
        write_fixed(path, data, fixed.encode("utf-8"))  # only over the bytes that were read
    return applied
