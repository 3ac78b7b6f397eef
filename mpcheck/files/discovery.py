"""Which files to check, with ruff's rules for ``exclude``, ``.gitignore`` and explicit paths.

Directories are walked with ``os.scandir`` and excluded directories are pruned before they are
entered, so a ``.venv`` or ``node_modules`` costs one name lookup. Paths named on the command
line are always checked (ruff and flake8 users rely on this) unless ``force_exclude`` is set,
which is what pre-commit needs because it always passes explicit file names.

Each directory's entries are tested against the excludes of the configuration governing that
directory (the closest config above it, as ruff does), so a nested project's own ``exclude``
applies inside it and its patterns are relative to its own root.

Patterns are gitignore-style globs (:mod:`mpcheck.settings.globs`) rather than pathspec's: pathspec
answers "is this path or one of its parents ignored?", but ruff (and the ``ignore`` crate behind
it) tests each walked entry on its own, which is what makes ``mpcheck build/`` check ``build/``
even though ``build`` is excluded by default.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from mpcheck.settings.config import Settings
from mpcheck.settings.globs import GlobPattern, parse_pattern

__all__ = [
    "PYTHON_SUFFIXES",
    "GlobPattern",
    "MissingPathError",
    "SettingsLookup",
    "discover",
    "parse_pattern",
]

PYTHON_SUFFIXES: tuple[str, ...] = (".py", ".pyi", ".ipynb")


class MissingPathError(Exception):
    """A path given on the command line does not exist."""


def _posix(path: str) -> str:
    return path if os.sep == "/" else path.replace(os.sep, "/")


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


# The settings governing a directory (the closest config above it): what a walk asks for each
# directory it enters. A plain Settings stands for one configuration used everywhere.
SettingsLookup = Callable[[str], Settings]


class _Scope:
    """One configuration's exclude patterns, with the root they are relative to."""

    def __init__(self, settings: Settings) -> None:
        root = os.path.abspath(settings.root)
        self.root = root
        self.root_prefix = root if root.endswith(os.sep) else root + os.sep
        parsed = (parse_pattern(p) for p in settings.effective_exclude)
        self.exclude = _PatternSet([p for p in parsed if p is not None])
        self.respect_gitignore = settings.respect_gitignore
        self.suffixes = PYTHON_SUFFIXES if settings.include_notebooks else (".py", ".pyi")

    def rel(self, path: str) -> str | None:
        if path == self.root:
            return ""
        if path.startswith(self.root_prefix):
            return _posix(path[len(self.root_prefix) :])
        return None

    def excluded(self, rel: str | None, name: str, is_dir: bool) -> bool:
        return self.exclude.match(rel, name, is_dir) is True


