"""Bracket matching in a file's blanked code (strings and comments emptied): which ``(``
holds an offset, where a call's arguments close, which ``(`` a ``)`` closes.

The record pass asks these at every use of a model's name and every call it reads; a Python
loop over each byte of up to 2,000 was a hot spot of the pass. The brackets are found by a
regular expression (one C scan) and only they are walked in Python; a backward walk scans the
window reversed. Every kind of bracket counts alike (``(`` may close with ``]``), as before:
blanked code is balanced wherever the answer matters, and a window that is not gives the
same answer as the byte loop did.
"""

from __future__ import annotations

import re

__all__ = ["closing", "enclosing", "innermost", "opening", "parts"]

_BRACKETS = re.compile(rb"[()\[\]{}]")
_BRACKETS_OR_COMMAS = re.compile(rb"[()\[\]{},]")
_OPENERS = b"([{"
_CLOSERS = b")]}"


def enclosing(code: bytes, at: int, reach: int = 1999) -> int:
    """The ``(`` of the call whose arguments hold ``at`` (its offset; -1: the bracket left
    open before ``at`` is a ``[`` or ``{``, or none is in the ``reach`` bytes before it)."""
    found = innermost(code, at, reach)
    return found if found >= 0 and code[found] == 0x28 else -1


def innermost(code: bytes, at: int, reach: int = 1999) -> int:
    """The bracket of any kind left open before ``at`` (its offset; -1: none in the
    ``reach`` bytes before it): a dict or list literal holding a value as much as a call."""
    window = code[max(0, at - reach) : at][::-1]
    depth = 0
    for found in _BRACKETS.finditer(window):
        if window[found.start()] in _CLOSERS:
            depth += 1
        elif depth == 0:
            return at - 1 - found.start()
        else:
            depth -= 1
    return -1


def opening(code: bytes, close: int, reach: int = 2000) -> int:
    """The bracket that the one at ``close`` closes (its offset; -1: none in the ``reach``
    bytes ending at ``close``)."""
    window = code[max(0, close - reach + 1) : close + 1][::-1]
    depth = 0
    for found in _BRACKETS.finditer(window):
        if window[found.start()] in _CLOSERS:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return close - found.start()
    return -1


def closing(code: bytes, start: int, reach: int = 2000) -> int:
    """Where the brackets whose contents start at ``start`` close (``start + reach`` or the
    code's end when they do not close before)."""
    depth, end = 1, min(len(code), start + reach)
    for found in _BRACKETS.finditer(code, start, end):
        depth += 1 if code[found.start()] in _OPENERS else -1
        if depth == 0:
            return found.start()
    return end


def parts(code: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """The top-level comma-separated parts of ``code[start:end]`` (a call's arguments), as
    ``(begin, end)`` offsets."""
    found, depth, begin = [], 0, start
    for match in _BRACKETS_OR_COMMAS.finditer(code, start, end):
        ch = code[match.start()]
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
        elif depth == 0:
            found.append((begin, match.start()))
            begin = match.start() + 1
    found.append((begin, end))
    return found
