"""Which directory a checked file's project is: where its imports resolve from, and whose
files give the project-wide evidence (where models are built, cast and called).

The working directory, as mypy and ruff take it, when the run starts inside a project. Run
from a directory that is no project (``cd /tmp && mpcheck check /tmp/work/repo``), or on
files outside the working directory, a file belongs to the nearest directory above it that
declares a project: taking the working directory then would read every tree beside the one
checked, and match its classes with theirs.

The filesystem root, the home directory and the temporary directories hold projects and are
never one: run from one of them (``cd /tmp && mpcheck check /tmp/work/f.py``) on files no
directory declares a project for, the path the run was given is the project, as it is for a
file outside the working directory. A marker-free tree checked from its own top keeps the
working directory (an editor's workspace, ``cd tree && mpcheck check dit/model.py``).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping, Sequence
from pathlib import Path

__all__ = ["analysis_root"]

_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
_TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")  # (``tempfile`` imports far more than it needs)


def _declares(directory: Path, seen: MutableMapping[Path, bool] | None = None) -> bool:
    """Whether ``directory`` holds a project's marker; ``seen``: the answers one run has
    had (a run of many files asks of the same parent directories for each, globbing them)."""
    if seen is None:
        return _marked(directory)
    if directory not in seen:
        seen[directory] = _marked(directory)
    return seen[directory]


def _marked(directory: Path) -> bool:
    if any(os.path.exists(directory / marker) for marker in _MARKERS):
        return True
    try:
        return any(directory.glob("requirements*.txt"))
    except OSError:
        return False


def _declaring(start: Path, seen: MutableMapping[Path, bool] | None) -> Path | None:
    for directory in (start, *start.parents):
        if _declares(directory, seen):
            return directory
    return None


def analysis_root(
    file: Path,
    cwd: Path,
    given: Sequence[Path] = (),
    seen: MutableMapping[Path, bool] | None = None,
) -> Path:
    """The project root of ``file`` (see the module docstring); ``given``: the paths the
    run was asked to check, the fallback for a file outside the working directory that no
    directory above declares a project for; ``seen``: a memo of directories one run shares."""
    file = Path(os.path.abspath(file))
    cwd = Path(os.path.abspath(cwd))
    declared = _declaring(file.parent, seen)
    if cwd in file.parents:
        if declared is None and _container(cwd):
            return _given(file, given) or cwd
        if declared is None or declared == cwd or cwd not in declared.parents:
            return cwd  # inside the project the run started in (or in no project at all)
        return cwd if _declares(cwd, seen) else declared
    if declared is not None:
        return declared
    return _given(file, given) or file.parent


def _container(directory: Path) -> bool:
    """Whether ``directory`` only holds projects: the filesystem root, the home directory, a
    temporary directory."""
    if directory.parent == directory:
        return True
    homes = {os.path.expanduser("~"), os.environ.get("HOME", "")}
    temporary = {*_TEMPORARY, os.environ.get("TMPDIR", "").rstrip("/")}
    spelled = str(directory)
    return spelled in homes or spelled in temporary or os.path.realpath(spelled) in temporary


def _given(file: Path, given: Sequence[Path]) -> Path | None:
    """The path of the run's arguments that holds ``file`` (its directory for a file)."""
    for path in given:
        top = Path(os.path.abspath(path))
        if top == file or top in file.parents:
            return top if top.is_dir() else top.parent
    return None
