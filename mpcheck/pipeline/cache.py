"""The persistent cache: what analysing a file gave, so an unchanged file is never analysed twice.

One JSON entry per checked file holds the findings *before* selection and suppression (so
``--select``, ``--ignore``, ``noqa`` and the output format never need re-analysis), the file's
summary for the files that import it, and what the analysis depended on: for every project
file whose summary it consulted, directly or through other summaries, that file's content hash
and summary digest. An entry is used only when the file's bytes hash the same and every
dependency either hashes the same or still summarises to the same digest, so editing a helper
re-checks its importers only when what they can see of it changed. Each file's modification
time and size, taken before its bytes were read, stand in for its hash when they have not
changed, so a warm run neither reads nor hashes what did not change; they are not recorded
for a file modified in the last two seconds, whose rewrite within the same timestamp tick
would go unseen.

Entries live under ``<dir>/<fingerprint>/``: the fingerprint covers mpcheck's version, the
code of the engine and of every rule module (an editable install or a plugin upgrade is a new
cache), and the settings that change analysis. Every write is a temporary file renamed into
place; anything unreadable, truncated or foreign (a symbolic link, a FIFO, a device, an
oversized file) is ignored and rewritten, and no link inside the cache is followed. Whose
directory the cache may use is :mod:`mpcheck.pipeline.cache_dir`'s concern. The cache never stores
source code.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpcheck import __version__
from mpcheck.diagnostics import Diagnostic, Edit, Fix, Position, Related, Severity
from mpcheck.files.hashing import blake2b, hex_digest
from mpcheck.pipeline.cache_dir import claim, read_small

__all__ = ["CACHE_DIR_NAME", "Entry", "FileCache", "content_hash"]

CACHE_DIR_NAME = ".mpcheck_cache"
FORMAT = 3
RACY_NS = 2_000_000_000  # a file modified this recently is known by its hash only

# A file's (st_mtime_ns, st_size) when it was read; None when it is not to be trusted.
Stamp = tuple[int, int]
# An entry larger than this is damage (or a planted file), not a result: it is not read.
MAX_ENTRY = 32 << 20


def content_hash(data: bytes) -> str:
    return hex_digest(data)


def stamp(path: str) -> tuple[Stamp, bool] | None:
    """The file's (modification time, size), and whether it may stand in for its content
    (not when the file was modified less than ``RACY_NS`` ago); None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size), st.st_mtime_ns < time.time_ns() - RACY_NS


@dataclass(frozen=True)
class Dependency:
    """A project file whose summary the analysis consulted: its bytes' hash and what its
    summary's digest was (None: it had no summary, e.g. it did not parse)."""

    content: str
    digest: str | None
    stamp: Stamp | None = None


@dataclass(frozen=True)
class Entry:
    """What analysing a file gave, with what it depended on (the module docstring says how
    it is judged still valid)."""

    content: str
    diagnostics: tuple[Diagnostic, ...]
    summary: str | None = None  # the file's ModuleSummary as JSON
    digest: str | None = None
    dependencies: Mapping[str, Dependency] = field(default_factory=dict)
    stamp: Stamp | None = None
    noqa: bool = True  # the file may hold a ``noqa`` directive: suppressing needs its bytes
    run: str = ""  # the run that wrote it (a random token): counts say "analysed" within it
    # False: only its summary, from a walk inside another file's walk that met a module its
    # own check would see (``claims``): for that run's lookups, not for the file's check
    checked: bool = True


def fingerprint(modules: Iterable[object], settings: Mapping[str, object]) -> str:
    """What makes results comparable: the version, the code that produced them, the settings.

    The code is identified by each module file's size and modification time: cheap to stat,
    and it changes with every edit of an editable install or upgrade of a rule package.
    """
    h = blake2b(digest_size=12)
    h.update(f"{FORMAT}:{__version__}:{sys.version_info[:2]}".encode())
    files: set[str] = set()
    for module in modules:
        origin = getattr(module, "__file__", None)
        if origin:
            files.add(origin)
    # The whole package (the engine, the knowledge tables), not this module's folder: an edit
    # of an editable install's engine must invalidate what the old engine produced.
    package = Path(__file__).resolve().parents[1]
    files.update(str(p) for p in package.rglob("*.py"))
    for name in sorted(files):
        try:
            st = os.stat(name)
        except OSError:
            continue
        h.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()


