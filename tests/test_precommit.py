"""The pre-commit hook, run by real pre-commit in throwaway git repositories.

Building a hook environment (a virtualenv, then ``pip install`` of mpcheck, libcst and
pathspec) takes several seconds, so it happens twice per session and no more: once inside
``pre-commit try-repo`` (which always builds into a throwaway store of its own), and once
into a module-scoped ``PRE_COMMIT_HOME`` that every ``pre-commit run`` below reuses.

The hook repository is a commit of this checkout's working tree, untracked files included:
``try-repo`` on the checkout itself would only see committed files plus edits to tracked
ones (it makes a temporary commit with ``git add -u``), so a new module would be missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support import FIXTURES, ROOT, expected

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")

BAD = sorted(FIXTURES.glob("mpc1*/bad_*.py"))[0]
GOOD = sorted(FIXTURES.glob("mpc1*/good_*.py"))[0]
# The bad fixture's first `# expect:` mark, as mpcheck prints it (`bad.py:ROW:COL: CODE`).
_ROW, _CODE = min(expected(BAD))
BAD_FINDING = re.compile(rf"^bad\.py:{_ROW}:\d+: {_CODE} ", re.M)
STUB_FINDING = re.compile(rf"^stub\.pyi:{_ROW}:\d+: {_CODE} ", re.M)
WORKING_TREE_NAME = "mpcheck (working tree)"
NOTEBOOK = ROOT / "tests" / "data" / "notebooks" / "train.ipynb"


def _git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """HOME and PRE_COMMIT_HOME in tmp: the user's caches and git config stay untouched."""
    home = tmp_path_factory.mktemp("home")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "PRE_COMMIT", "GITHUB_", "MPCHECK_"))
    }
    env.update(
        HOME=str(home),
        PRE_COMMIT_HOME=str(home / "pre-commit"),
        XDG_CACHE_HOME=str(home / ".cache"),
        GIT_AUTHOR_NAME="mpcheck tests",
        GIT_AUTHOR_EMAIL="tests@example.invalid",
        GIT_COMMITTER_NAME="mpcheck tests",
        GIT_COMMITTER_EMAIL="tests@example.invalid",
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


def hook_requirements() -> list[str]:
    """What pip needs to build and install mpcheck into a hook environment."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build: list[str] = project["build-system"]["requires"]
    runtime: list[str] = project["project"]["dependencies"]
    return [*build, *runtime]


def why_pip_cannot_install(env: dict[str, str], dest: Path) -> str | None:
    """None when pip can fetch the hook's packages; otherwise the reason, from pip itself.

    pre-commit builds the hook environment with ``pip install <hook repo>``, which needs the
    build backend and mpcheck's dependencies from a package index (or ``PIP_FIND_LINKS``).
    The probe asks the same pip configuration for the same packages.
    """
    requirements = hook_requirements()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--dest", str(dest), "--retries", "1"]
        + ["--timeout", "30", "--disable-pip-version-check", *requirements],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode == 0:
        return None
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    detail = errors[-1] if errors else proc.stderr.strip()[-300:]
    return f"`pip download {' '.join(requirements)}` failed: {detail}"


@pytest.fixture(scope="module")
def pip_can_install(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> None:
    """Skip, saying why, only when no index or wheel directory can serve the hook's packages.

    If the probe succeeds, every later failure of a hook test is a real one.
    """
    reason = why_pip_cannot_install(env, tmp_path_factory.mktemp("pip-probe"))
    if reason is not None:
        pytest.skip(f"pre-commit cannot build the hook environment on this machine: {reason}")


def test_probe_reports_why_pip_cannot_install(tmp_path: Path, env: dict[str, str]) -> None:
    """An index-less pip (no config files, no index, an empty wheel directory) is detected."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    offline = {
        **{k: v for k, v in env.items() if not k.startswith("PIP_")},
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(empty),
    }
    reason = why_pip_cannot_install(offline, tmp_path / "dest")
    assert reason is not None
    assert reason.startswith("`pip download setuptools")
    assert "ERROR: " in reason


