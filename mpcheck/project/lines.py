"""A line-anchored pattern's matches, found by a literal part every match holds.

The record pass reads a file's headers and bindings with patterns anchored at a line's start
(``^`` under ``re.MULTILINE``: ``^[ \\t]*def[ \\t]+(\\w+)``). The regex engine tries such a
pattern at every offset of the file, which made these searches most of the pass's pattern
time. Searching for what each match must hold (the ``def`` keyword, a call's ``=``) and
trying the anchored pattern only at the start of the lines holding it gives the same matches,
in the same order, in a small part of the time.

Every ``def`` and ``class`` header of a file is found once (:func:`headers`): the record pass
and its sub-passes each read them (who calls whom, what runs at construction, which
functions nobody names), and each searched the whole file for them again. A narrower header
pattern of one of them is matched only at those headers' lines (:func:`narrowed`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["HEADER", "headers", "line_matches", "narrowed"]

# A ``def`` or ``class`` header: (indent, kind, name).
HEADER = re.compile(rb"^([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.MULTILINE)
_HEADER_WORD = re.compile(rb"(?:def|class)[ \t]+\w")  # (see :func:`line_matches`)


def line_matches(
    pattern: re.Pattern[bytes], lead: re.Pattern[bytes], code: bytes
) -> Iterator[re.Match[bytes]]:
    """What ``pattern.finditer(code)`` yields, for a ``pattern`` whose matches start at a
    line's start and hold a match of ``lead`` on that first line (``lead`` matching within one
    line: a hit overlapping another is on the same line, whose start is tried anyway)."""
    tried, end = -1, 0
    for hit in lead.finditer(code):
        line = code.rfind(b"\n", 0, hit.start()) + 1
        if line <= tried or line < end:
            continue  # (that line was tried, or lies inside the last match, as in finditer)
        tried = line
        found = pattern.match(code, line)
        if found is not None:
            end = found.end()
            yield found


def headers(code: bytes) -> list[re.Match[bytes]]:
    """Every match of :data:`HEADER` in ``code``, in order."""
    return list(line_matches(HEADER, _HEADER_WORD, code))


def narrowed(
    pattern: re.Pattern[bytes], found: list[re.Match[bytes]], code: bytes
) -> list[re.Match[bytes]]:
    """What ``pattern.finditer(code)`` yields, for a ``pattern`` that matches only at the
    start of a line where :data:`HEADER` matches (a narrower header: ``def`` only, unindented
    only, a class with its bases), given :data:`HEADER`'s matches ``found`` in ``code``."""
    out: list[re.Match[bytes]] = []
    end = 0
    for header in found:
        if header.start() < end:
            continue  # (inside the last match, as in finditer: a class's bases over lines)
        match = pattern.match(code, header.start())
        if match is not None:
            out.append(match)
            end = match.end()
    return out