class _Walker:
    def __init__(self, lookup: SettingsLookup, track_gitignore: bool) -> None:
        self.errors: list[str] = []
        self.lookup = lookup
        # Followed whenever some configuration may want it; each scope decides whether to apply.
        self.track_gitignore = track_gitignore
        self._scopes: dict[int, tuple[Settings, _Scope]] = {}  # keeps the Settings alive
        self._gitignore_cache: dict[str, _Level | None] = {}

    def scope(self, directory: str) -> _Scope:
        """The compiled excludes of the configuration governing ``directory``."""
        settings = self.lookup(directory)
        cached = self._scopes.get(id(settings))
        if cached is None:
            cached = self._scopes[id(settings)] = (settings, _Scope(settings))
        return cached[1]

    # -- exclude -----------------------------------------------------------------------------
    def force_excluded(self, path: str) -> bool:
        """ruff's ``--force-exclude``: the path or a directory above it (below root) is excluded.

        The configuration governing the path decides, as in ruff, and only its
        ``exclude``/``extend-exclude`` apply here, not ``.gitignore``.
        """
        is_dir = os.path.isdir(path)
        scope = self.scope(path if is_dir else os.path.dirname(path))
        rel = scope.rel(path)
        parts = rel.split("/") if rel else []
        if rel is None:  # outside the root: only names can match, as in ruff
            parts = list(Path(path).parts[1:])
        for i, name in enumerate(parts):
            sub_rel = "/".join(parts[: i + 1]) if rel is not None else None
            if scope.excluded(sub_rel, name, is_dir or i < len(parts) - 1):
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
        parsed = [p for p in map(_gitignore_pattern, lines) if p]
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
        """Collect Python files below ``start``, testing each entry (never ``start`` itself).

        An entry is tested against the configuration governing its directory, so a nested
        project's config file decides what is walked below it, not whether it is entered.
        """
        track = self.track_gitignore
        stack: list[tuple[str, _Levels | None]] = [
            (start, self.initial_levels(start) if track else None)
        ]
        while stack:
            directory, levels = stack.pop()
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError as exc:  # files may hide in it: the run cannot say it is clean
                self.errors.append(f"{directory}: cannot read the directory: {exc.strerror}")
                continue
            if track:
                names = {entry.name for entry in entries}
                if ".git" in names:  # a (nested) repository: outer ignore files stop here
                    levels = self.repo_levels(directory)
                if levels is not None and ".gitignore" in names:
                    levels = self.with_gitignore(levels, directory)
            scope = self.scope(directory)
            suffixes = scope.suffixes
            dir_rel = scope.rel(directory)
            ignores = levels if scope.respect_gitignore else None
            for entry in entries:
                name = entry.name
                try:
                    # Symlinked directories are not followed (like ruff), so no cycles.
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if not is_dir and not (name.endswith(suffixes) and entry.is_file()):
                        continue
                except OSError:
                    continue
                if dir_rel is None:
                    rel = None
                else:
                    rel = f"{dir_rel}/{name}" if dir_rel else name
                if scope.excluded(rel, name, is_dir):
                    continue
                if ignores and self.gitignored(ignores, entry.path, name, is_dir):
                    continue
                if is_dir:
                    stack.append((entry.path, levels))
                else:
                    out.add(entry.path)


def _gitignore_pattern(line: str) -> GlobPattern | None:
    """A line of a .gitignore; one git cannot use either (``[z-a]``) is skipped, as git does."""
    try:
        return parse_pattern(line, gitignore=True)
    except re.error:
        return None


def discover(
    paths: Sequence[Path],
    settings: Settings | SettingsLookup,
    *,
    force_exclude: bool = False,
    errors: list[str] | None = None,
    warnings: list[str] | None = None,
) -> list[Path]:
    """The sorted, de-duplicated absolute paths of the files to check.

    ``settings`` is one configuration for everything, or a lookup giving the configuration
    that governs each directory (:meth:`mpcheck.settings.resolver.Resolver.settings_for`).
    Explicit files are returned whatever their exclusion (unless ``force_exclude``) if they
    are Python (``.py``, ``.pyi``, ``.ipynb``); others are skipped, named in ``warnings``;
    directories contribute their ``*.py``/``*.pyi`` (and ``*.ipynb`` unless
    ``include-notebooks = false``) files that are neither excluded nor gitignored. Raises
    :class:`MissingPathError` for a path that does not exist; a directory that cannot be
    read is skipped and named in ``errors`` (when given).
    """
    absolute: list[str] = []
    for path in paths:
        full = os.path.abspath(path)
        try:
            mode = os.stat(full).st_mode
        except OSError:
            raise MissingPathError(f"{path}: No such file or directory") from None
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):  # ``/dev/zero`` would never end
            raise MissingPathError(f"{path}: not a regular file or directory")
        absolute.append(full)
    if isinstance(settings, Settings):
        fixed = settings
        walker = _Walker(lambda _directory: fixed, fixed.respect_gitignore)
    else:
        walker = _Walker(settings, True)
    found: set[str] = set()
    for given, full in zip(paths, absolute, strict=True):
        if force_exclude and walker.force_excluded(full):
            continue
        if os.path.isdir(full):
            walker.walk(full, found)
        elif full.endswith(PYTHON_SUFFIXES):
            found.add(full)
        elif warnings is not None:  # as ruff: a README.md named by a glob is not Python
            warnings.append(f"{given}: not a Python file (.py, .pyi, .ipynb), skipped")
    if errors is not None:
        errors += walker.errors
    return sorted(Path(p) for p in found)
