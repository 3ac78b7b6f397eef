"""``--diff-base``: report what a change introduces, as semgrep's baseline-commit scans do.

Keeping only the findings on changed lines lets a change through whose effect shows up
elsewhere: deleting ``h = h.to(x.dtype)`` moves the finding to the next, unchanged line, and a
``.float()`` added in a helper file is reported in its caller. So the base revision is checked
too, in a temporary ``git worktree``, and a finding of the working tree is reported when its
fingerprint (the baseline file's key: rule, file, scope, the line's text without whitespace)
is not among the base's, or when one of its related locations lies on a changed line.

The base is checked by a child ``mpcheck check`` with the same options and the same cache
directory; the worktree's path is the same for the same repository and base commit, so a
second run against one base finds its files in the cache. The worktree is removed however
the run ends (an error, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import FrameType

from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.files.hashing import blake2b
from mpcheck.output import baseline
from mpcheck.output.changed_lines import DiffError, _git, diff_since, resolve_base, touches

__all__ = ["introduced"]


def introduced(
    diagnostics: Sequence[Diagnostic], args: argparse.Namespace, cwd: Path, cache: Path | None
) -> list[Diagnostic]:
    """The findings of ``diagnostics`` (the working tree's) that the change introduced."""
    top, base = resolve_base(args.diff_base, cwd)
    diff = diff_since(base, top)
    with _worktree(top, base) as tree:
        before = _base_findings(args, cwd, top, tree, cache)
        accepted: Counter[baseline.Key] = Counter()
        for d in before:
            key = baseline.key_of(d, tree)
            accepted[replace(key, path=diff.renamed.get(key.path, key.path))] += 1
        baseline.clear()  # the worktree's files are about to go
    kept = []
    for d in diagnostics:
        if not d.suppressed:  # (git names ``top`` by its real path: the key's must match)
            key = baseline.key_of(replace(d, filename=os.path.realpath(d.filename)), top)
            if accepted[key] > 0:
                accepted[key] -= 1
                if not touches(d, diff.changed):
                    continue
        kept.append(d)
    return kept


@contextmanager
def _worktree(top: Path, base: str) -> Iterator[Path]:
    """A checkout of ``base`` beside the repository, removed on the way out however it ends
    (SIGTERM, as CI sends on cancel, is turned into an exit so that ``finally`` runs)."""
    name = blake2b(os.fsencode(top), digest_size=6).hexdigest()
    stable = Path(tempfile.gettempdir()) / f"mpcheck-base-{name}-{base[:12]}"
    previous = _on_sigterm()
    parent: Path | None = None
    tree: Path | None = None
    try:
        if not stable.exists():
            tree = stable  # before it exists: an interrupted ``add`` is cleaned up too
            try:
                _add(top, stable, base)
            except DiffError:
                tree = None  # not ours to remove
                if not stable.exists():
                    raise
        if tree is None:  # another run against this base holds it (or one killed left it)
            parent = Path(tempfile.mkdtemp(prefix="mpcheck-base-"))
            tree = parent / "tree"
            _add(top, tree, base)
        yield Path(os.path.realpath(tree))
    finally:
        if tree is not None:
            try:
                _git(["worktree", "remove", "--force", str(tree)], top)
            except DiffError:
                shutil.rmtree(tree, ignore_errors=True)
                subprocess.run(["git", "worktree", "prune"], cwd=top, capture_output=True)
        if parent is not None:
            shutil.rmtree(parent, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _add(top: Path, tree: Path, base: str) -> None:
    """``git worktree add`` without the repository's hooks (a checkout must not run them)."""
    _git(["-c", "core.hooksPath=" + os.devnull, "worktree", "add", "--detach", "--quiet",
          str(tree), base], top)  # fmt: skip


def _on_sigterm() -> signal.Handlers | None:
    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: its owner handles signals
        return None
    return previous if isinstance(previous, signal.Handlers) else signal.SIG_DFL


def _base_findings(
    args: argparse.Namespace, cwd: Path, top: Path, tree: Path, cache: Path | None
) -> list[Diagnostic]:
    """The findings of the same check run in ``tree``, the base's checkout."""
    paths = []
    stdin = [str(p) for p in args.paths] == ["-"] or (not args.paths and args.stdin_filename)
    given = [Path(args.stdin_filename or "-")] if stdin else args.paths or [Path(".")]
    for path in given:
        where = _inside(Path(os.path.abspath(cwd / path)), top, tree)
        if where is not None and where.exists():  # a path the change added: nothing before
            paths.append(str(where))
    if not paths:
        return []
    here = _inside(cwd, top, tree)
    child_cwd = here if here is not None and here.is_dir() else tree
    argv = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", "-q"]
    argv += _options(args, top, tree, cache)
    # the job summary is the head's to write: the base's check must not add its own table
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    done = subprocess.run(
        [*argv, "--", *paths], cwd=child_cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1):
        lines = done.stderr.strip().splitlines()
        raise DiffError(f"checking the base failed: {lines[-1] if lines else done.returncode}")
    return [_diagnostic(item, child_cwd) for item in json.loads(done.stdout or "[]")]


def _inside(path: Path, top: Path, tree: Path) -> Path | None:
    """Where ``path`` of the working tree is in the base's checkout (None: outside the repo)."""
    real = Path(os.path.realpath(path))
    return tree / real.relative_to(top) if real.is_relative_to(top) else None


def _options(args: argparse.Namespace, top: Path, tree: Path, cache: Path | None) -> list[str]:
    """The command-line options that decide what is found, for the child."""
    out: list[str] = []
    for name in ("select", "extend_select", "ignore", "exclude", "extend_exclude"):
        value = getattr(args, name)
        if value:
            out.append(f"--{name.replace('_', '-')}={','.join(value)}")
    for name in ("follow_imports", "target_torch_version", "max_file_size"):
        value = getattr(args, name)
        if value is not None:
            out.append(f"--{name.replace('_', '-')}={value}")
    if args.include_notebooks is False:
        out.append("--no-notebooks")
    if args.force_exclude:
        out.append("--force-exclude")
    if args.jobs:
        out.append(f"--jobs={args.jobs}")
    if args.config is not None:
        config = Path(os.path.abspath(args.config))
        mapped = _inside(config, top, tree)
        out.append(f"--config={mapped if mapped is not None and mapped.is_file() else config}")
    out.append("--no-cache" if cache is None else f"--cache-dir={cache}")
    return out


def _diagnostic(item: dict[str, object], cwd: Path) -> Diagnostic:
    """The parts of a JSON finding that its fingerprint needs."""
    location = item["location"]
    row = location["row"] if isinstance(location, dict) else 0
    cell = item.get("cell")
    return Diagnostic(
        code=str(item["code"]),
        name=str(item["name"]),
        message=str(item["message"]),
        severity=Severity(str(item["severity"])),
        filename=os.path.join(cwd, str(item["filename"])),
        start=Position(int(row), 1),
        end=Position(int(row), 1),
        cell=cell if isinstance(cell, int) else 0,
    )
