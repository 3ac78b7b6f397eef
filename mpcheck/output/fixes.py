"""Apply fixes to exactly the bytes that were checked, and write them back without loss.

What ``--fix`` promises (the README repeats it): only the bytes of the edits change; the
encoding, the byte-order mark and every line's own ending stay as they were; a file that
changed since it was read is left alone (so two fixers on one tree, or a user typing in an
editor, never get an edit applied twice or overwritten); symlinks, hard links, mode and
owner survive; a file that cannot be written is reported, never replaced behind the
user's back.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from mpcheck.diagnostics import Diagnostic
from mpcheck.files.source import SourceFile

try:  # advisory locks keep two mpcheck processes from interleaving check and write
    import fcntl
except ImportError:  # pragma: no cover - Windows: compare-before-replace still applies
    fcntl = None  # type: ignore[assignment]

__all__ = ["FixError", "FileChanged", "applicable", "apply_fixes", "unified_diff", "write_fixed"]


class FixError(Exception):
    """The fixed file cannot be written (deleted, not writable, ...): a one-line reason."""


class FileChanged(FixError):
    """The file no longer holds the bytes that were checked; it is skipped, not overwritten."""


def applicable(diag: Diagnostic, *, unsafe: bool) -> bool:
    return diag.fix is not None and (unsafe or diag.fix.applicability == "safe")


def apply_fixes(
    source: SourceFile | str, diagnostics: Sequence[Diagnostic], *, unsafe: bool
) -> tuple[str, int]:
    """The fixed text and how many fixes went in.

    A fix whose edits overlap an earlier one is left for the next run, as ruff does; all
    edits of one fix go in together or not at all.
    """
    if isinstance(source, str):
        source = SourceFile.from_text(source)
    chosen: list[tuple[int, int, str]] = []
    applied = 0
    for diag in diagnostics:
        if diag.suppressed or not applicable(diag, unsafe=unsafe):
            continue
        assert diag.fix is not None
        spans = [(source.offset(e.start), source.offset(e.end), e.content) for e in diag.fix.edits]
        if any(_overlaps(a, b, c, d) for a, b, _ in spans for c, d, _ in chosen):
            continue
        chosen += spans
        applied += 1
    text = source.text
    for start, end, content in sorted(chosen, key=lambda s: (s[0], s[1]), reverse=True):
        text = text[:start] + content + text[end:]
    return text, applied


def _overlaps(a: int, b: int, c: int, d: int) -> bool:
    return a < d and c < b or a == b == c == d


def unified_diff(before: bytes, after: bytes, name: str) -> bytes:
    """A patch ``git apply`` and ``patch`` accept, in the file's own bytes.

    Lines are split at ``\\n`` only, as those tools do, so ``\\r\\n`` endings and CR-only files
    round-trip; a last line without a newline gets the ``\\ No newline`` marker.
    """
    a, b = _split_lf(before), _split_lf(after)
    out = []
    label = name.encode("utf-8", "surrogateescape")
    for line in difflib.diff_bytes(difflib.unified_diff, a, b, b"a/" + label, b"b/" + label):
        if line.startswith((b"---", b"+++", b"@@")):
            out.append(line if line.endswith(b"\n") else line + b"\n")
        elif line.endswith(b"\n"):
            out.append(line)
        else:
            out.append(line + b"\n\\ No newline at end of file\n")
    return b"".join(out)


def _split_lf(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    return out + [lines[-1]] if lines[-1] else out


def write_fixed(path: Path, expected: bytes, new: bytes) -> None:
    """Replace the contents of ``path`` with ``new`` if it still holds ``expected``.

    Symlinks are followed, so the target is fixed and the link stays. A file is replaced
    atomically (a temporary file in its directory with the same mode, owner and extended
    attributes, ACLs included, then a rename) wherever the copy can carry all of them.
    Otherwise it is rewritten in place: a file with several hard links (a rename would split
    it from its other names), one owned by another user, or one whose attributes cannot be
    copied (a security label). In place, the original bytes are first kept in a sibling
    file, removed once the new ones are on disk, and SIGINT/SIGTERM/SIGHUP wait until the
    write is done: an interruption never leaves a file that is neither version.
    The compare and the write happen under an exclusive lock on the file, which a
    concurrent ``mpcheck --fix`` also takes.
    """
    real = Path(os.path.realpath(path))
    with _open_locked(path, real) as handle:
        if handle.read() != expected or _replaced(handle, real):
            raise FileChanged(f"{path}: changed while mpcheck was checking it; not fixed")
        info = os.fstat(handle.fileno())
        if info.st_nlink > 1 or not _replace_atomically(real, new, info):
            _rewrite_in_place(handle, real, expected, new)


@contextmanager
def _open_locked(path: Path, real: Path) -> Iterator[IO[bytes]]:
    try:
        handle = open(real, "r+b")  # noqa: SIM115 - closed below, after the lock is released
    except FileNotFoundError:
        raise FixError(f"{path}: was removed before its fixes could be written") from None
    except PermissionError:
        raise FixError(f"{path}: not writable; its fixes were not applied") from None
    except OSError as exc:
        raise FixError(f"{path}: cannot be opened for writing ({exc.strerror})") from None
    with handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield handle


def _replaced(handle: IO[bytes], real: Path) -> bool:
    """Whether another process renamed a new file over ``real`` while we waited for the lock."""
    try:
        return os.stat(real).st_ino != os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return True


def _replace_atomically(real: Path, data: bytes, info: os.stat_result) -> bool:
    """Rename a complete copy over ``real``; False (nothing done) when the copy cannot have
    its owner or extended attributes."""
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".mpcheck", dir=real.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), info.st_mode & 0o7777)
            if hasattr(os, "fchown") and (info.st_uid, info.st_gid) != _owner(out.fileno()):
                try:
                    os.fchown(out.fileno(), info.st_uid, info.st_gid)
                except PermissionError:  # only root may give a file away: write in place
                    Path(tmp).unlink(missing_ok=True)
                    return False
            if not _copy_xattrs(real, out.fileno()):
                Path(tmp).unlink(missing_ok=True)
                return False
            os.fsync(out.fileno())
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def _owner(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_uid, info.st_gid


def _copy_xattrs(real: Path, fd: int) -> bool:
    """Copy every extended attribute (POSIX ACLs are ``system.posix_acl_*`` ones) of
    ``real`` onto ``fd``; False when one cannot be read or set."""
    if not hasattr(os, "listxattr"):
        return True  # (no xattrs on this platform)
    try:
        names = os.listxattr(real)
    except OSError:
        return True  # a file system without them
    try:
        for name in names:
            os.setxattr(fd, name, os.getxattr(real, name))
    except OSError:
        return False
    return True


def _rewrite_in_place(handle: IO[bytes], real: Path, old: bytes, new: bytes) -> None:
    """Overwrite the open file, keeping its inode (and so links, owner and attributes),
    with the original bytes saved beside it until the new ones are on disk."""
    import signal

    fd, backup = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".mpcheck-orig", dir=real.parent)
    with os.fdopen(fd, "wb") as out:
        out.write(old)
        out.flush()
        os.fsync(out.fileno())
    blocked = None
    if hasattr(signal, "pthread_sigmask"):
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        try:
            _overwrite(handle, new)
        except OSError as exc:  # a full disk: put the original back
            try:
                _overwrite(handle, old)
            except OSError:
                raise FixError(
                    f"{real}: could not be written ({exc.strerror}); its original bytes are "
                    f"in {backup}"
                ) from None
            Path(backup).unlink(missing_ok=True)
            raise FixError(f"{real}: could not be written ({exc.strerror}); not fixed") from None
        Path(backup).unlink(missing_ok=True)
    finally:
        if blocked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _overwrite(handle: IO[bytes], data: bytes) -> None:
    handle.seek(0)
    handle.write(data)
    handle.truncate()
    handle.flush()
    os.fsync(handle.fileno())


def write_atomically(path: Path, data: bytes) -> None:
    """Write a new file (a report) in one step, so a failure never leaves a partial one.

    Only a regular file is replaced: ``-o /dev/null`` or a named pipe is written to as it is
    (a rename would put a file in place of the device: as root, a machine without
    ``/dev/null``), and a symbolic link keeps pointing where it did: its target is replaced.
    """
    path = Path(os.path.realpath(path))
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        with open(path, "wb") as out:
            out.write(data)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
