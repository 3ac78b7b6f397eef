"""Columns in the client's position encoding (LSP 3.17 ``positionEncoding``).

mpcheck counts columns in code points; an LSP client counts them in UTF-16 code units unless
it offered another encoding at ``initialize`` and the server chose it. A column sent in the
wrong unit puts an edit at the wrong place on any line with non-ASCII text before it: on a
line holding ``größe`` a fix once replaced the wrong bytes, and a ``noqa`` comment split a
UTF-8 character. So every position crosses this module, in both directions.

Lines are split as the protocol splits them (``\\n``, ``\\r\\n`` and ``\\r`` only), not as
``str.splitlines`` does (it also splits at form feeds, U+2028 and other separators, where
the client and Python's tokenizer see one line).
"""

from __future__ import annotations

import re
from bisect import bisect_right

from lsprotocol import types as lsp

from mpcheck.diagnostics import Position

UTF8, UTF16, UTF32 = (
    lsp.PositionEncodingKind.Utf8,
    lsp.PositionEncodingKind.Utf16,
    lsp.PositionEncodingKind.Utf32,
)
_NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as the protocol counts them, without their line endings (a text
    ending in a newline has an empty last line, where the client can place a cursor)."""
    return _NEWLINE.split(text)


def _units(text: str, encoding: str) -> int:
    """The length of ``text`` in the encoding's code units (a lone surrogate, which a client
    may send, counts as one UTF-16 unit and as the three bytes WTF-8 gives it)."""
    if encoding == UTF32:
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class Text:
    """A document's text, placing positions in the client's encoding."""

    def __init__(self, text: str, encoding: str) -> None:
        self.text = text
        self.lines = split_lines(text)
        self.encoding = encoding
        self._starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def to_client(self, pos: Position) -> lsp.Position:
        """mpcheck's 1-based row and code-point column as the client's 0-based position
        (a place past the end of a line or of the text is clamped to that end)."""
        line = max(pos.row - 1, 0)
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return lsp.Position(line=last, character=_units(self.lines[last], self.encoding))
        text = self.lines[line][: max(pos.column - 1, 0)]
        return lsp.Position(line=line, character=_units(text, self.encoding))

    def range_to_client(self, start: Position, end: Position) -> lsp.Range:
        return lsp.Range(start=self.to_client(start), end=self.to_client(end))

    def from_client(self, pos: lsp.Position) -> Position:
        """The client's position as mpcheck's row and code-point column (a character inside
        a code point's units is taken as that code point's start)."""
        if pos.line >= len(self.lines):
            last = len(self.lines) - 1
            return Position(last + 1, len(self.lines[last]) + 1)
        line = self.lines[pos.line]
        if self.encoding == UTF32:
            return Position(pos.line + 1, min(pos.character, len(line)) + 1)
        units = 0
        for index, char in enumerate(line):
            units += _units(char, self.encoding)
            if units > pos.character:
                return Position(pos.line + 1, index + 1)
        return Position(pos.line + 1, len(line) + 1)

    def at_offset(self, offset: int) -> lsp.Position:
        """The client's position of the code-point ``offset`` into the text."""
        line = bisect_right(self._starts, offset) - 1
        column = offset - self._starts[line]
        return lsp.Position(line=line, character=_units(self.lines[line][:column], self.encoding))

    def replace_all(self, new: str) -> lsp.TextEdit | None:
        """One edit turning the text into ``new``: the changed middle only, so the client
        keeps its cursor and markers around it (None: nothing changes)."""
        old = self.text
        if old == new:
            return None
        start = 0
        limit = min(len(old), len(new))
        while start < limit and old[start] == new[start]:
            start += 1
        if 0 < start and old[start - 1] == "\r":
            start -= 1  # never between a CR and its LF: that is no position of the client's
        end = 0
        while end < limit - start and old[-1 - end] == new[-1 - end]:
            end += 1
        if 0 < end < len(old) and old[-1 - end] == "\r" and old[-end] == "\n":
            end -= 1
        span = lsp.Range(start=self.at_offset(start), end=self.at_offset(len(old) - end))
        return lsp.TextEdit(range=span, new_text=new[start : len(new) - end])
