"""File discovery: excludes, .gitignore, explicit paths, --force-exclude (files.discovery)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.files.discovery import MissingPathError, discover, parse_pattern
from mpcheck.settings.config import ConfigError, Settings
from mpcheck.settings.resolver import Resolver


def make(root: Path, files: Iterable[str]) -> None:
    """Create empty files (and a directory for each name ending in ``/``)."""
    for name in files:
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def rel(root: Path, found: list[Path]) -> list[str]:
    for path in found:
        assert path.is_absolute(), path
    return [p.relative_to(root).as_posix() for p in found]


def run(root: Path, paths: Iterable[str] = (".",), force: bool = False, **kw: object) -> list[str]:
    settings = Settings(root=root, **kw)  # type: ignore[arg-type]
    return rel(root, discover([root / p for p in paths], settings, force_exclude=force))


# -- walking and default excludes ---------------------------------------------------------------


def test_walks_py_and_pyi_only_sorted(tmp_path: Path) -> None:
    make(tmp_path, ["b.py", "a.pyi", "README.md", "pkg/z.py", "pkg/sub/y.py", "pkg/data.json"])
    make(tmp_path, ["pkg-extra/x.py", "setup.cfg", "notes.py.txt"])
    assert run(tmp_path) == [
        "a.pyi",
        "b.py",
        "pkg/sub/y.py",
        "pkg/z.py",
        "pkg-extra/x.py",
    ]


def test_default_excludes_prune_anywhere(tmp_path: Path) -> None:
    make(
        tmp_path,
        [
            "ok.py",
            ".venv/lib/site.py",
            "venv/x.py",
            "build/gen.py",
            "src/build/gen.py",
            "src/dist/d.py",
            "node_modules/n.py",
            "pkg/__pycache__/m.py",
            ".git/hooks/h.py",
            ".tox/py/t.py",
            "src/app.py",
        ],
    )
    assert run(tmp_path) == ["ok.py", "src/app.py"]


def test_excluded_directories_are_not_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(tmp_path, ["ok.py", ".venv/lib/deep/x.py", "legacy/old/y.py", "pkg/z.py"])
    scanned: list[str] = []
    real_scandir = os.scandir

    def spy(path: str) -> object:
        scanned.append(Path(path).relative_to(tmp_path).as_posix())
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    assert run(tmp_path, extend_exclude=("legacy",)) == ["ok.py", "pkg/z.py"]
    assert sorted(scanned) == [".", "pkg"]


def test_exclude_replaces_defaults(tmp_path: Path) -> None:
    make(tmp_path, ["build/a.py", "migrations/m.py", "x.py"])
    assert run(tmp_path, exclude=("migrations",)) == ["build/a.py", "x.py"]
    assert run(tmp_path, exclude=()) == ["build/a.py", "migrations/m.py", "x.py"]


def test_extend_exclude_keeps_defaults(tmp_path: Path) -> None:
    make(tmp_path, ["build/a.py", "migrations/m.py", "x.py"])
    assert run(tmp_path, extend_exclude=("migrations",)) == ["x.py"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # A slash-less pattern matches a name at any depth (ruff's basename match).
        ("migrations", ["app/models.py", "conftest.py", "gen/a_pb2.py", "gen/keep.py"]),
        ("conftest.py", ["app/migrations/0001.py", "app/models.py", "gen/a_pb2.py", "gen/keep.py"]),
        ("*_pb2.py", ["app/migrations/0001.py", "app/models.py", "conftest.py", "gen/keep.py"]),
        # With a slash, the pattern is anchored at the root.
        ("gen/*_pb2.py", ["app/migrations/0001.py", "app/models.py", "conftest.py", "gen/keep.py"]),
        (
            "migrations/0001.py",
            [
                "app/migrations/0001.py",
                "app/models.py",
                "conftest.py",
                "gen/a_pb2.py",
                "gen/keep.py",
            ],
        ),  # fmt: skip
        ("app/**/0001.py", ["app/models.py", "conftest.py", "gen/a_pb2.py", "gen/keep.py"]),
        ("**/migrations", ["app/models.py", "conftest.py", "gen/a_pb2.py", "gen/keep.py"]),
        ("/gen", ["app/migrations/0001.py", "app/models.py", "conftest.py"]),
        ("gen/**", ["app/migrations/0001.py", "app/models.py", "conftest.py"]),
        # A trailing slash matches directories only.
        (
            "conftest.py/",
            [
                "app/migrations/0001.py",
                "app/models.py",
                "conftest.py",
                "gen/a_pb2.py",
                "gen/keep.py",
            ],
        ),  # fmt: skip
        ("[ac]pp", ["conftest.py", "gen/a_pb2.py", "gen/keep.py"]),
        ("?en", ["app/migrations/0001.py", "app/models.py", "conftest.py"]),
    ],
)
def test_exclude_pattern_forms(tmp_path: Path, pattern: str, expected: list[str]) -> None:
    make(tmp_path, ["app/models.py", "app/migrations/0001.py", "gen/a_pb2.py", "gen/keep.py"])
    make(tmp_path, ["conftest.py"])
    assert run(tmp_path, extend_exclude=(pattern,)) == expected


def test_anchored_patterns_are_relative_to_settings_root(tmp_path: Path) -> None:
    project = tmp_path / "project"
    make(project, ["gen/a.py", "gen/b.py", "src/gen/a.py", "src/gen/b.py", "src/x/c.py"])
    settings = Settings(root=project, extend_exclude=("gen/a.py", "src/x", "/gen/b.py"))
    assert rel(project, discover([project], settings)) == ["src/gen/a.py", "src/gen/b.py"]


def test_walking_outside_root_only_name_patterns_apply(tmp_path: Path) -> None:
    make(tmp_path, ["other/gen/a.py", "other/build/b.py", "other/c.py", "root/"])
    settings = Settings(root=tmp_path / "root", extend_exclude=("gen/a.py", "c.py"))
    found = discover([tmp_path / "other"], settings)
    assert rel(tmp_path, found) == ["other/gen/a.py"]


# -- explicit paths and --force-exclude ---------------------------------------------------------


def test_explicit_excluded_file_is_checked_unless_force_exclude(tmp_path: Path) -> None:
    make(tmp_path, ["gen/a_pb2.py", "build/b.py", "x.py"])
    paths = ["gen/a_pb2.py", "build/b.py", "x.py"]
    pb2 = ("*_pb2.py",)
    assert run(tmp_path, paths, extend_exclude=pb2) == ["build/b.py", "gen/a_pb2.py", "x.py"]
    # With --force-exclude the file itself and its directories (below the root) are checked.
    assert run(tmp_path, paths, force=True, extend_exclude=pb2) == ["x.py"]


def test_force_exclude_matches_directory_only_patterns_on_ancestors(tmp_path: Path) -> None:
    make(tmp_path, ["vendor/v.py", "src/vendor.py", "src/third/vendor/w.py"])
    paths = ["vendor/v.py", "src/vendor.py", "src/third/vendor/w.py"]
    assert run(tmp_path, paths, force=True, extend_exclude=("vendor/",)) == ["src/vendor.py"]


def test_explicit_excluded_directory_is_walked_unless_force_exclude(tmp_path: Path) -> None:
    make(tmp_path, ["build/a.py", "build/sub/b.py", "build/dist/c.py", "build/x_pb2.py"])
    pb2 = ("*_pb2.py",)
    # Entries below an explicit directory are still tested on their own (dist, *_pb2.py).
    assert run(tmp_path, ["build"], extend_exclude=pb2) == ["build/a.py", "build/sub/b.py"]
    assert run(tmp_path, ["build"], force=True, extend_exclude=pb2) == []
    assert run(tmp_path, ["build/sub"], force=True, extend_exclude=pb2) == []


def test_force_exclude_outside_root_uses_names(tmp_path: Path) -> None:
    make(tmp_path, ["elsewhere/build/a.py", "elsewhere/ok/b.py", "root/"])
    settings = Settings(root=tmp_path / "root")
    paths = [tmp_path / "elsewhere/build/a.py", tmp_path / "elsewhere/ok/b.py"]
    assert rel(tmp_path, discover(paths, settings, force_exclude=True)) == ["elsewhere/ok/b.py"]


def test_force_exclude_does_not_exclude_the_root_itself(tmp_path: Path) -> None:
    root = tmp_path / "build"
    make(root, ["a.py"])
    assert rel(root, discover([root], Settings(root=root), force_exclude=True)) == ["a.py"]


def test_an_explicit_file_that_is_not_python_is_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ruff: ``mpcheck check README.md`` (a glob's catch) says so instead of MPC001."""
    make(tmp_path, ["script", "README.md", "a.pyi", "n.ipynb"])
    assert run(tmp_path, ["script", "README.md", "a.pyi"]) == ["a.pyi"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        status = cli.main(["check", "--no-cache", "README.md", "a.pyi"])
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    assert status == 0 and "MPC001" not in out
    assert err == "mpcheck: warning: README.md: not a Python file (.py, .pyi, .ipynb), skipped\n"


def test_missing_path_raises_with_the_given_spelling(tmp_path: Path) -> None:
    make(tmp_path, ["a.py"])
    settings = Settings(root=tmp_path)
    with pytest.raises(MissingPathError) as info:
        discover([tmp_path / "a.py", Path("does/not/exist.py")], settings)
    assert str(info.value) == "does/not/exist.py: No such file or directory"


def test_duplicates_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, ["pkg/a.py", "pkg/b.py"])
    monkeypatch.chdir(tmp_path)
    found = discover([Path("pkg"), Path("pkg/a.py"), tmp_path / "pkg"], Settings(root=tmp_path))
    assert found == [tmp_path / "pkg" / "a.py", tmp_path / "pkg" / "b.py"]


