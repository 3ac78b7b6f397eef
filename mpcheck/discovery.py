"""Which files to check, with ruff's rules for ``exclude``, ``.gitignore`` and explicit paths.

Directories are walked with ``os.scandir`` and excluded directories are pruned before they are
entered, so a ``.venv`` or ``node_modules`` costs one name lookup. Paths named on the command
line are always checked (ruff and flake8 users rely on this) unless ``force_exclude`` is set,
which is what pre-commit needs because it always passes explicit file names.

Patterns are gitignore-style globs compiled here rather than with pathspec: pathspec answers
"is this path or one of its parents ignored?", but ruff (and the ``ignore`` crate behind it)
tests each walked entry on its own, which is what makes ``mpcheck build/`` check ``build/``
even though ``build`` is excluded by default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from mpcheck.config import Settings

__all__ = ["PYTHON_SUFFIXES", "GlobPattern", "MissingPathError", "discover", "parse_pattern"]

PYTHON_SUFFIXES: tuple[str, ...] = (".py", ".pyi")


class MissingPathError(Exception):
    """A path given on the command line does not exist."""


def _posix(path: str) -> str:
    return path if os.sep == "/" else path.replace(os.sep, "/")


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


def _combine(patterns: Iterable[GlobPattern]) -> re.Pattern[str] | None:
    bodies = [f"(?:{p.body})" for p in patterns]
    return re.compile("|".join(bodies)) if bodies else None


class _Any:
    """Whether any of some patterns matches an entry, with one regex per kind of test."""

    def __init__(self, patterns: Sequence[GlobPattern]) -> None:
        names = [p for p in patterns if not p.anchored]
        paths = [p for p in patterns if p.anchored]
        self._name_dir = _combine(names)
        self._name_file = _combine(p for p in names if not p.dir_only)
        self._path_dir = _combine(paths)
        self._path_file = _combine(p for p in paths if not p.dir_only)

    def matches(self, rel: str | None, name: str, is_dir: bool) -> bool:
        name_re = self._name_dir if is_dir else self._name_file
        if name_re is not None and name_re.fullmatch(name):
            return True
        path_re = self._path_dir if is_dir else self._path_file
        return path_re is not None and rel is not None and path_re.fullmatch(rel) is not None


class _PatternSet:
    """Patterns of one source (a .gitignore, the exclude list); the last match wins."""

    def __init__(self, patterns: Sequence[GlobPattern]) -> None:
        self.patterns = tuple(patterns)
        self.has_anchored = any(p.anchored for p in patterns)
        self.has_negation = any(p.negated for p in patterns)
        # Combined regexes answer "does any pattern match?" at once; only when a negation
        # matches too does the order matter, and then the patterns are tried last to first.
        self._positive = _Any([p for p in patterns if not p.negated])
        self._negative = _Any([p for p in patterns if p.negated])

    def match(self, rel: str | None, name: str, is_dir: bool) -> bool | None:
        """True: matched, False: re-included by a negation, None: no pattern applies."""
        if self.has_negation and self._negative.matches(rel, name, is_dir):
            for pattern in reversed(self.patterns):
                if pattern.matches(rel, name, is_dir):
                    return not pattern.negated
        return True if self._positive.matches(rel, name, is_dir) else None


class _Level:
    """The patterns of one .gitignore (or .git/info/exclude) and the directory they apply to."""

    def __init__(self, base: str, patterns: _PatternSet) -> None:
        self.patterns = patterns
        self.cut = len(base) if base.endswith(os.sep) else len(base) + 1


_Levels = tuple[_Level, ...]


class _Walker:
    def __init__(self, settings: Settings) -> None:
        root = os.path.abspath(settings.root)
        self.root = root
        self.root_prefix = root if root.endswith(os.sep) else root + os.sep
        parsed = (parse_pattern(p) for p in settings.effective_exclude)
        self.exclude = _PatternSet([p for p in parsed if p is not None])
        self.respect_gitignore = settings.respect_gitignore
        self._gitignore_cache: dict[str, _Level | None] = {}

    # -- exclude -----------------------------------------------------------------------------
    def rel(self, path: str) -> str | None:
        if path == self.root:
            return ""
        if path.startswith(self.root_prefix):
            return _posix(path[len(self.root_prefix) :])
        return None

    def excluded(self, rel: str | None, name: str, is_dir: bool) -> bool:
        return self.exclude.match(rel, name, is_dir) is True

    def force_excluded(self, path: str) -> bool:
        """ruff's ``--force-exclude``: the path or a directory above it (below root) is excluded.

        Like ruff, only ``exclude``/``extend-exclude`` apply here, not ``.gitignore``.
        """
        is_dir = os.path.isdir(path)
        rel = self.rel(path)
        parts = rel.split("/") if rel else []
        if rel is None:  # outside the root: only names can match, as in ruff
            parts = list(Path(path).parts[1:])
        for i, name in enumerate(parts):
            sub_rel = "/".join(parts[: i + 1]) if rel is not None else None
            if self.excluded(sub_rel, name, is_dir or i < len(parts) - 1):
                return True
        return False

    # -- gitignore ---------------------------------------------------------------------------
    def _read_level(self, base: str, file: str) -> _Level | None:
        if file in self._gitignore_cache:
            return self._gitignore_cache[file]
        level: _Level | None = None
        try:
            with open(file, encoding="utf-8", errors="surrogateescape") as fh:
                lines = fh.read().splitlines()
        except OSError:
            lines = []
        parsed = [p for p in (parse_pattern(line, gitignore=True) for line in lines) if p]
        if parsed:
            level = _Level(base, _PatternSet(parsed))
        self._gitignore_cache[file] = level
        return level

    def repo_levels(self, repo_root: str) -> _Levels:
        """A new repository starts with its ``.git/info/exclude`` (lowest precedence)."""
        level = self._read_level(repo_root, os.path.join(repo_root, ".git", "info", "exclude"))
        return (level,) if level else ()

    def with_gitignore(self, levels: _Levels, directory: str) -> _Levels:
        level = self._read_level(directory, os.path.join(directory, ".gitignore"))
        return (*levels, level) if level else levels

    def initial_levels(self, directory: str) -> _Levels | None:
        """Ignore files from the enclosing repository's root down to ``directory``'s parent."""
        chain: list[str] = []
        current = os.path.dirname(directory)
        while True:
            chain.append(current)
            if os.path.lexists(os.path.join(current, ".git")):
                levels = self.repo_levels(current)
                for ancestor in reversed(chain):
                    levels = self.with_gitignore(levels, ancestor)
                return levels
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent

    @staticmethod
    def gitignored(levels: _Levels, path: str, name: str, is_dir: bool) -> bool:
        for level in reversed(levels):  # deeper .gitignore files take precedence
            patterns = level.patterns
            rel = _posix(path[level.cut :]) if patterns.has_anchored else None
            result = patterns.match(rel, name, is_dir)
            if result is not None:
                return result
        return False

    # -- walking -----------------------------------------------------------------------------
    def walk(self, start: str, out: set[str]) -> None:
        """Collect Python files below ``start``, testing each entry (never ``start`` itself)."""
        levels = self.initial_levels(start) if self.respect_gitignore else None
        stack: list[tuple[str, str | None, _Levels | None]] = [(start, self.rel(start), levels)]
        while stack:
            directory, dir_rel, levels = stack.pop()
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError:  # unreadable directory: nothing we can check
                continue
            if self.respect_gitignore:
                names = {entry.name for entry in entries}
                if ".git" in names:  # a (nested) repository: outer ignore files stop here
                    levels = self.repo_levels(directory)
                if levels is not None and ".gitignore" in names:
                    levels = self.with_gitignore(levels, directory)
            for entry in entries:
                name = entry.name
                try:
                    # Symlinked directories are not followed (like ruff), so no cycles.
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if not is_dir and not (name.endswith(PYTHON_SUFFIXES) and entry.is_file()):
                        continue
                except OSError:
                    continue
                if dir_rel is None:
                    rel = None
                else:
                    rel = f"{dir_rel}/{name}" if dir_rel else name
                if self.excluded(rel, name, is_dir):
                    continue
                if levels and self.gitignored(levels, entry.path, name, is_dir):
                    continue
                if is_dir:
                    stack.append((entry.path, rel, levels))
                else:
                    out.add(entry.path)


def discover(
    paths: Sequence[Path], settings: Settings, *, force_exclude: bool = False
) -> list[Path]:
    """The sorted, de-duplicated absolute paths of the files to check.

    Explicit files are returned whatever their suffix or exclusion (unless ``force_exclude``);
    directories contribute their ``*.py``/``*.pyi`` files that are neither excluded nor
    gitignored. Raises :class:`MissingPathError` for a path that does not exist.
    """
    absolute: list[str] = []
    for path in paths:
        full = os.path.abspath(path)
        if not os.path.exists(full):
            raise MissingPathError(f"{path}: No such file or directory")
        absolute.append(full)
    walker = _Walker(settings)
    found: set[str] = set()
    for full in absolute:
        if force_exclude and walker.force_excluded(full):
            continue
        if os.path.isdir(full):
            walker.walk(full, found)
        else:
            found.add(full)
    return sorted(Path(p) for p in found)
