"""Where each cell's ``source`` sits in a notebook's JSON text, to edit and point at it in place.

``json.loads`` forgets positions, and re-dumping a notebook rewrites its indentation, float
spellings, escapes, key order and line endings. This scanner records the span of every cell's
``source`` value (and of each string in it), so a fix replaces only those string literals
(:func:`splice`) and a reporter can name the JSON file's own line and column of a cell row
(:meth:`SourceMap.file_position`). It imports no engine: reporters use it.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

_WS = re.compile(r"[ \t\n\r]*")
# Lines as Python's tokenizer splits them: \r\n, \r or \n only (not \x0c, \x1c-\x1e, U+2028).
LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_DECODER = json.JSONDecoder()


class ScanError(ValueError):
    """The text is not a JSON object laid out as a notebook (``cells``: a list of objects)."""


@dataclass(frozen=True)
class Literal:
    """One JSON string literal: ``text[start:end]`` is it, quotes included."""

    start: int
    end: int
    value: str


@dataclass(frozen=True)
class SourceValue:
    """A cell's ``source``: one string, or a list of strings (``start``/``end`` span it all)."""

    start: int
    end: int
    literals: tuple[Literal, ...]
    is_list: bool

    @property
    def text(self) -> str:
        return "".join(lit.value for lit in self.literals)


def split_lines(text: str) -> list[str]:
    """``text`` cut after each ``\\r\\n``, ``\\r`` or ``\\n``, endings kept."""
    return LINE.findall(text)


def _ws(text: str, i: int) -> int:
    match = _WS.match(text, i)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _expect(text: str, i: int, char: str) -> int:
    if text[i : i + 1] != char:
        raise ScanError(f"expected {char!r} at offset {i}")
    return i + 1


def _string(text: str, i: int) -> Literal:
    _expect(text, i, '"')
    value, end = _DECODER.raw_decode(text, i)
    assert isinstance(value, str)
    return Literal(i, end, value)


def _skip(text: str, i: int) -> int:
    try:
        return int(_DECODER.raw_decode(text, i)[1])
    except json.JSONDecodeError as exc:
        raise ScanError(str(exc)) from None


def _members(text: str, i: int) -> list[tuple[str, int]]:
    """The keys of the object at ``i`` and where each value starts; the object's end last."""
    i = _ws(text, _expect(text, i, "{"))
    out: list[tuple[str, int]] = []
    if text[i : i + 1] == "}":
        return [("", i + 1)]
    while True:
        key = _string(text, i)
        i = _ws(text, _expect(text, _ws(text, key.end), ":"))
        out.append((key.value, i))
        i = _ws(text, _skip(text, i))
        if text[i : i + 1] == "}":
            return [*out, ("", i + 1)]
        i = _ws(text, _expect(text, i, ","))


def _elements(text: str, i: int) -> tuple[list[int], int]:
    """Where each element of the array at ``i`` starts, and where the array ends."""
    i = _ws(text, _expect(text, i, "["))
    starts: list[int] = []
    if text[i : i + 1] == "]":
        return starts, i + 1
    while True:
        starts.append(i)
        i = _ws(text, _skip(text, i))
        if text[i : i + 1] == "]":
            return starts, i + 1
        i = _ws(text, _expect(text, i, ","))


def _source_value(text: str, i: int) -> SourceValue | None:
    if text[i : i + 1] == '"':
        lit = _string(text, i)
        return SourceValue(i, lit.end, (lit,), is_list=False)
    if text[i : i + 1] != "[":
        return None
    starts, end = _elements(text, i)
    literals = []
    for start in starts:
        if text[start : start + 1] != '"':
            return None
        literals.append(_string(text, start))
    return SourceValue(i, end, tuple(literals), is_list=True)


def scan(text: str) -> dict[int, SourceValue]:
    """Each cell's ``source`` by cell index (0-based), for cells whose source is text.

    Duplicate keys resolve as ``json.loads`` does: the last one wins.
    """
    try:
        members = _members(text, _ws(text, 0))
        cells_at = None
        for key, start in members[:-1]:
            if key == "cells":
                cells_at = start
        if cells_at is None or text[cells_at : cells_at + 1] != "[":
            raise ScanError("no `cells` list")
        out: dict[int, SourceValue] = {}
        for index, start in enumerate(_elements(text, cells_at)[0]):
            if text[start : start + 1] != "{":
                continue
            found = None
            for key, value_at in _members(text, start)[:-1]:
                if key == "source":
                    found = _source_value(text, value_at)
            if found is not None:
                out[index] = found
        return out
    except (ValueError, IndexError, RecursionError) as exc:
        raise ScanError(str(exc)) from None


