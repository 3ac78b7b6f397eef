"""Jupyter notebooks checked as ruff checks them: code cells joined, magics masked, cells mapped.

The code cells are joined in order into one Python source (so a name defined in cell 1 is known
in cell 3); IPython magics (``%``, ``%%`` cells), shell lines (``!``), help (``x?``) and their
assignments (``files = !ls``), with the lines a trailing ``\\`` continues, become blank lines
(``pass`` where indented, so a block keeps a statement), so every row of the joined source is
one row of one cell. A cell magic that runs its body as Python (``%%time``, ``%%timeit``,
``%%capture``, as ruff's list) masks only its own line; any other ``%%`` cell is skipped.
IPython's automagic is masked as IPython applies it: a cell whose one line is a line magic's
name without ``%`` (``cd PhotoMaker/``, ``pip install x``) runs that magic, unless the notebook
binds the name or the rest reads as Python (``cd = 1``, ``ls(x)``).
Cells are split into lines as Python's tokenizer splits them (``\\n``, ``\\r\\n``, ``\\r``), so a
form feed or U+2028 in a cell moves nothing. Findings are mapped back to ``(cell, row)``, and
rows they cite in their messages to ``cell N, line R``.

Fixes and ``noqa`` directives are applied per cell and written back by replacing only the
changed cells' ``source`` strings in the file's own text (:mod:`mpcheck.files.notebook_json`): the
indentation, key order, float spellings, escapes and line endings stay byte for byte. Like a
``.py`` file, a notebook is checked again from the exact bytes a fix is written over.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import dropwhile
from pathlib import Path
from typing import Any

from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.files.notebook_json import ScanError, splice, split_lines
from mpcheck.files.source import SourceError
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.ruleset.rule import Rule

_MAGIC = re.compile(r"^\s*(%|!|\?)|^\s*\w[\w.]*\?\??\s*$")
# ``files = !ls``, ``t = %timeit -o f()``: IPython's system and magic assignments (never
# Python: no Python expression starts with ``!``, or with ``%`` but not ``%=``)
_ASSIGNED = re.compile(r"^\s*[\w.\[\](), *]+?\s*=\s*(!|%(?!=))")
# Cell magics whose body is Python that runs in the kernel's namespace (ruff's list): their
# body is checked, their own first line masked.
BODY_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})
_CELL_MAGIC = re.compile(r"\s*%%(\w*)")
# IPython's default line magics and its POSIX shell aliases: what automagic runs without ``%``
AUTOMAGICS = frozenset(
    {
        *("alias", "alias_magic", "autoawait", "autocall", "automagic", "autosave", "bookmark"),
        *("cat", "cd", "clear", "colors", "conda", "config", "cp", "debug", "dhist", "dirs"),
        *("doctest_mode", "ed", "edit", "env", "gui", "hist", "history", "killbgscripts"),
        *("ldir", "less", "lf", "lk", "ll", "load", "load_ext", "loadpy", "logoff", "logon"),
        *("logstart", "logstate", "logstop", "ls", "lsmagic", "lx", "macro", "magic", "mamba"),
        *("man", "matplotlib", "micromamba", "mkdir", "more", "mv", "notebook", "page"),
        *("pastebin", "pdb", "pdef", "pdoc", "pfile", "pinfo", "pinfo2", "pip", "popd"),
        *("pprint", "precision", "prun", "psearch", "psource", "pushd", "pwd", "pycat", "pylab"),
        *("qtconsole", "quickref", "recall", "rehashx", "reload_ext", "rep", "rerun", "reset"),
        *("reset_selective", "rm", "rmdir", "run", "save", "sc", "set_env", "store", "sx"),
        *("system", "tb", "time", "timeit", "unalias", "unload_ext", "who", "who_ls", "whos"),
        *("xdel", "xmode"),
    }
)
# ``name rest``: IPython's split of a line (its ``ifun`` and ``the_rest``); a rest led by one
# of these is Python (its assignment and Python-operator checkers run before automagic)
_AUTOMAGIC = re.compile(r"^\s*([A-Za-z_]\w*)(?:\s+(?![!=()<>,+*/%^&|])\S.*)?\s*$")
# "line 41" in a message (the engine's row references), but not inside quoted `code`
_BOM = "\ufeff"
MAX_ROUNDS = 10  # fix, check, fix again: overlapping fixes converge well before this
_LINE_REF = re.compile(r"(`[^`]*`)|\bline (\d+)\b")


class NotebookError(SourceError):
    """The file is not a notebook mpcheck can read (bad JSON, no cells, a malformed cell):
    a kind of unreadable source, so whoever reports a file it cannot read reports this."""


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
        bound = _bound_names(cell.lines for cell in self.cells)
        return "".join(line for cell in self.cells for line in _masked(cell.lines, bound))

    def locate(self, row: int) -> tuple[Cell, int]:
        """The cell holding joined ``row`` and the row within that cell."""
        found = self.cells[0]
        for cell in self.cells:
            if cell.first_row <= row:
                found = cell
        return found, row - found.first_row + 1


def load(text: str) -> Notebook:
    """The notebook in ``text``; NotebookError (one line, saying what) for anything else."""
    text = text.removeprefix(_BOM)  # a UTF-8 BOM decoded as text (json.loads refuses it)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, too deep
        raise NotebookError(f"not valid JSON: {_short(exc)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotebookError("not a Jupyter notebook (no `cells` list)")
    version = data.get("nbformat", 4)
    if isinstance(version, bool) or not isinstance(version, int) or version < 4:
        raise NotebookError(f"nbformat {version!r} is not supported (nbformat 4 is)")
    cells: list[Cell] = []
    row = 1
    for number, raw in enumerate(data["cells"], start=1):
        if not isinstance(raw, dict):
            raise NotebookError(f"cell {number} is not a JSON object")
        if raw.get("cell_type") != "code":
            continue
        text_ = _cell_text(raw.get("source", ""), number)
        lines = tuple(split_lines(text_)) or ("",)
        if not lines[-1].endswith(("\n", "\r")):
            lines = (*lines[:-1], lines[-1] + "\n")
        cells.append(Cell(number, lines, row))
        row += len(lines)
    return Notebook(data, tuple(cells), *_layout(text))


def _short(exc: BaseException) -> str:
    return str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"


def _cell_text(source: object, number: int) -> str:
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        text = "".join(source)
    elif isinstance(source, str):
        text = source
    else:
        raise NotebookError(f"cell {number}: `source` is not a string or a list of strings")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotebookError(f"cell {number}: `source` holds a lone surrogate") from None
    return text


def _layout(text: str) -> tuple[int | None, bool, bool]:
    """The indent, ASCII escaping and final newline the notebook was written with."""
    match = re.search(r"^\{\s*\n( +)\"", text)
    indent = len(match.group(1)) if match else None
    return indent, text.isascii(), text.endswith("\n")


def _masked(lines: Sequence[str], bound: frozenset[str] = frozenset()) -> list[str]:
    """Magics and shell lines as blank lines (``pass`` where indented: ``for f in files:
    !rm {f}`` keeps its block), with the lines their trailing ``\\`` continues (``!python
    train.py \\`` then ``--lr 1e-4``, as IPython reads them); a ``%%`` cell entirely, but the
    first line only of one whose body is Python (``%%time``); an automagic cell (``bound``: the
    names the notebook binds, which shadow a magic)."""
    magic = _CELL_MAGIC.match(lines[0]) if lines else None
    if magic is not None:
        if magic.group(1) not in BODY_MAGICS:
            return ["\n"] * len(lines)
        return ["\n", *_masked(lines[1:])]
    if _automagic(lines, bound):
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


def _automagic(lines: Sequence[str], bound: frozenset[str]) -> bool:
    """IPython (7 and later) applies automagic to a cell of one line only (its dynamic
    transforms run on single-line cells), when the line's first name is a line magic that no
    name of the user's namespace shadows and the rest is not Python's (``cd = 1``, ``ls(x)``);
    leading blank lines do not count."""
    text = list(dropwhile(lambda line: not line.strip(), lines))
    if len(text) != 1:
        return False
    match = _AUTOMAGIC.match(text[0].rstrip("\r\n"))
    return match is not None and match.group(1) in AUTOMAGICS and match.group(1) not in bound


def _bound_names(cells: Iterable[Sequence[str]]) -> frozenset[str]:
    """The magic names a notebook binds (``ls = ...``, ``def cd``, ``import time``, ``for env
    in``, ``as run``): in the user's namespace, each shadows the magic of its name."""
    text = "".join(line for lines in cells for line in lines)
    if not any(name in text for name in ("=", "def ", "class ", "import ", "for ", " as ")):
        return frozenset()
    found = set()
    for name in AUTOMAGICS:
        if name in text and re.search(_BINDS.format(name=re.escape(name)), text, re.M):
            found.add(name)
    return frozenset(found)


