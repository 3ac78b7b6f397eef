"""Accept today's findings and gate only new ones: the baseline file.

A team adopting mpcheck on a repository with findings records them once
(``--write-baseline``) and from then on sees only the findings that are not in the record
(``--baseline``). A finding is keyed by its rule, its file (relative to the baseline file's
directory), the qualified name of the function or class around it and a hash of its line's
text without whitespace (so reformatting ``x=y`` to ``x = y`` keeps the key). No row numbers:
an edit elsewhere in the file moves a finding without making it new. The same key may occur
several times (two identical lines in one function); the record keeps the count and hides at
most that many.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mpcheck.diagnostics import Diagnostic
from mpcheck.files.source import SourceError, SourceFile
from mpcheck.output.fixes import write_atomically

FORMAT = 1


class BaselineError(Exception):
    """The baseline file cannot be read or is not one mpcheck wrote."""


@dataclass(frozen=True, order=True)
class Key:
    code: str
    path: str  # POSIX, relative to the baseline file's directory
    scope: str  # ``Trainer.step``, or ``""`` at module level
    line: str  # sha256 of the flagged line without its whitespace (16 hex digits)


@dataclass(frozen=True)
class Outcome:
    shown: list[Diagnostic]
    hidden: int  # findings the baseline accepted
    gone: int  # baseline entries no finding matched any more: the file can be refreshed


def write(path: Path, diagnostics: Iterable[Diagnostic]) -> int:
    """Record the findings (suppressed ones are not findings); how many were recorded."""
    counts = Counter(key_of(d, path.parent) for d in diagnostics if not d.suppressed)
    entries = [
        {"code": k.code, "path": k.path, "scope": k.scope, "line": k.line, "count": n}
        for k, n in sorted(counts.items())
    ]
    text = json.dumps({"mpcheck-baseline": FORMAT, "findings": entries}, indent=2)
    write_atomically(path, (text + "\n").encode("utf-8", "surrogateescape"))
    return sum(counts.values())


def load(path: Path) -> Counter[Key]:
    try:
        data = json.loads(_read_regular(path))
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"baseline {path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise BaselineError(f"baseline {path} is nested too deeply to be a baseline") from None
    if not isinstance(data, dict) or data.get("mpcheck-baseline") != FORMAT:
        raise BaselineError(
            f"{path} is not an mpcheck baseline (format {FORMAT}); "
            "write one with `mpcheck check --write-baseline`"
        )
    counts: Counter[Key] = Counter()
    try:
        for entry in data["findings"]:
            key = Key(entry["code"], entry["path"], entry["scope"], entry["line"])
            if not all(isinstance(part, str) for part in (key.code, key.path, key.scope, key.line)):
                raise TypeError
            counts[key] += int(entry.get("count", 1))
    except (KeyError, TypeError, ValueError):
        raise BaselineError(f"baseline {path} has a malformed entry") from None
    return counts


def _read_regular(path: Path) -> bytes:
    """A regular file's bytes: ``/dev/zero``, a FIFO or a terminal would never end (or block)."""
    import stat

    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise BaselineError(f"baseline {path} is not a regular file")
        return f.read()


def apply(
    diagnostics: Sequence[Diagnostic], checked: Iterable[str], path: Path, accepted: Counter[Key]
) -> Outcome:
    """Hide the findings the baseline accepts, in file order so counts are used up stably.
    An entry no finding used is gone if its file was ``checked`` in this run or was deleted."""
    left = Counter(accepted)
    shown: list[Diagnostic] = []
    hidden = 0
    for d in diagnostics:
        if not d.suppressed:
            key = key_of(d, path.parent)
            if left[key] > 0:
                left[key] -= 1
                hidden += 1
                continue
        shown.append(d)
    here = {_relative(f, path.parent) for f in checked}
    gone = sum(
        n
        for k, n in left.items()
        if n > 0 and (k.path in here or not (path.parent / k.path).exists())
    )
    return Outcome(shown, hidden, gone)


def key_of(d: Diagnostic, base: Path) -> Key:
    lines, scopes = _anchors(d.filename, d.cell)
    text = lines[d.start.row - 1] if 1 <= d.start.row <= len(lines) else ""
    digest = hashlib.sha256("".join(text.split()).encode("utf-8", "surrogateescape"))
    scope = _scope_at(scopes, d.start.row)
    return Key(d.code, _relative(d.filename, base), scope, digest.hexdigest()[:16])


def _relative(filename: str, base: Path) -> str:
    if filename == "-":
        return "-"
    return Path(os.path.relpath(os.path.abspath(filename), os.path.abspath(base))).as_posix()


Scope = tuple[int, int, str]  # first row, last row, qualified name


@cache
def _anchors(filename: str, cell: int) -> tuple[list[str], tuple[Scope, ...]]:
    """The lines a finding's rows count in (a notebook cell's, for a notebook) and the scopes."""
    try:
        data = Path(filename).read_bytes()
    except OSError:
        return [], ()
    lines = _cell_lines(data, cell) if cell else _file_lines(data)
    return lines, _scopes("\n".join(lines))


def _file_lines(data: bytes) -> list[str]:
    try:
        return SourceFile.decode(data).lines
    except SourceError:
        return []


def _cell_lines(data: bytes, number: int) -> list[str]:
    from mpcheck.files.notebook import NotebookError, load

    try:
        cells = load(data.decode("utf-8")).cells
    except (NotebookError, UnicodeDecodeError):
        return []
    cell = next((c for c in cells if c.number == number), None)
    return [] if cell is None else [line.rstrip("\r\n") for line in cell.lines]


def _scopes(source: str) -> tuple[Scope, ...]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    found: list[Scope] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((first, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return tuple(found)


def _scope_at(scopes: Sequence[Scope], row: int) -> str:
    """The innermost function or class whose lines hold ``row`` (nested ones come later)."""
    name = ""
    for first, last, qualified in scopes:
        if first <= row <= last:
            name = qualified
    return name


def clear() -> None:
    """Forget file contents read so far (a long-lived process re-reads changed files)."""
    _anchors.cache_clear()
