"""A source file as bytes and as the text the parser saw, so edits land on the right bytes.

Positions in findings are what libcst reports: lines split where Python's tokenizer splits
them (``\\n``, ``\\r\\n`` and ``\\r`` only: form feeds, ``\\x85`` and U+2028 inside strings
and comments are not line breaks), columns in code points, and a UTF-8 byte-order mark is
not part of line 1. Turning a position into an offset, and edited text back into bytes,
must follow the same rules, in the file's own encoding (PEP 263), or every edit after an
odd character lands in the wrong place.
"""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property

from mpcheck.diagnostics import Position

__all__ = ["SourceError", "SourceFile", "UnsafeEncoding", "split_lines"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, *, keepends: bool = False) -> list[str]:
    """``text``'s lines where Python's tokenizer breaks them: at ``\\n``, ``\\r\\n`` and
    ``\\r`` only. ``str.splitlines`` also breaks at form feeds, ``\\x1c``-``\\x1e``,
    ``\\x85``, U+2028 and U+2029, which shifts every row after one of them."""
    out, start = [], 0
    for found in _LINE_BREAK.finditer(text):
        out.append(text[start : found.end() if keepends else found.start()])
        start = found.end()
    if start < len(text):
        out.append(text[start:])
    return out


class SourceError(Exception):
    """The file cannot be decoded, or an edit cannot be encoded, in the file's encoding."""


class UnsafeEncoding(SourceError):
    """The file's encoding does not give back the bytes it was read from (``unicode_escape``
    turns line breaks into ``\\n``, ``utf-7`` shifts differently): an edit would change
    bytes it does not mean to, so the file is not fixed."""


@dataclass(frozen=True)
class SourceFile:
    """A file's bytes and the text they decode to, for edits that keep every byte."""

    data: bytes  # exactly the bytes that were read
    encoding: str  # the codec that decodes them (from the BOM or the coding cookie)
    bom: bytes  # the byte-order mark in front of ``text``, kept on write
    text: str  # the decoded text after the BOM, which positions refer to

    @classmethod
    def decode(cls, data: bytes) -> SourceFile:
        """Decode as Python does: BOM, then coding cookie, then UTF-8."""
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:  # an unknown codec in the cookie, or a BOM/cookie clash
            raise SourceError(f"cannot decode the file: {exc}") from None
        bom = (
            codecs.BOM_UTF8 if encoding == "utf-8-sig" and data.startswith(codecs.BOM_UTF8) else b""
        )
        codec = "utf-8" if encoding == "utf-8-sig" else encoding
        try:
            text = data[len(bom) :].decode(codec)
        except UnicodeDecodeError as exc:
            where = f"byte {exc.start + len(bom)}"
            raise SourceError(f"cannot decode the file as {codec} ({where})") from None
        return cls(data, codec, bom, text)

    @classmethod
    def from_text(cls, text: str) -> SourceFile:
        """Text that was never bytes on disk (a test, an editor buffer): UTF-8, no BOM."""
        return cls(text.encode("utf-8", "surrogatepass"), "utf-8", b"", text)

    @property
    def lines(self) -> list[str]:
        """The lines as the tokenizer sees them, without their endings."""
        starts = self.line_starts
        ends = [*starts[1:], len(self.text)]
        return [self.text[a:b].rstrip("\r\n") for a, b in zip(starts, ends, strict=True)]

    def encode(self, text: str) -> bytes:
        """``text`` (an edited ``self.text``) as bytes, with this file's BOM and encoding.

        Only where the encoding writes back exactly the bytes that were read, and reads back
        exactly ``text``: otherwise bytes outside the edits would change (UnsafeEncoding)."""
        if text == self.text:
            return self.data
        try:
            new = self.bom + text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise SourceError(
                f"a fix writes {bad!r}, which {self.encoding} cannot encode"
            ) from None
        if not self._round_trips or new[len(self.bom) :].decode(self.encoding) != text:
            raise UnsafeEncoding(
                f"its encoding ({self.encoding}) does not write back the bytes it was read "
                "from, so a fix would change other bytes; not fixed"
            )
        return new

    @cached_property
    def _round_trips(self) -> bool:
        try:
            return self.bom + self.text.encode(self.encoding) == self.data
        except UnicodeEncodeError:
            return False

    @cached_property
    def line_starts(self) -> tuple[int, ...]:
        """The offset in ``text`` where each line starts (line 1 at index 0)."""
        return (0, *(m.end() for m in _LINE_BREAK.finditer(self.text)))

    def offset(self, pos: Position) -> int:
        """The index in ``text`` of a 1-based row and column, clamped to the text."""
        starts = self.line_starts
        row = min(max(pos.row, 1), len(starts))
        end = starts[row] if row < len(starts) else len(self.text)
        return min(starts[row - 1] + max(pos.column, 1) - 1, end)

    def position(self, offset: int) -> Position:
        """The 1-based row and column of an index in ``text`` (the inverse of ``offset``)."""
        row = bisect_right(self.line_starts, offset)
        return Position(row, offset - self.line_starts[row - 1] + 1)
