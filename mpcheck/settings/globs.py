"""gitignore-style globs, compiled to regexes the way ruff's ``ignore`` crate matches them.

Shared by discovery (exclude, ``.gitignore``), per-file-ignores and the rebasing of
command-line and extended configurations' patterns, so every pattern in mpcheck means the
same thing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["GlobPattern", "parse_pattern", "rebase_pattern", "segment_matches"]


def _translate_class(body: str) -> str:
    """The inside of a ``[...]`` class; ranges stay ranges, everything else is literal."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            escaped = body[i + 1]
            out.append(escaped if escaped.isalnum() else "\\" + escaped)
            i += 2
            continue
        out.append("\\" + c if c in "\\[]^" else c)
        i += 1
    return "".join(out)


def _translate_segment(segment: str) -> str:
    """Regex for one path component of a glob: ``*``, ``?``, ``[...]``, ``\\x``."""
    out: list[str] = []
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(segment[i + 1]))
            i += 2
        elif c == "*":
            while i < n and segment[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            negate = j < n and segment[j] in "!^"
            if negate:
                j += 1
            body_start = j
            if j < n and segment[j] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 2 if segment[j] == "\\" else 1
            if j >= n:  # no closing bracket: a literal "["
                out.append(re.escape(c))
                i += 1
                continue
            chars = _translate_class(segment[body_start:j])
            out.append(f"[^/{chars}]" if negate else f"[{chars}]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class GlobPattern:
    """One gitignore-style pattern, compiled for the two ways mpcheck matches paths.

    ``matches`` tests an entry on its own (exclude and ``.gitignore`` during a pruning walk);
    ``matches_within`` also accepts a file below a matching directory (per-file-ignores).
    ``rel`` is the ``/``-separated path relative to the pattern's base directory, or None when
    the path is outside it (then only slash-less patterns, which match a name, can match).
    """

    def __init__(self, source: str, body: str, *, anchored: bool, dir_only: bool, negated: bool):
        self.source = source
        self.body = body
        self.anchored = anchored
        self.dir_only = dir_only
        self.negated = negated
        self._entry = re.compile(body)
        suffix = "/.+" if dir_only else "(?:/.+)?"
        self._within = re.compile(body + suffix) if anchored else None

    def __repr__(self) -> str:
        return f"GlobPattern({self.source!r})"

    def matches(self, rel: str | None, name: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if not self.anchored:
            return self._entry.fullmatch(name) is not None
        return rel is not None and self._entry.fullmatch(rel) is not None

    def matches_within(self, rel: str | None, name: str) -> bool:
        """For a file: does the pattern match it or one of its directories below the base?"""
        if self._within is None:
            parts = rel.split("/") if rel is not None else [name]
            candidates = parts[:-1] if self.dir_only else parts
            return any(self._entry.fullmatch(part) for part in candidates)
        return rel is not None and self._within.fullmatch(rel) is not None


def glob_problem(pattern: str) -> str:
    """Why ``pattern`` is not a valid glob (``[z-a]``: a reversed range), or ``""``."""
    try:
        parse_pattern(pattern)
    except re.error as exc:
        return exc.msg
    return ""


def parse_pattern(line: str, *, gitignore: bool = False) -> GlobPattern | None:
    """Compile a gitignore-style glob; None for a blank line or (in .gitignore) a comment."""
    pattern = line
    if gitignore:
        pattern = pattern.rstrip("\r\n")
        if pattern.startswith("#"):
            return None
        pattern = re.sub(r"(?<!\\) +$", "", pattern)
    if not pattern:
        return None
    negated = pattern.startswith("!")
    if negated:
        pattern = pattern[1:]
    dir_only = pattern.endswith("/") and not pattern.endswith("\\/")
    pattern = pattern.rstrip("/") if dir_only else pattern
    anchored = "/" in pattern
    pattern = pattern.lstrip("/")
    if not pattern:
        return None
    parts = pattern.split("/")
    regex: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            regex.append(".*" if last else "(?:.*/)?")
        else:
            regex.append(_translate_segment(part) + ("" if last else "/"))
    return GlobPattern(line, "".join(regex), anchored=anchored, dir_only=dir_only, negated=negated)


def segment_matches(segment: str, name: str) -> bool:
    """Whether one glob path component (``*``, ``?``, ``[...]``) matches the name ``name``."""
    return re.fullmatch(_translate_segment(segment), name) is not None


_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def _parts_below(path: Path, base: Path) -> list[str] | None:
    """``path``'s components below ``base`` (``[]`` for ``base`` itself); None if not below."""
    try:
        rel = os.path.relpath(path, base)
    except ValueError:  # another drive on Windows
        return None
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return [] if rel == os.curdir else rel.split(os.sep)


def _strip_prefix(segments: list[str], prefix: list[str]) -> list[list[str]]:
    """What is left of a glob's segments for paths below ``prefix`` (empty: matches none)."""
    if not prefix:
        return [segments] if segments else []  # no segments left: it names an ancestor
    if not segments:
        return []
    head, rest = segments[0], segments[1:]
    if head == "**":  # spans the whole prefix and goes on, or ends at one of its components
        out = [segments]
        for i in range(len(prefix)):
            out += _strip_prefix(rest, prefix[i:])
        return out
    return _strip_prefix(rest, prefix[1:]) if segment_matches(head, prefix[0]) else []


def rebase_pattern(pattern: str, cwd: Path | None, root: Path) -> tuple[str, ...]:
    """A pattern written relative to ``cwd`` (a CLI option, like ruff, or an extended config
    file's directory) as patterns relative to ``root``.

    Each configuration has its own root, which may be above, at or below the cwd; an anchored
    pattern that can match nothing below ``root`` is dropped.
    """
    body = pattern.rstrip("/")
    if cwd is None or "/" not in body:  # slash-less patterns match a name at any depth
        return (pattern,)
    inside = _parts_below(cwd, root)
    if inside is not None:  # cwd at or below the root: prepend the path between them
        if not inside:
            return (pattern,)
        prefix = _GLOB_SPECIAL.sub(r"\\\1", "/".join(inside))
        return ("/" + prefix + "/" + pattern.lstrip("/"),)
    below = _parts_below(root, cwd)
    if below is None:  # unrelated directories
        return ()
    trail = pattern[len(body) :]
    rests = _strip_prefix(body.lstrip("/").split("/"), below)
    return tuple(dict.fromkeys("/" + "/".join(rest) + trail for rest in rests))
