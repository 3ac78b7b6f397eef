"""Which lines changed since a git revision: ``--diff-base`` reports findings only there.

A pull request should be annotated where it touched code, not for everything the file
already had. The comparison is ``git diff REF`` against the working tree (committed, staged
and unstaged changes) plus untracked files, which count as wholly new. It is deliberately
two-dot: in CI, pass the commit the branch started from (GitHub's pull-request checkout is a
merge commit whose first parent is the base, so the base's SHA is exactly right, and it works
in shallow clones, where ``git merge-base`` does not).
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from mpcheck.diagnostics import Diagnostic

_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")

Changed = dict[str, "frozenset[int] | None"]  # absolute path -> new rows; None: a new file


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


def changed_lines(base: str, cwd: Path) -> Changed:
    """Every file that differs from ``base``, with the rows of its new version that changed."""
    if base.startswith("-"):
        raise DiffError(f"--diff-base: `{base}` is not a revision")
    top = Path(os.fsdecode(_git(["rev-parse", "--show-toplevel"], cwd).rstrip(b"\n")))
    try:
        _git(["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], top)
    except DiffError:
        raise DiffError(f"--diff-base: unknown revision `{base}`") from None
    patch = _git(
        ["-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "-M",
         "--unified=0", base, "--"],
        top,
    )  # fmt: skip
    found: dict[str, set[int]] = {}
    rows: set[int] | None = None
    for line in patch.splitlines():
        if line.startswith(b"+++ "):
            name = line[4:]
            rows = None if name == b"/dev/null" else set()  # a deleted file: nothing to report
            if rows is not None:
                found[str(top / _unquote(name).removeprefix("b/"))] = rows
        elif rows is not None and (hunk := _HUNK.match(line)):
            first, count = int(hunk.group(1)), int(hunk.group(2) or 1)
            rows.update(range(first, first + count))
    result: Changed = {path: frozenset(r) for path, r in found.items()}
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], top)
    for name in filter(None, untracked.split(b"\0")):
        result[str(top / os.fsdecode(name))] = None
    return result


def _unquote(name: bytes) -> str:
    """A path as git prints it: C-quoted (``"a\\tb.py"``) when it has unusual bytes."""
    if name.startswith(b'"') and name.endswith(b'"'):
        raw, _ = codecs.escape_decode(name[1:-1])
        return os.fsdecode(raw)
    return os.fsdecode(name)


def only_changed(diagnostics: Iterable[Diagnostic], changed: Changed) -> list[Diagnostic]:
    """The findings on a changed row (any row of their range); in a notebook, in a changed
    notebook (its rows are cell rows, which git's line numbers do not map to)."""
    kept = []
    for d in diagnostics:
        path = os.path.realpath(d.filename)
        if path not in changed:
            continue
        rows = changed[path]
        last = d.end.row - 1 if d.end.row > d.start.row and d.end.column == 1 else d.end.row
        if rows is None or d.cell or any(r in rows for r in range(d.start.row, last + 1)):
            kept.append(d)
    return kept
