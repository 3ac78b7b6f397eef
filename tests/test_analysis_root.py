"""The project a checked file belongs to (:mod:`mpcheck.settings.roots`): run from a
directory that is no project, or on files outside the working directory, the evidence comes
from the file's own project, not from every tree beside it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpcheck.settings.roots import analysis_root
from tests.support import XFILE

CAST = "`DiT` is cast to half by `DiT(8, 2).half()` at dit/sample.py:11"


def _project(parent: Path, name: str = "proj") -> Path:
    project = parent / name
    shutil.copytree(XFILE / "bad_cast_reaches_block", project)
    (project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    return project


def _check(cwd: Path, *paths: str) -> list[Any]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json"]
    done = subprocess.run([*cmd, *paths], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    found: list[Any] = json.loads(done.stdout)
    return found


def test_inside_a_project_the_working_directory_is_the_root(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "sub").mkdir()
    (project / "sub" / "setup.py").write_text("")
    assert analysis_root(project / "sub" / "a.py", project) == project
    assert analysis_root(project / "dit" / "model.py", project / "dit") == project / "dit"


def test_from_a_directory_that_is_no_project_the_files_project_is(tmp_path: Path) -> None:
    project = _project(tmp_path)
    assert analysis_root(project / "dit" / "model.py", tmp_path) == project
    (tmp_path / "loose.py").write_text("")
    assert analysis_root(tmp_path / "loose.py", tmp_path) == tmp_path


def test_outside_the_working_directory_the_given_path_is_the_fallback(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(XFILE / "bad_cast_reaches_block", bare)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert analysis_root(bare / "dit" / "model.py", elsewhere, [bare]) == bare


def test_a_run_from_the_parent_reads_the_checked_projects_evidence_only(tmp_path: Path) -> None:
    project = _project(tmp_path)
    decoy = _project(tmp_path, "decoy")  # a same-named class cast at the same line, beside it
    (decoy / "dit" / "sample.py").write_text("import torch\n")
    (finding,) = _check(tmp_path, "proj")
    assert finding["severity"] == "error"
    assert CAST in finding["message"]
    # the same from inside the project, and from another project's directory
    assert [f["message"] for f in _check(project, ".")] == [finding["message"]]
    assert [f["message"] for f in _check(decoy, str(project))] == [finding["message"]]


def test_flake8_takes_the_same_root(tmp_path: Path) -> None:
    _project(tmp_path)
    cmd = [sys.executable, "-m", "flake8", "--select", "MPC", "--jobs=1", "--isolated", "proj"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert CAST in done.stdout


def test_a_directory_that_only_holds_projects_is_never_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from the home (or temporary) directory on a marker-free tree, the tree given is
    the project, not every tree beside it; a marker-free tree run from its own top keeps it."""
    bare = tmp_path / "bare"
    shutil.copytree(XFILE / "bad_cast_reaches_block", bare)
    model = bare / "dit" / "model.py"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert analysis_root(model, tmp_path, [model]) == bare / "dit"
    assert analysis_root(model, tmp_path, [bare]) == bare
    assert analysis_root(model, tmp_path, [tmp_path]) == tmp_path  # (asked for all of it)
    assert analysis_root(model, bare, [model]) == bare  # (the tree's own top: its project)
    assert analysis_root(Path("/") / "loose.py", Path("/"), [Path("/loose.py")]) == Path("/")
    monkeypatch.setenv("HOME", str(bare))  # (the home being another directory changes nothing)
    assert analysis_root(model, tmp_path, [model]) == tmp_path


def test_a_run_from_home_reads_only_the_tree_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same findings as a run from the tree's own top: a script beside the tree that casts
    its model is not its project's evidence."""
    bare = tmp_path / "bare"
    shutil.copytree(XFILE / "bad_cast_reaches_block", bare)
    (bare / "dit" / "sample.py").write_text("import torch\n")
    play = "from bare.dit.model import DiT\n\nDiT(8, 2).half()\n"
    (tmp_path / "play.py").write_text(play)  # (in the home directory, beside the tree)
    monkeypatch.setenv("HOME", str(tmp_path))
    from_home = [f["message"] for f in _check(tmp_path, "bare")]
    assert from_home == [f["message"] for f in _check(bare, ".")]
    assert not any("play.py" in message for message in from_home)