@pytest.fixture(scope="module")
def hook_repo(
    tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], pip_can_install: None
) -> tuple[Path, str]:
    """A git repository holding this working tree (committed), plus one uncommitted edit."""
    repo = tmp_path_factory.mktemp("hook-repo")
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT, env=env)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    _git("init", "-q", cwd=repo, env=env)
    _git("add", "-A", cwd=repo, env=env)
    _git("commit", "-q", "-m", "snapshot of the working tree", cwd=repo, env=env)
    rev = _git("rev-parse", "HEAD", cwd=repo, env=env).strip()
    # Uncommitted: only try-repo (which commits the working tree) can see this name.
    hooks = repo / ".pre-commit-hooks.yaml"
    hooks.write_text(hooks.read_text().replace("name: mpcheck\n", f"name: {WORKING_TREE_NAME}\n"))
    return repo, rev


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """The repository a user runs pre-commit in."""
    repo = tmp_path_factory.mktemp("project")
    _git("init", "-q", cwd=repo, env=env)
    (repo / "bad.py").write_text(BAD.read_text())
    (repo / "good.py").write_text(GOOD.read_text())
    (repo / "stub.pyi").write_text(BAD.read_text())
    (repo / "build").mkdir()
    (repo / "build" / "generated.py").write_text(BAD.read_text())  # excluded by default
    (repo / "README.md").write_text("not python\n")
    (repo / "train.ipynb").write_text(NOTEBOOK.read_text())
    for i in range(50):
        (repo / f"plain_{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    _git("add", "-A", cwd=repo, env=env)
    return repo


def pre_commit(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_manifest_is_valid_for_pre_commit() -> None:
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    assert hook["id"] == "mpcheck"
    assert hook["entry"] == "mpcheck check --force-exclude"
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "pyi", "jupyter"]
    assert hook["require_serial"] is True
    assert hook["pass_filenames"] is True  # so an empty selection skips the hook entirely
    raw = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert raw[0]["entry"].split()[0] == "mpcheck"  # the console script pip installs


def test_try_repo_fails_on_bad_and_passes_good_files(
    hook_repo: tuple[Path, str], project: Path, env: dict[str, str]
) -> None:
    repo, _ = hook_repo
    start = time.perf_counter()
    proc = pre_commit(
        "try-repo", str(repo), "mpcheck", "--files", "bad.py", "good.py", cwd=project, env=env
    )
    elapsed = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Creating temporary repo with uncommitted changes" in out
    assert re.search(rf"^{re.escape(WORKING_TREE_NAME)}\.+Failed$", out, re.M), out
    assert BAD_FINDING.search(out), out
    assert "good.py" not in out.split("Failed", 1)[1]
    print(f"pre-commit try-repo (environment build included): {elapsed:.1f}s")


@pytest.fixture(scope="module")
def installed(hook_repo: tuple[Path, str], project: Path, env: dict[str, str]) -> Path:
    """``.pre-commit-config.yaml`` as try-repo writes it, with its environment built once."""
    repo, rev = hook_repo
    config = {"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": "mpcheck"}]}]}
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git("add", ".pre-commit-config.yaml", cwd=project, env=env)
    start = time.perf_counter()
    proc = pre_commit("install-hooks", cwd=project, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"pre-commit install-hooks: {time.perf_counter() - start:.1f}s")
    return project


def run_hook(project: Path, env: dict[str, str], *files: str) -> tuple[int, str]:
    proc = pre_commit("run", "--verbose", "--files", *files, cwd=project, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def test_hook_fails_on_bad_file(installed: Path, env: dict[str, str]) -> None:
    rc, out = run_hook(installed, env, "bad.py")
    assert rc == 1, out
    assert re.search(r"^mpcheck\.+Failed$", out, re.M), out
    assert BAD_FINDING.search(out), out


def test_hook_passes_on_good_file(installed: Path, env: dict[str, str]) -> None:
    rc, out = run_hook(installed, env, "good.py")
    assert rc == 0, out
    assert re.search(r"^mpcheck\.+Passed$", out, re.M), out


def test_pyi_files_are_checked(installed: Path, env: dict[str, str]) -> None:
    rc, out = run_hook(installed, env, "stub.pyi")
    assert rc == 1, out
    assert STUB_FINDING.search(out), out


def test_notebooks_are_checked(installed: Path, env: dict[str, str]) -> None:
    # pre-commit tags .ipynb `jupyter`, not `python`: the hook's types_or must name it
    rc, out = run_hook(installed, env, "train.ipynb", "good.py")
    assert rc == 1, out
    assert re.search(r"^train\.ipynb:cell 3:2:10: MPC404 ", out, re.M), out


def test_no_python_files_skips_the_hook(installed: Path, env: dict[str, str]) -> None:
    # pre-commit does not start the hook at all, so `mpcheck check` never sees an empty list
    # (with no paths it would check `.`).
    rc, out = run_hook(installed, env, "README.md")
    assert rc == 0, out
    assert re.search(r"^mpcheck\.+\(no files to check\)Skipped$", out, re.M), out


def test_files_without_torch_pass(installed: Path, env: dict[str, str]) -> None:
    files = [f"plain_{i}.py" for i in range(50)]
    rc, out = run_hook(installed, env, *files)
    assert rc == 0, out
    assert re.search(r"^mpcheck\.+Passed$", out, re.M), out
    # (how quickly: bench/, never a timed test; the hook prints its duration for a reader)


def test_force_exclude_applies_to_files_pre_commit_passes(
    installed: Path, env: dict[str, str]
) -> None:
    rc, out = run_hook(installed, env, "build/generated.py")
    assert rc == 0, out
    assert "generated.py" not in out
