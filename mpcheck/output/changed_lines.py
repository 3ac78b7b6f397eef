"""What changed since a git revision, for ``--diff-base`` (see :mod:`mpcheck.output.pr_base`).

The revision is resolved as git's own syntax means it: ``A...B`` is the merge base of A and
B, ``A..B`` is A, and a plain ``A`` is the merge base of A and HEAD (what a pull request
started from), or A itself where the history to find it is missing (a shallow clone, as
GitHub's checkout of a pull request's merge commit, whose first parent is exactly A). The
changes are ``git diff BASE`` against the working tree (committed, staged and unstaged) plus
untracked files, which count as wholly new; renamed files are followed.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mpcheck.diagnostics import Diagnostic

_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")

Changed = dict[str, "frozenset[int] | None"]  # absolute path -> new rows; None: a new file


@dataclass(frozen=True)
class Diff:
    """The changes since ``base`` (a commit id) in the repository at ``top``."""

    top: Path
    base: str
    changed: Changed
    renamed: dict[str, str]  # a file's path in the base -> in the working tree (POSIX, relative)


class DiffError(Exception):
    """git is missing, this is not a repository, or the revision is unknown."""


def _git(args: list[str], cwd: Path) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except OSError as exc:
        raise DiffError(f"--diff-base needs git: {exc.strerror}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise DiffError(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
    return done.stdout


def _commit(revision: str, top: Path, spec: str) -> str:
    if revision.startswith("-"):
        raise DiffError(f"--diff-base: `{spec}` is not a revision")
    try:
        found = _git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], top)
    except DiffError:
        raise DiffError(f"--diff-base: unknown revision `{revision}`") from None
    return found.decode("ascii").strip()


def _merge_base(a: str, b: str, top: Path) -> str | None:
    try:
        return _git(["merge-base", a, b], top).decode("ascii").strip() or None
    except DiffError:  # unrelated histories, or a shallow clone that lacks them
        return None


def resolve_base(spec: str, cwd: Path) -> tuple[Path, str]:
    """The repository's top directory and the commit ``spec`` names as the base to compare
    with. The head is always the working tree, so ``B`` in ``A..B``/``A...B`` must be HEAD."""
    top = Path(os.fsdecode(_git(["rev-parse", "--show-toplevel"], cwd).rstrip(b"\n")))
    if spec.startswith("-") or not spec:
        raise DiffError(f"--diff-base: `{spec}` is not a revision")
    three = "..." in spec
    a, _, b = spec.partition("..." if three else "..")
    if ".." in spec:
        head = _commit(b or "HEAD", top, spec)
        if head != _commit("HEAD", top, spec):
            raise DiffError(
                f"--diff-base {spec}: the working tree is what gets checked, "
                f"so `{b}` must be the commit checked out (HEAD)"
            )
    base = _commit(a or "HEAD", top, spec)
    if ".." in spec and not three:
        return top, base
    return top, _merge_base(base, "HEAD", top) or base


def diff_since(base: str, top: Path) -> Diff:
    """Every file that differs from the commit ``base``, with the rows of its new version
    that changed, and the files renamed since."""
    patch = _git(
        ["-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "-M",
         "--unified=0", base, "--"],
        top,
    )  # fmt: skip
    found: dict[str, set[int]] = {}
    renamed: dict[str, str] = {}
    rows: set[int] | None = None
    old = ""
    for line in patch.splitlines():
        if line.startswith(b"rename from "):  # a pure rename has no ---/+++ lines
            old = _unquote(line[12:])
        elif line.startswith(b"rename to "):
            renamed[old] = _unquote(line[10:])
        elif line.startswith(b"--- "):
            old = "" if line[4:] == b"/dev/null" else _unquote(line[4:]).removeprefix("a/")
        elif line.startswith(b"+++ "):
            name = line[4:]
            rows = None if name == b"/dev/null" else set()  # a deleted file: nothing to report
            if rows is not None:
                new = _unquote(name).removeprefix("b/")
                found[str(top / new)] = rows
                if old and old != new:
                    renamed[old] = new
        elif rows is not None and (hunk := _HUNK.match(line)):
            first, count = int(hunk.group(1)), int(hunk.group(2) or 1)
            rows.update(range(first, first + count))
    result: Changed = {path: frozenset(r) for path, r in found.items()}
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], top)
    for name in filter(None, untracked.split(b"\0")):
        result[str(top / os.fsdecode(name))] = None
    return Diff(top, base, result, renamed)


def _unquote(name: bytes) -> str:
    """A path as git prints it: C-quoted (``"a\\tb.py"``) when it has unusual bytes."""
    if name.startswith(b'"') and name.endswith(b'"'):
        raw, _ = codecs.escape_decode(name[1:-1])
        return os.fsdecode(raw)
    return os.fsdecode(name)


def touches(d: Diagnostic, changed: Changed) -> bool:
    """Whether one of the finding's related locations (where its dtype came from) lies on a
    changed row: the change is then part of its cause. Notebook rows are cell rows, which
    git's line numbers do not map to, so a notebook's own places never count."""
    for r in d.related:
        path = os.path.realpath(r.filename or d.filename)
        if path not in changed or (d.cell and not r.filename):
            continue
        rows = changed[path]
        if rows is None or any(row in rows for row in range(r.start.row, r.end.row + 1)):
            return True
    return False