class FileCache:
    """Entries keyed by file path, under one fingerprint directory. Reads never raise; a cache
    that cannot be written is reported once (as a warning) and the run goes on without it."""

    def __init__(self, directory: Path, fingerprint: str) -> None:
        self.directory = directory
        self._bucket = directory / fingerprint
        self._writable = True
        self.warning: str | None = None

    def has(self, path: Path) -> bool:
        """Whether an entry for ``path`` exists (valid or not: it is not read)."""
        try:
            return stat.S_ISREG(os.lstat(self._file(path)).st_mode)
        except OSError:
            return False

    def load(self, path: Path) -> Entry | None:
        target = self._file(path)
        if not _real_dirs(self.directory, target.parent):
            return None
        raw = read_small(target, MAX_ENTRY)
        if raw is None:
            return None
        try:
            data = json.loads(raw.decode("utf-8"))
            if data.get("format") != FORMAT or data.get("path") != str(path):
                return None
            return _entry(data)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None

    def store(self, path: Path, entry: Entry) -> None:
        if not self._writable:
            return
        data = {"format": FORMAT, "path": str(path), **_plain_entry(entry)}
        import tempfile  # a warm run writes nothing

        target = self._file(path)
        try:
            self._prepare(target.parent)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    # (``dumps``: ``json.dump`` encodes in Python, chunk by chunk, where
                    # ``dumps`` runs the C encoder; a cold run writes an entry per file)
                    out.write(json.dumps(data, separators=(",", ":")))
                os.replace(tmp, target)
            except BaseException:
                _remove(tmp)
                raise
        except OSError as exc:
            self._writable = False
            reason = exc.strerror or str(exc)
            self.warning = (
                f"cannot write the cache in {self.directory} ({reason}); going on without it"
            )

    def _file(self, path: Path) -> Path:
        name = hex_digest(str(path).encode("utf-8", "surrogateescape"))
        return self._bucket / name[:2] / f"{name[2:]}.json"

    def _prepare(self, bucket: Path) -> None:
        """Make the entry's directories; one that is not a real directory (a link planted in
        the cache, a file) is removed first, so no write lands outside the cache."""
        if _real_dirs(self.directory, bucket):
            return
        if not self.directory.is_dir():  # removed under a running check: made (and tagged) anew
            claim(self.directory)
        path = self.directory
        for part in bucket.relative_to(self.directory).parts:
            path = path / part
            try:
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    continue
                os.unlink(path)
            except FileNotFoundError:
                pass
            try:
                path.mkdir()
            except FileExistsError:  # (another run made it meanwhile)
                if not _real_dirs(path, path):
                    raise


def _real_dirs(root: Path, directory: Path) -> bool:
    """Whether every directory from ``root`` (exclusive) down to ``directory`` is a real one."""
    path = root
    try:
        for part in directory.relative_to(root).parts:
            path = path / part
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return False
        return stat.S_ISDIR(os.lstat(directory).st_mode)
    except OSError:
        return False


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _position(value: list[int]) -> Position:
    row, column = value
    return Position(int(row), int(column))


def _plain_entry(entry: Entry) -> dict[str, Any]:
    return {
        "content": entry.content,
        "summary": entry.summary,
        "digest": entry.digest,
        "dependencies": {p: [d.content, d.digest, d.stamp] for p, d in entry.dependencies.items()},
        "diagnostics": [_plain_diagnostic(d) for d in entry.diagnostics],
        "stamp": entry.stamp,
        "noqa": entry.noqa,
        "run": entry.run,
        "checked": entry.checked,
    }


def _stamp(value: list[int] | None) -> Stamp | None:
    if value is None:
        return None
    mtime, size = value
    return int(mtime), int(size)


def _entry(data: dict[str, Any]) -> Entry:
    deps = {
        str(p): Dependency(str(c), d, _stamp(s)) for p, (c, d, s) in data["dependencies"].items()
    }
    return Entry(
        content=str(data["content"]),
        diagnostics=tuple(_diagnostic(d) for d in data["diagnostics"]),
        summary=data["summary"],
        digest=data["digest"],
        dependencies=deps,
        stamp=_stamp(data["stamp"]),
        noqa=bool(data["noqa"]),
        run=str(data.get("run", "")),
        checked=bool(data.get("checked", True)),
    )


def _plain_diagnostic(d: Diagnostic) -> dict[str, Any]:
    plain: dict[str, Any] = {
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "severity": d.severity.value,
        "filename": d.filename,
        "span": [[d.start.row, d.start.column], [d.end.row, d.end.column]],
        "noqa_row": d.noqa_row,
        "related": [
            [r.message, [r.start.row, r.start.column], [r.end.row, r.end.column], r.filename]
            for r in d.related
        ],
    }
    if d.fix is not None:
        edits = [
            [e.content, [e.start.row, e.start.column], [e.end.row, e.end.column]]
            for e in d.fix.edits
        ]
        plain["fix"] = [d.fix.message, edits, d.fix.applicability]
    return plain


def _diagnostic(data: dict[str, Any]) -> Diagnostic:
    start, end = data["span"]
    fix = None
    if "fix" in data:
        message, edits, applicability = data["fix"]
        fix = Fix(
            str(message),
            tuple(Edit(str(c), _position(s), _position(e)) for c, s, e in edits),
            str(applicability),
        )
    return Diagnostic(
        code=str(data["code"]),
        name=str(data["name"]),
        message=str(data["message"]),
        severity=Severity(data["severity"]),
        filename=str(data["filename"]),
        start=_position(start),
        end=_position(end),
        related=tuple(
            Related(str(m), _position(s), _position(e), str(f)) for m, s, e, f in data["related"]
        ),
        fix=fix,
        noqa_row=int(data["noqa_row"]),
    )
