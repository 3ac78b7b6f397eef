"""Whose directory is the cache: what mpcheck may write into, and all ``mpcheck clean`` removes.

A cache directory is mpcheck's only when mpcheck made it (or found it empty) and it holds
nothing but mpcheck's layout: ``CACHEDIR.TAG`` (ours), ``.gitignore``, one directory per
fingerprint (``<24 hex>/<2 hex>/<entry>.json``) and its own temporary files. A directory that
already held anything else (a mistyped ``--cache-dir .``, ``cache-dir = ".."``, the home
directory) is never adopted, and ``clean`` refuses it: a cache is not worth a byte of the
user's work. Nothing here follows a symbolic link inside the cache directory.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

__all__ = ["CacheDirError", "claim", "clean", "read_small"]

TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by mpcheck.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Automatically created by mpcheck.\n*\n"
_FINGERPRINT = re.compile(r"[0-9a-f]{24}")
_SHARD = re.compile(r"[0-9a-f]{2}")
_OWN_FILE = re.compile(r"\.probe-\d+|\.tmp-.*")  # (what a run interrupted may leave)
_SMALL = 1 << 16


class CacheDirError(Exception):
    """The directory is not mpcheck's to write into or to remove (the message says why)."""


def read_small(path: Path | str, limit: int) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes, else None: a symbolic link,
    a FIFO (which would block), a device or an oversized file is not read."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def claim(directory: Path) -> None:
    """Make ``directory`` mpcheck's cache, or say why it cannot be: create it (tagged, with a
    ``.gitignore``) when missing or empty, take it as it is when it holds mpcheck's layout
    only, and refuse a directory that holds anything else."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        names = os.listdir(directory)
    if names:
        problem = _foreign(directory, names, deep=False)
        if problem is None and "CACHEDIR.TAG" not in names:
            problem = "no CACHEDIR.TAG of mpcheck's"
        if problem is not None:
            raise CacheDirError(
                f"{directory} is not empty and not an mpcheck cache ({problem}); "
                "choose a new or empty directory"
            )
    _create(directory / "CACHEDIR.TAG", TAG)
    _create(directory / ".gitignore", GITIGNORE)  # never replaced: the user may have edited it


def clean(directory: Path) -> bool:
    """Remove the cache at ``directory``; False when there was none. Only mpcheck's layout is
    removed, and only when the directory holds nothing else: anything else is refused whole,
    before a byte is removed."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise CacheDirError(f"{directory} is a symbolic link; not removed")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheDirError(f"{directory} is not a directory; not removed")
    names = os.listdir(directory)
    problem = _foreign(directory, names, deep=True)
    if problem is None and "CACHEDIR.TAG" not in names:
        problem = "no CACHEDIR.TAG of mpcheck's"
    if problem is not None:
        raise CacheDirError(f"{directory} is not an mpcheck cache ({problem}); not removed")
    import shutil

    for name in names:
        path = directory / name
        if _FINGERPRINT.fullmatch(name):
            shutil.rmtree(path)  # (a real directory, checked: rmtree never follows links)
        else:
            os.unlink(path)
    os.rmdir(directory)
    return True


def _foreign(directory: Path, names: list[str], *, deep: bool) -> str | None:
    """The first entry that is not mpcheck's layout, described; None when all are.
    ``deep``: the fingerprint directories' contents too (for ``clean``)."""
    for name in sorted(names):
        path = directory / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:  # (another run's temporary file, just renamed)
            continue
        if name == "CACHEDIR.TAG":
            data = read_small(path, _SMALL)
            if data is None or b"created by mpcheck" not in data:
                return "a CACHEDIR.TAG not written by mpcheck"
        elif name == ".gitignore" or _OWN_FILE.fullmatch(name):
            if not stat.S_ISREG(mode):
                return f"{name} is not a regular file"
        elif _FINGERPRINT.fullmatch(name) and stat.S_ISDIR(mode):
            if deep:
                problem = _foreign_bucket(path)
                if problem is not None:
                    return problem
        else:
            return f"it holds {name}"
    return None


def _foreign_bucket(bucket: Path) -> str | None:
    for shard in os.scandir(bucket):
        if not (_SHARD.fullmatch(shard.name) and shard.is_dir(follow_symlinks=False)):
            return f"it holds {bucket.name}/{shard.name}"
        for entry in os.scandir(shard.path):
            if not (entry.name.endswith(".json") or entry.name.startswith(".tmp-")):
                return f"it holds {bucket.name}/{shard.name}/{entry.name}"
    return None


def _create(path: Path, text: str) -> None:
    """Write ``path`` if nothing (not even a dangling link) is there; never replace."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