_BINDS = (
    r"^\s*(?:{name}\s*(?::[^=\n]*)?=(?!=)|(?:def|class)\s+{name}\b|for\s+{name}\b)"
    r"|\bimport\b[^\n]*\b{name}\b|\bas\s+{name}\b"
)


def check_notebook(
    text: str, filename: str, rules: Sequence[type[Rule]], options: Options | None = None
) -> list[Diagnostic]:
    """Diagnostics with rows relative to their cell (``Diagnostic.cell`` says which)."""
    notebook = load(text)
    if not notebook.cells:
        return []
    found = check_source(notebook.source, filename, rules, options or Options())
    return [_to_cell(notebook, d) for d in found]


def check_notebook_bytes(
    data: bytes, filename: str, rules: Sequence[type[Rule]], options: Options | None = None
) -> list[Diagnostic]:
    """:func:`check_notebook` of a file's bytes; a file that is no notebook is MPC001."""
    try:
        return check_notebook(_decode(data)[1], filename, rules, options)
    except NotebookError as exc:
        return [_unreadable(filename, str(exc))]


def _decode(data: bytes) -> tuple[bytes, str]:
    """The BOM (kept on write) and the text of a notebook file."""
    bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
    try:
        return bom, data[len(bom) :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not UTF-8 (byte {exc.start + len(bom)})") from None


def _unreadable(filename: str, reason: str) -> Diagnostic:
    return Diagnostic(
        "MPC001",
        "invalid-syntax",
        f"cannot read the notebook: {reason}",
        Severity.ERROR,
        filename,
        Position(1, 1),
        Position(1, 2),
        noqa_row=1,
    )


def _to_cell(notebook: Notebook, diag: Diagnostic) -> Diagnostic:
    cell, row = notebook.locate(diag.start.row)
    shift = cell.first_row - 1

    def moved(pos: Position) -> Position:
        return Position(pos.row - shift, pos.column)

    def cited(text: str) -> str:
        """``line 41`` of the joined source as ``cell 3, line 2``."""

        def one(match: re.Match[str]) -> str:
            if match.group(1):
                return match.group(1)
            where, in_cell = notebook.locate(int(match.group(2)))
            return f"cell {where.number}, line {in_cell}"

        return _LINE_REF.sub(one, text)

    related = tuple(
        replace(r, message=cited(r.message), start=moved(r.start), end=moved(r.end))
        for r in diag.related
        if not r.filename and notebook.locate(r.start.row)[0] == cell  # another cell: no position
    ) + tuple(r for r in diag.related if r.filename)
    fix = diag.fix
    if fix is not None:
        edits = tuple(replace(e, start=moved(e.start), end=moved(e.end)) for e in fix.edits)
        fix = replace(fix, edits=edits)
    return replace(
        diag,
        message=cited(diag.message),
        cell=cell.number,
        start=Position(row, diag.start.column),
        end=moved(diag.end),
        related=related,
        fix=fix,
        noqa_row=diag.noqa_row - shift if diag.noqa_row else 0,
    )


def _rewrite_cells(
    text: str, edit: Callable[[str, list[Diagnostic]], tuple[str, int]], found: Iterable[Diagnostic]
) -> tuple[str, int]:
    """``text`` with ``edit`` applied to each code cell's source that has findings; only the
    changed ``source`` strings are replaced in the file's text."""
    bom = _BOM if text.startswith(_BOM) else ""
    text = text.removeprefix(bom)
    notebook = load(text)
    by_cell: dict[int, list[Diagnostic]] = {}
    for d in found:
        by_cell.setdefault(d.cell, []).append(d)
    changed: dict[int, str] = {}
    total = 0
    for cell in notebook.cells:
        mine = by_cell.get(cell.number)
        if not mine:
            continue
        new, count = edit("".join(cell.lines), mine)
        if not count:
            continue
        total += count
        original = _cell_text(notebook.data["cells"][cell.number - 1].get("source", ""), 0)
        if not original.endswith(("\n", "\r")) and new.endswith("\n"):
            new = new[:-1]  # load() gave the last line a newline the cell does not have
        if new != original:
            changed[cell.number - 1] = new
    if not changed:
        return bom + text, total
    try:
        return bom + splice(text, changed), total
    except (ScanError, KeyError) as exc:
        raise NotebookError(f"cannot place the edit: {exc}") from None


def fix_notebook(text: str, diagnostics: Sequence[Diagnostic], *, unsafe: bool) -> tuple[str, int]:
    """The notebook's text with fixes applied in their cells, and how many went in."""
    from mpcheck.output.fixes import apply_fixes

    def fix(source: str, mine: list[Diagnostic]) -> tuple[str, int]:
        return apply_fixes(source, mine, unsafe=unsafe)

    return _rewrite_cells(text, fix, diagnostics)


def fix_notebook_bytes(
    data: bytes, diagnostics: Sequence[Diagnostic], *, unsafe: bool
) -> tuple[bytes, int]:
    """:func:`fix_notebook` of a file's bytes (``diagnostics`` found in exactly these)."""
    bom, text = _decode(data)
    fixed, applied = fix_notebook(text, diagnostics, unsafe=unsafe)
    return (bom + fixed.encode("utf-8") if fixed != text else data), applied


def fix_notebook_file(
    path: Path,
    diagnostics: Sequence[Diagnostic],
    *,
    unsafe: bool,
    rules: Sequence[type[Rule]] | None = None,
    options: Options | None = None,
) -> int:
    """Fix the notebook at ``path``; how many fixes went in.

    With ``rules``, the file is checked again from the bytes read here and those findings are
    fixed (``diagnostics`` may be stale: the file may have changed since), then checked and
    fixed again until nothing is left (a fix overlapping another waits a round, as ruff's
    loop), at most ``MAX_ROUNDS`` times; ``write_fixed`` writes only if the file still holds
    the bytes read. A file that is no longer a notebook raises
    :class:`~mpcheck.output.fixes.FixError`.
    """
    from mpcheck.output.fixes import FixError, write_fixed

    data = path.read_bytes()
    try:
        if rules is None:
            fixed, applied = fix_notebook_bytes(data, diagnostics, unsafe=unsafe)
        else:
            fixed, applied, seen = data, 0, {data}
            for _ in range(MAX_ROUNDS):
                found = check_notebook_bytes(fixed, str(path), rules, options)
                new, count = fix_notebook_bytes(fixed, found, unsafe=unsafe)
                if not count or new in seen:  # nothing more, or fixes undoing each other
                    break
                fixed, applied = new, applied + count
                seen.add(new)
    except NotebookError as exc:
        raise FixError(f"{path}: cannot fix the notebook: {exc}") from None
    if fixed != data:
        write_fixed(path, data, fixed)  # only over the bytes that were read
    return applied


def with_noqa_notebook(data: bytes, diagnostics: Iterable[Diagnostic]) -> tuple[bytes, int]:
    """``--add-noqa`` for a notebook: each directive on its cell's line, nothing else moved."""
    from mpcheck.output.add_noqa import with_noqa_text

    def add(source: str, mine: list[Diagnostic]) -> tuple[str, int]:
        # directives are found in the masked cell (a magic line does not tokenize) and written
        # into the cell's own lines: masking keeps every row, and no finding is on a magic row
        raw = split_lines(source)
        masked = _masked(raw, bound)
        added, count = with_noqa_text("".join(masked), [replace(d, cell=0) for d in mine])
        lines = [
            new if old == kept else old
            for old, kept, new in zip(raw, masked, split_lines(added), strict=True)
        ]
        return "".join(lines), count

    bom, text = _decode(data)
    bound = _bound_names(cell.lines for cell in load(text).cells)
    new, count = _rewrite_cells(text, add, diagnostics)
    return (bom + new.encode("utf-8") if new != text else data), count
