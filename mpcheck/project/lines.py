"""A line-anchored pattern's matches, found by a literal part every match holds.

The record pass reads a file's headers and bindings with patterns anchored at a line's start
(``^`` under ``re.MULTILINE``: ``^[ \\t]*def[ \\t]+(\\w+)``). The regex engine tries such a
pattern at every offset of the file, which made these searches most of the pass's pattern
time. Searching for what each match must hold (the ``def`` keyword, a call's ``=``) and
trying the anchored pattern only at the start of the lines holding it gives the same matches,
in the same order, in a small part of the time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["line_matches"]


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