def _char_offsets(text: str, lit: Literal) -> list[int] | None:
    """The offset in ``text`` of each character of ``lit.value``, then of the closing quote."""
    out: list[int] = []
    i, end = lit.start + 1, lit.end - 1
    while i < end:
        out.append(i)
        if text[i] != "\\":
            i += 1
        elif text[i + 1] != "u":
            i += 2
        else:
            high = int(text[i + 2 : i + 6], 16)
            pair = text[i + 6 : i + 8] == "\\u" and 0xD800 <= high < 0xDC00
            low = int(text[i + 8 : i + 12], 16) if pair else 0
            i += 12 if pair and 0xDC00 <= low < 0xE000 else 6
    out.append(end)
    return out if len(out) == len(lit.value) + 1 else None


@dataclass(frozen=True)
class FilePosition:
    """A 1-based line and character column of the JSON file itself."""

    row: int
    column: int


class SourceMap:
    """Cell rows and columns to the notebook file's own lines and columns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sources = scan(text)
        self._file_starts = [0, *(m.end() for m in LINE.finditer(text) if m.end() < len(text))]

    def file_position(self, cell: int, row: int, column: int) -> FilePosition | None:
        """Where a cell's (1-based) row and column is in the file; None if it cannot say."""
        value = self.sources.get(cell - 1)
        if value is None:
            return None
        cell_text = value.text
        starts = [0]
        for line in split_lines(cell_text):
            starts.append(starts[-1] + len(line))
        if not 1 <= row <= max(len(starts) - 1, 1):
            return None
        offset = min(starts[row - 1] + column - 1, len(cell_text))
        for lit in value.literals:
            if offset <= len(lit.value):
                chars = _char_offsets(self.text, lit)
                if chars is None:
                    return None
                return self._position(chars[offset])
            offset -= len(lit.value)
        return self._position(value.literals[-1].end - 1) if value.literals else None

    def _position(self, offset: int) -> FilePosition:
        line = bisect_right(self._file_starts, offset)
        return FilePosition(line, offset - self._file_starts[line - 1] + 1)


def _spelled(value: str, ensure_ascii: bool) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)


def _escapes(text: str, lit: Literal, default: bool) -> bool:
    """Whether a literal spelled its non-ASCII characters as escapes (else the file's habit)."""
    if lit.value.isascii():
        return default
    return text[lit.start : lit.end].isascii()


def ascii_escaped(text: str) -> bool:
    """Whether the notebook writes non-ASCII as ``\\uXXXX`` (no raw non-ASCII character)."""
    return text.isascii()


def splice(text: str, new_sources: dict[int, str]) -> str:
    """``text`` with the ``source`` of each listed cell (0-based) replaced, nothing else.

    A list source keeps one string per line and the list's own layout (the whitespace between
    its items); a string source stays one string. Strings are escaped as the file escapes.
    """
    sources = scan(text)
    ensure_ascii = ascii_escaped(text)
    edits: list[tuple[int, int, str]] = []
    for index, new in new_sources.items():
        value = sources[index]
        if not value.is_list:
            escaped = _escapes(text, value.literals[0], ensure_ascii)
            edits.append((value.start, value.end, _spelled(new, escaped)))
            continue
        lines = split_lines(new)
        old = value.literals
        if len(lines) == len(old):
            edits += [
                (lit.start, lit.end, _spelled(line, _escapes(text, lit, ensure_ascii)))
                for lit, line in zip(old, lines, strict=True)
                if lit.value != line
            ]
            continue
        edits.append((value.start, value.end, _list(text, value, lines, ensure_ascii)))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _list(text: str, value: SourceValue, lines: Sequence[str], ensure_ascii: bool) -> str:
    """A JSON list of ``lines`` laid out as the original list was."""
    old = value.literals
    if old:
        opening = text[value.start + 1 : old[0].start]  # "\n    " after "["
        closing = text[old[-1].end : value.end - 1]  # "\n   " before "]"
        between = text[old[0].end : old[1].start] if len(old) > 1 else "," + opening
    else:  # "[]": as nbformat writes, one level deeper than the line holding the list
        line_start = text.rfind("\n", 0, value.start) + 1
        indent = re.match(r"[ \t]*", text[line_start:])
        base = indent.group() if indent else ""
        newline = "\r\n" if text[line_start - 2 : line_start] == "\r\n" else "\n"
        opening, closing = f"{newline}{base} ", f"{newline}{base}"
        between = "," + opening
    if not lines:
        return "[]"
    body = between.join(_spelled(line, ensure_ascii) for line in lines)
    return f"[{opening}{body}{closing}]"
