"""The cache directory is mpcheck's only when mpcheck made it: `check` never adopts, and
`clean` never removes, a directory that held anything else (issue 34, items 1 to 3)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.pipeline import cache_dir

BAD = (Path(__file__).resolve().parent.parent / "fixtures/mpc101/bad_rmsnorm_block.py").read_text()
WAYS = ("flag", "env", "config")


def main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def snapshot(root: Path) -> dict[str, object]:
    """Every path under ``root`` with its kind and bytes (links not followed)."""
    seen: dict[str, object] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = path.read_bytes()
    return seen


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``HOME/parent/project`` (the current directory) next to ``HOME/parent/sibling``."""
    home = tmp_path / "home"
    project = home / "parent" / "project"
    project.mkdir(parents=True)
    (project / "model.py").write_text(BAD)
    (project / ".gitignore").write_text("build/\n")
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    sibling = home / "parent" / "sibling"
    sibling.mkdir()
    (sibling / "work.py").write_text("precious = 1\n")
    (home / ".bashrc").write_text("export A=1\n")
    (home / "link").symlink_to(project)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # (plugins' entry points)
    monkeypatch.delenv("MPCHECK_CACHE_DIR", raising=False)
    monkeypatch.chdir(project)
    return home


def use(way: str, where: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Point mpcheck at ``where`` as the cache, the given way; the extra CLI arguments."""
    if way == "flag":
        return ["--cache-dir", os.path.expanduser(where)]
    if way == "env":
        monkeypatch.setenv("MPCHECK_CACHE_DIR", os.path.expanduser(where))
        return []
    Path("pyproject.toml").write_text(
        f"[project]\nname = 'p'\n[tool.mpcheck]\ncache-dir = {json.dumps(where)}\n"
    )
    return []


# The project root, its parent, the home directory and a link to the project.
TARGETS = (".", "..", "~", "~/link")


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("where", TARGETS)
def test_check_and_clean_leave_a_foreign_directory_alone(
    home: Path, way: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = use(way, where, monkeypatch)
    before = snapshot(home)
    status, out, err = main("check", "--output-format", "concise", *extra, ".")
    assert status == 1 and "MPC" in out
    assert "warning: cannot use the cache" in err and "not empty" in err
    assert snapshot(home) == before  # no CACHEDIR.TAG, no .gitignore rewritten, no entries
    status, _, err = main("clean", *extra)
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith("mpcheck: error: ")
    assert "not removed" in err
    assert snapshot(home) == before


def test_a_directory_adopted_by_an_older_mpcheck_is_not_removed(home: Path) -> None:
    """The reported loss: ``cache-dir = ".."`` tagged the parent, and clean trusted the tag."""
    parent = home / "parent"
    (parent / "CACHEDIR.TAG").write_text(cache_dir.TAG)
    (parent / "0123456789abcdef01234567").mkdir()
    before = snapshot(home)
    status, _, err = main("clean", "--cache-dir", str(parent))
    assert status == 2 and "it holds project" in err
    assert snapshot(home) == before
    status, _, err = main("check", "--cache-dir", str(parent), ".")
    assert status == 1 and "cannot use the cache" in err
    assert snapshot(home) == before


@pytest.mark.parametrize("way", WAYS)
def test_root_is_refused_without_a_byte_written_or_removed(
    home: Path, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/`` as the cache: every way to write or remove is made to fail the test first, so
    a broken guard cannot touch the machine."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"touched {args}")

    for module, name in (
        (shutil, "rmtree"),
        (os, "unlink"),
        (os, "rmdir"),
        (os, "remove"),
        (cache_dir, "_create"),
    ):
        monkeypatch.setattr(module, name, forbidden)
    extra = use(way, "/", monkeypatch)
    status, _, err = main("clean", *extra)
    assert status == 2 and err.startswith("mpcheck: error: /") and "not removed" in err
    status, _, err = main("check", "--no-cache", *extra, ".")  # (no cache: nothing probed)
    assert status == 1
    monkeypatch.setattr(os, "open", forbidden)  # the probe file is never made either
    status, _, err = main("check", *extra, ".")
    assert status == 1 and "cannot use the cache" in err and "not empty" in err


def test_a_new_or_empty_directory_becomes_the_cache_and_clean_removes_it(home: Path) -> None:
    for cache in (home / "new" / "cache", home / "empty"):
        if cache.name == "empty":
            cache.mkdir()
        assert main("check", "--cache-dir", str(cache), ".")[0] == 1
        assert (cache / "CACHEDIR.TAG").read_text() == cache_dir.TAG
        assert (cache / ".gitignore").read_text() == cache_dir.GITIGNORE
        assert list(cache.rglob("*.json"))
        assert main("check", "--cache-dir", str(cache), ".")[0] == 1  # its own layout: reused
        assert main("clean", "--cache-dir", str(cache)) == (0, "", f"Removed {cache}\n")
        assert not cache.exists()


def test_clean_refuses_a_cache_holding_anything_else_whole(home: Path) -> None:
    cache = home / "cache"
    assert main("check", "--cache-dir", str(cache), ".")[0] == 1
    bucket = next(p for p in cache.iterdir() if p.is_dir())
    (bucket / "notes.txt").write_text("mine")
    before = snapshot(cache)
    status, _, err = main("clean", "--cache-dir", str(cache))
    assert status == 2 and "notes.txt" in err and snapshot(cache) == before
    (bucket / "notes.txt").unlink()
    (cache / "thesis.tex").write_text("mine")
    status, _, err = main("clean", "--cache-dir", str(cache))
    assert status == 2 and "it holds thesis.tex" in err and (cache / "thesis.tex").exists()


def test_an_existing_gitignore_is_never_replaced(home: Path) -> None:
    cache = home / "cache"
    assert main("check", "--cache-dir", str(cache), ".")[0] == 1
    (cache / ".gitignore").write_text("*\n!keep-me\n")
    shutil.rmtree(next(p for p in cache.iterdir() if p.is_dir()))
    assert main("check", "--cache-dir", str(cache), ".")[0] == 1
    assert (cache / ".gitignore").read_text() == "*\n!keep-me\n"
    (cache / ".gitignore").unlink()
    assert main("check", "--cache-dir", str(cache), ".")[0] == 1
    assert (cache / ".gitignore").read_text() == cache_dir.GITIGNORE  # absent: created


def test_a_symlinked_gitignore_is_not_followed(home: Path) -> None:
    """``.mpcheck_cache/.gitignore -> ../../x``: nothing is written through the link."""
    cache = home / "parent" / "project" / ".mpcheck_cache"
    cache.mkdir()
    outside = home / "x"
    (cache / ".gitignore").symlink_to(outside)
    status, _, err = main("check", ".")
    assert status == 1 and "cannot use the cache" in err and ".gitignore" in err
    assert not outside.exists()


def run_check(project: Path, cache: Path) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", "-j", "1", "."]
    env = {**os.environ, "MPCHECK_CACHE_DIR": str(cache)}
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, timeout=120)


@pytest.mark.integration  # (starts mpcheck in a process of its own)
def test_links_fifos_and_huge_files_in_the_cache_are_damage(home: Path) -> None:
    """Planted in place of entries and directories: never followed, read or hung on;
    the findings stay those of a run without the cache."""
    project = home / "parent" / "project"
    for i in range(3):
        (project / f"m{i}.py").write_text(BAD)
    cache = home / "cache"
    reference = run_check(project, cache)
    assert reference.returncode == 1
    outside = home / "outside"
    outside.mkdir()
    (outside / "victim.json").write_text("precious")
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 5  # three files, the project's summaries and its model records
    entries[0].unlink()
    entries[0].symlink_to(outside / "victim.json")
    entries[1].unlink()
    os.mkfifo(entries[1])
    with entries[2].open("r+b") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte that must not be read
    bucket = next(p for p in cache.iterdir() if p.is_dir())
    shard = entries[3].parent
    shutil.rmtree(shard)
    shard.symlink_to(outside)
    before = snapshot(outside)
    again = run_check(project, cache)
    assert again.returncode == 1 and again.stdout == reference.stdout
    assert snapshot(outside) == before
    for entry in entries:  # rewritten as real entries
        assert stat.S_ISREG(os.lstat(entry).st_mode) and entry.stat().st_size < 1 << 20
    assert bucket.is_dir() and not shard.is_symlink()
    assert main("clean", "--cache-dir", str(cache))[0] == 0 and not cache.exists()
    assert snapshot(outside) == before


def test_diff_checks_again_instead_of_trusting_a_crafted_entry(home: Path) -> None:
    """An entry that still matches the file's stamp but whose fixes were rewritten: ``--diff``
    shows the fixes of the file as it is, as ``--fix`` would apply them."""
    project, cache = home / "parent" / "project", home / "cache"
    cmd = [sys.executable, "-m", "mpcheck", "check", "--unsafe-fixes", "--diff", "model.py"]
    env = {**os.environ, "MPCHECK_CACHE_DIR": str(cache)}

    def diff() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(cmd, cwd=project, env=env, capture_output=True, timeout=120)

    honest = diff()
    assert honest.returncode == 1 and honest.stdout.startswith(b"---")
    # the file's entry (the other is the project's model records, which hold no fixes)
    (entry,) = [e for e in cache.rglob("*.json") if json.loads(e.read_text()).get("diagnostics")]
    data = json.loads(entry.read_text())
    crafted = 0
    for diagnostic in data["diagnostics"]:
        for edit in diagnostic.get("fix", ["", []])[1]:
            edit[0] = "__import__('os').system('evil')"
            crafted += 1
    assert crafted
    entry.write_text(json.dumps(data))
    again = diff()
    assert again.returncode == 1 and again.stdout == honest.stdout
    assert b"evil" not in again.stdout