def test_relative_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, ["pkg/a.py"])
    monkeypatch.chdir(tmp_path / "pkg")
    assert discover([Path(".")], Settings(root=tmp_path)) == [tmp_path / "pkg" / "a.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinked_directories_are_not_followed(tmp_path: Path) -> None:
    make(tmp_path, ["pkg/a.py", "real/r.py"])
    try:
        os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")  # a cycle
        os.symlink(tmp_path / "real", tmp_path / "pkg" / "alias")
        os.symlink(tmp_path / "real" / "r.py", tmp_path / "pkg" / "link.py")
        os.symlink(tmp_path / "missing.py", tmp_path / "pkg" / "broken.py")
    except OSError:
        pytest.skip("cannot create symlinks")
    assert run(tmp_path, ["pkg"]) == ["pkg/a.py", "pkg/link.py"]
    # An explicitly named symlinked directory is walked.
    assert run(tmp_path, ["pkg/alias"]) == ["pkg/alias/r.py"]


# -- .gitignore -----------------------------------------------------------------------------------


def git_repo(root: Path) -> None:
    (root / ".git" / "info").mkdir(parents=True)


def test_gitignore_root_and_nested_with_negation(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "# generated\n*.gen.py\nout/\n/top_only.py\nsecret*\n")
    write(tmp_path / "pkg" / ".gitignore", "!keep.gen.py\nlocal.py\n/anchored.py\n")
    make(
        tmp_path,
        [
            "a.py",
            "b.gen.py",
            "top_only.py",
            "secret_key.py",
            "out/o.py",
            "pkg/out/o.py",
            "pkg/top_only.py",
            "pkg/keep.gen.py",
            "pkg/drop.gen.py",
            "pkg/local.py",
            "pkg/anchored.py",
            "pkg/sub/anchored.py",
            "pkg/sub/local.py",
            "other/local.py",
            "other/keep.gen.py",
        ],
    )
    assert run(tmp_path) == [
        "a.py",
        "other/local.py",
        "pkg/keep.gen.py",
        "pkg/sub/anchored.py",
        "pkg/top_only.py",
    ]


def test_negation_cannot_reinclude_below_ignored_directory(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "vendor/\n!vendor/keep.py\nlib/*\n!lib/keep.py\n")
    make(tmp_path, ["vendor/keep.py", "vendor/x.py", "lib/keep.py", "lib/x.py", "lib/d/y.py"])
    assert run(tmp_path) == ["lib/keep.py"]


def test_last_matching_pattern_wins(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "*.py\n!*.py\nx*.py\n!xkeep.py\n")
    make(tmp_path, ["a.py", "xa.py", "xkeep.py"])
    assert run(tmp_path) == ["a.py", "xkeep.py"]


def test_git_info_exclude_is_honoured_below_gitignore(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".git" / "info" / "exclude", "scratch.py\nlocal_*.py\n")
    write(tmp_path / ".gitignore", "!local_keep.py\n")
    make(tmp_path, ["a.py", "scratch.py", "d/scratch.py", "local_x.py", "local_keep.py"])
    assert run(tmp_path) == ["a.py", "local_keep.py"]


def test_gitignore_ignored_outside_a_git_work_tree(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.py\n")
    make(tmp_path, ["a.py"])
    assert run(tmp_path) == ["a.py"]


def test_gitignore_not_respected_when_disabled(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "*.py\n")
    make(tmp_path, ["a.py"])
    assert run(tmp_path) == []
    assert run(tmp_path, respect_gitignore=False) == ["a.py"]


def test_git_file_marks_a_work_tree(tmp_path: Path) -> None:
    write(tmp_path / ".git", "gitdir: /elsewhere/.git/worktrees/x\n")
    write(tmp_path / ".gitignore", "ignored.py\n")
    make(tmp_path, ["a.py", "ignored.py"])
    assert run(tmp_path) == ["a.py"]


def test_walk_from_subdirectory_loads_parent_gitignores(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "*.gen.py\n/pkg/sub/anchored.py\n")
    write(tmp_path / "pkg" / ".gitignore", "sub/x.py\n")
    make(tmp_path, ["pkg/sub/a.py", "pkg/sub/b.gen.py", "pkg/sub/anchored.py", "pkg/sub/x.py"])
    assert run(tmp_path, ["pkg/sub"]) == ["pkg/sub/a.py"]


def test_explicit_gitignored_paths_are_checked(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "generated/\nscratch.py\n")
    make(tmp_path, ["generated/a.py", "generated/deep/b.py", "scratch.py", "ok.py"])
    # Like ruff: explicit paths are never gitignored, and entries below an explicit directory
    # are tested on their own (``generated/`` matches the directory, not its files).
    assert run(tmp_path, ["generated", "scratch.py"]) == [
        "generated/a.py",
        "generated/deep/b.py",
        "scratch.py",
    ]
    # --force-exclude applies `exclude`, not .gitignore (ruff's behaviour too).
    assert run(tmp_path, ["scratch.py"], force=True) == ["scratch.py"]
    assert run(tmp_path) == ["ok.py"]


def test_nested_repository_does_not_inherit_outer_gitignore(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "*.gen.py\n")
    git_repo(tmp_path / "vendored")
    write(tmp_path / "vendored" / ".gitignore", "own.py\n")
    make(tmp_path, ["a.gen.py", "vendored/b.gen.py", "vendored/own.py", "vendored/c.py"])
    assert run(tmp_path) == ["vendored/b.gen.py", "vendored/c.py"]


def test_gitignore_trailing_spaces_and_escapes(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "a.py   \n\\#hash.py\n\\!bang.py\n")
    make(tmp_path, ["a.py", "#hash.py", "!bang.py", "b.py"])
    assert run(tmp_path) == ["b.py"]


GIT = shutil.which("git")


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_gitignore_agrees_with_git(tmp_path: Path) -> None:
    """Oracle: what `git ls-files --others --exclude-standard` would show."""
    assert GIT is not None
    rules = (
        "*.tmp.py\n/root_only.py\nbuild*/\n!build_keep/\ndocs/**/conf.py\n"
        "**/fixtures/*.py\n!**/fixtures/keep.py\nlogs\n[ab]_*.py\n!a_keep.py\n"
    )
    write(tmp_path / ".gitignore", rules)
    write(tmp_path / "pkg" / ".gitignore", "*.py\n!mod.py\n!sub/\n")
    files = [
        "root_only.py", "pkg/root_only.py", "x.tmp.py", "pkg/y.tmp.py", "build1/a.py",
        "build_keep/a.py", "src/build2/b.py", "docs/conf.py", "docs/api/conf.py",
        "docs/api/v1/conf.py", "tests/fixtures/f.py", "tests/fixtures/keep.py", "fixtures/g.py",
        "logs/l.py", "src/logs", "a_one.py", "b_two.py", "a_keep.py", "c_three.py",
        "pkg/mod.py", "pkg/other.py", "pkg/sub/mod.py", "pkg/sub/deep.py", "plain.py",
    ]  # fmt: skip
    make(tmp_path, files)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    subprocess.run([GIT, "init", "-q", str(tmp_path)], check=True, env=env)
    listed = subprocess.run(
        [GIT, "ls-files", "--others", "--exclude-standard"],
        cwd=tmp_path,
        check=True,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.split()
    expected = sorted((p for p in listed if p.endswith(".py")), key=lambda p: Path(p).parts)
    assert run(tmp_path, exclude=()) == expected
    assert "pkg/mod.py" in expected and "tests/fixtures/keep.py" in expected
    assert "pkg/other.py" not in expected and "tests/fixtures/f.py" not in expected


def test_glob_translation_matches_pathspec() -> None:
    """Cross-check single-entry matching against pathspec's gitignore implementation."""
    pathspec = pytest.importorskip("pathspec")
    patterns = ["*.py", "foo", "/foo", "foo/", "a/b", "**/x", "a/**", "a/**/b", "[ab].py",
                "[!a]*.py", "x?", "**", "d*/e", "*.py[co]"]  # fmt: skip
    paths = ["foo", "a/foo", "a/b", "x/a/b", "x", "q/x", "a/x/y", "a/x/y/b", "a.py", "b.py",
             "c.py", "xy", "d1/e", "dd/x/e", "z.pyc", "a/b/c"]  # fmt: skip
    for text in patterns:
        ours = parse_pattern(text)
        assert ours is not None
        spec = pathspec.GitIgnoreSpec.from_lines([text])
        for path in paths:
            parent = path.rpartition("/")[0]
            if parent and spec.match_file(parent + "/"):
                continue  # pathspec also matches below a matching directory; we prune instead
            for is_dir in (False, True):
                expected = spec.match_file(path + "/" if is_dir else path)
                got = ours.matches(path, path.rpartition("/")[2], is_dir)
                assert got == expected, (text, path, is_dir)


# -- hierarchical configuration -------------------------------------------------------------------


def walk(
    root: Path, paths: Iterable[str] = (".",), cwd: Path | None = None, force: bool = False
) -> list[str]:
    """Discover as ``mpcheck check`` does: each directory governed by the closest config."""
    lookup = Resolver(cwd or root).settings_for
    return rel(root, discover([root / p for p in paths], lookup, force_exclude=force))


def test_each_directory_uses_the_excludes_of_its_closest_config(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.mpcheck]\nextend-exclude = ["gen", "proj/b.py"]\n')
    # proj/: no default excludes, and an anchored pattern relative to proj/.
    write(tmp_path / "proj" / "mpcheck.toml", 'exclude = ["/local.py"]\n')
    make(tmp_path, ["a.py", "gen/g.py", "build/x.py", "local.py"])
    make(tmp_path, ["proj/b.py", "proj/gen/g.py", "proj/build/x.py", "proj/local.py"])
    make(tmp_path, ["proj/sub/local.py"])
    expected = ["a.py", "local.py", "proj/b.py", "proj/build/x.py", "proj/gen/g.py"]
    expected.append("proj/sub/local.py")
    assert walk(tmp_path) == expected
    # Whether proj/ itself is entered is up to the config of the directory holding it.
    write(tmp_path / "pyproject.toml", '[tool.mpcheck]\nextend-exclude = ["/proj"]\n')
    assert walk(tmp_path) == ["a.py", "gen/g.py", "local.py"]


def test_walking_a_nested_project_from_outside_uses_its_config(tmp_path: Path) -> None:
    write(tmp_path / "proj" / "pyproject.toml", '[tool.mpcheck]\nextend-exclude = ["/gen"]\n')
    make(tmp_path, ["proj/gen/g.py", "proj/src/gen/h.py", "outside/"])
    assert walk(tmp_path, ["proj"], cwd=tmp_path / "outside") == ["proj/src/gen/h.py"]


def test_force_exclude_uses_the_config_governing_the_path(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.mpcheck]\nextend-exclude = ["proj/skip"]\n')
    write(tmp_path / "proj" / "mpcheck.toml", 'extend-exclude = ["/gen"]\n')
    make(tmp_path, ["proj/gen/g.py", "proj/skip/s.py", "skip/t.py"])
    paths = ["proj/gen/g.py", "proj/skip/s.py", "skip/t.py"]
    # proj/skip/s.py is proj/'s business: the outer pattern does not reach into it.
    assert walk(tmp_path, paths, force=True) == ["proj/skip/s.py", "skip/t.py"]


def test_respect_gitignore_is_per_config(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "ignored*.py\n")
    write(tmp_path / "loose" / "mpcheck.toml", "respect-gitignore = false\n")
    write(tmp_path / "loose" / "strict" / "mpcheck.toml", "")
    make(tmp_path, ["a.py", "ignored.py", "loose/ignored.py", "loose/strict/ignored2.py"])
    assert walk(tmp_path) == ["a.py", "loose/ignored.py"]
    # Off at the top, on again below: the .gitignore files above still count.
    write(tmp_path / "mpcheck.toml", "respect-gitignore = false\n")
    write(tmp_path / "loose" / "mpcheck.toml", "")
    assert walk(tmp_path) == ["a.py", "ignored.py"]


def test_config_in_an_excluded_directory_is_never_read(tmp_path: Path) -> None:
    write(tmp_path / "node_modules" / "pkg" / "mpcheck.toml", "broken = [\n")
    make(tmp_path, ["a.py", "node_modules/pkg/x.py"])
    assert walk(tmp_path) == ["a.py"]
    write(tmp_path / "pkg" / "mpcheck.toml", "broken = [\n")
    with pytest.raises(ConfigError, match=r"^pkg/mpcheck\.toml: invalid TOML: "):
        walk(tmp_path)


def test_directories_are_resolved_once(tmp_path: Path) -> None:
    make(tmp_path, [f"pkg{i}/sub/m{j}.py" for i in range(5) for j in range(5)])
    asked: list[str] = []
    resolver = Resolver(tmp_path)

    def lookup(directory: str) -> Settings:
        asked.append(directory)
        return resolver.settings_for(directory)

    assert len(discover([tmp_path], lookup)) == 25
    assert len(asked) == len(set(asked)) == 11  # the start, pkg0..4, pkg0..4/sub


# -- scale ----------------------------------------------------------------------------------------


def test_five_thousand_files_is_fast(tmp_path: Path) -> None:
    git_repo(tmp_path)
    write(tmp_path / ".gitignore", "*.gen.py\n/data/\n!keep.gen.py\n")
    for d in range(50):
        pkg = tmp_path / "src" / f"pkg{d}" / "sub"
        pkg.mkdir(parents=True)
        write(pkg.parent / ".gitignore", "local_*.py\n")
        for f in range(100):
            (pkg / f"m{f}.py").touch()
        (pkg / "x.gen.py").touch()
        (pkg / "local_x.py").touch()
    venv = tmp_path / ".venv" / "lib"
    venv.mkdir(parents=True)
    for f in range(200):  # pruned: costs one name lookup however big it is
        (venv / f"v{f}.py").touch()
    start = time.perf_counter()
    found = discover([tmp_path], Settings(root=tmp_path))
    elapsed = time.perf_counter() - start
    assert len(found) == 5000
    assert elapsed < 2.0, f"discovery took {elapsed:.2f}s"
