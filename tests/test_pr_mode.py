"""PR mode (``--diff-base``): what a change introduces, found by checking its base too in a
real ``git worktree``, on real repositories made here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.output import baseline

# git and a child mpcheck (the base's check) run in every test
pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.integration,
]

BLOCK = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = h * self.weight
        h = h.to(x.dtype)
        return self.proj(h)
"""
BROKEN_BLOCK = BLOCK.replace("        h = h.to(x.dtype)\n", "")

ROPE = """import torch


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(q, cos, sin):
    return q * cos + rotate_half(q) * sin
"""
ATTENTION = """import torch.nn.functional as F
from torch import nn

from .rope import apply_rope


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)

    def forward(self, x, cos, sin):
        q = apply_rope(self.q(x), cos, sin)
        k, v = self.k(x), self.v(x)
        return F.scaled_dot_product_attention(q, k, v)
"""


def git(tree: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t"}
    env |= {"GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True)
    return done.stdout.decode().strip()


def commit(tree: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", message)


def check(
    capsys: pytest.CaptureFixture[str], tree: Path, *argv: str, fmt: str = "concise"
) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        status = cli.main(["check", "-q", "--output-format", fmt, *argv])
    finally:
        os.chdir(cwd)
    baseline.clear()
    out, err = capsys.readouterr()
    return status, out, err


def worktrees(tree: Path) -> list[str]:
    return [
        line for line in git(tree, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    git(tree, "init", "-q", "-b", "main")
    (tree / ".gitignore").write_text(".mpcheck_cache/\n")
    commit(tree, {"block.py": BLOCK, "pkg/__init__.py": "", "pkg/rope.py": ROPE,
                  "pkg/attention.py": ATTENTION}, "base")  # fmt: skip
    git(tree, "switch", "-q", "-c", "feature")
    return tree


def leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("mpcheck-base-*")}


def test_deleting_a_cast_back_is_reported_on_the_next_unchanged_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = leftovers()
    commit(repo, {"block.py": BROKEN_BLOCK}, "drop the cast")
    status, out, _ = check(capsys, repo, "--diff-base", "main")
    assert status == 1 and out.startswith("block.py:15:16: MPC101"), out
    # the base's worktree is gone again, from git's list and from the disk
    assert len(worktrees(repo)) == 1 and leftovers() == before
    # a second run against the same base gets the same answer (its files from the cache)
    assert check(capsys, repo, "--diff-base", "main")[:2] == (status, out)


def test_the_job_summary_is_the_heads_only(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the Action, the base's check inherited ``GITHUB_STEP_SUMMARY`` and appended a table
    of the base's findings to the job page, next to the head's."""
    summary = repo.parent / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    commit(repo, {"block.py": BROKEN_BLOCK}, "drop the cast")
    status, out, _ = check(capsys, repo, "--diff-base", "main")
    assert status == 1 and out.startswith("block.py:15:16: MPC101"), out
    text = summary.read_text()
    assert text.count("### mpcheck") == 1 and "1 finding in 1 file" in text, text


def test_a_float_added_in_a_helper_is_reported_in_its_caller_in_sarif(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upcast = ROPE.replace("    return q * cos", "    q = q.float()\n    return q * cos")
    commit(repo, {"pkg/rope.py": upcast}, "rope in float32")
    status, out, _ = check(capsys, repo, "--diff-base", "main", "--no-cache", fmt="sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert status == 1 and [r["ruleId"] for r in results] == ["MPC103"]
    location = results[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("pkg/attention.py")


def test_a_finding_the_base_had_is_not_reported_even_when_its_line_moved_or_was_reformatted(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "switch", "-q", "main")
    commit(repo, {"block.py": BROKEN_BLOCK}, "the bug, already on main")
    git(repo, "switch", "-q", "-c", "other")
    edited = '"""Blocks."""\n' + BROKEN_BLOCK.replace("self.proj(h)", "self.proj( h )")
    (repo / "block.py").write_text(edited)  # uncommitted edits count as the change too
    assert check(capsys, repo, "--diff-base", "main")[:2] == (0, "")
    assert check(capsys, repo)[0] == 1  # it is there, just not new


def test_a_finding_whose_note_points_at_a_changed_line_is_introduced(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "switch", "-q", "main")
    commit(repo, {"block.py": BROKEN_BLOCK}, "the bug, already on main")
    git(repo, "switch", "-q", "-c", "other")
    commit(repo, {"block.py": BROKEN_BLOCK.replace("x.float()", "x.to(torch.float32)")}, "edit")
    status, out, _ = check(capsys, repo, "--diff-base", "main")
    assert status == 1 and out.startswith("block.py:15:16: MPC101"), out


def test_renamed_files_keep_their_findings_and_new_files_have_none_before(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "switch", "-q", "main")
    commit(repo, {"block.py": BROKEN_BLOCK}, "the bug, already on main")
    git(repo, "switch", "-q", "-c", "other")
    git(repo, "mv", "block.py", "layers.py")
    git(repo, "commit", "-qm", "rename")
    assert check(capsys, repo, "--diff-base", "main")[:2] == (0, "")
    (repo / "new").mkdir()
    (repo / "new" / "fresh.py").write_text(BROKEN_BLOCK)  # untracked, and absent in the base
    status, out, _ = check(capsys, repo, "--diff-base", "main", "new/fresh.py")
    assert status == 1 and out.startswith("new/fresh.py:15:16: MPC101"), out
    status, out, _ = check(capsys, repo, "--diff-base", "main")
    assert status == 1 and [line.split(":")[0] for line in out.splitlines()] == ["new/fresh.py"]


def test_three_dots_compare_with_the_merge_base(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "switch", "-q", "main")
    commit(repo, {"block.py": BROKEN_BLOCK}, "the bug")
    git(repo, "switch", "-q", "-c", "topic")
    commit(repo, {"README": "docs\n"}, "unrelated")
    git(repo, "switch", "-q", "main")
    commit(repo, {"block.py": BLOCK}, "main fixes the bug after topic forked")
    git(repo, "switch", "-q", "topic")
    # against main's tip the bug looks new; the change since the fork did not add it
    assert check(capsys, repo, "--diff-base", "main..HEAD")[0] == 1
    for spec in ("main...HEAD", "main...", "main"):
        assert check(capsys, repo, "--diff-base", spec)[:2] == (0, ""), spec
    status, _, err = check(capsys, repo, "--diff-base", "topic...main")
    assert status == 2 and "must be the commit checked out (HEAD)" in err
    assert len(err.strip().splitlines()) == 1


def test_ctrl_c_during_the_base_check_removes_the_worktree(repo: Path) -> None:
    files = {f"many/m{i}.py": BLOCK for i in range(150)}
    commit(repo, files, "many files")
    git(repo, "switch", "-q", "-c", "later")
    commit(repo, {"block.py": BROKEN_BLOCK}, "drop the cast")
    before = leftovers()
    child = subprocess.Popen(
        [sys.executable, "-m", "mpcheck", "check", "--no-cache", "-j1", "--diff-base", "main"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while len(worktrees(repo)) == 1 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.poll() is None, "the run ended before its base was checked out"
    child.send_signal(signal.SIGINT)
    child.wait(timeout=60)
    assert child.returncode != 0 and len(worktrees(repo)) == 1 and leftovers() == before
    assert child.stderr is not None and b"Traceback" not in child.stderr.read()


def test_a_base_worktree_another_run_holds_is_left_alone(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mpcheck.files.hashing import blake2b

    commit(repo, {"block.py": BROKEN_BLOCK}, "drop the cast")
    base = git(repo, "rev-parse", "main")
    name = blake2b(os.fsencode(os.path.realpath(repo)), digest_size=6).hexdigest()
    held = Path(tempfile.gettempdir()) / f"mpcheck-base-{name}-{base[:12]}"
    held.mkdir()
    try:
        (held / "theirs").write_text("")
        status, out, _ = check(capsys, repo, "--diff-base", "main")
        assert status == 1 and out.startswith("block.py:15:16: MPC101"), out
        assert [p.name for p in held.iterdir()] == ["theirs"] and len(worktrees(repo)) == 1
    finally:
        shutil.rmtree(held)


def test_a_file_on_stdin_is_compared_with_its_base_version(repo: Path) -> None:
    def stdin(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mpcheck", "check", "--output-format", "concise", "-q",
             "--diff-base", "main", "--stdin-filename", "block.py", "-"],
            cwd=repo, input=text, capture_output=True, text=True,
        )  # fmt: skip

    done = stdin(BROKEN_BLOCK)
    assert done.returncode == 1 and done.stdout.startswith("block.py:15:16: MPC101"), done
    assert stdin(BLOCK.replace("h = x.float()", "h =  x.float()")).stdout == ""
