"""Bringing mpcheck into a repository that already has findings: a baseline, what a change
introduces (``--diff-base``), severities and ``--fail-on``, and the CLI comforts around them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.output import baseline

OVERFLOW = "y = x.masked_fill(x > 0, -1e9)\n"  # MPC301, an error
DEPRECATED = "scaler = torch.cuda.amp.GradScaler()\n"  # MPC404, a warning
TRAIN = f"import torch\n\n\ndef step(x):\n    x = x.half()\n    {OVERFLOW}    return y\n"


def run(capsys: pytest.CaptureFixture[str], tree: Path, *argv: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        status = cli.main(["check", "--no-cache", *argv])
    finally:
        os.chdir(cwd)
    baseline.clear()
    out, err = capsys.readouterr()
    return status, out, err


def codes(out: str) -> list[str]:
    return [line.split(": ")[1].split()[0] for line in out.splitlines() if line[:1].isalpha()]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "amp.py").write_text(f"import torch\n\n{DEPRECATED}")
    return tmp_path


def test_a_baseline_hides_todays_findings_and_reports_only_a_new_one(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, repo, "--write-baseline", "mpcheck-baseline.json")
    assert status == 0 and "recorded 2 findings" in err
    assert run(capsys, repo, "--baseline", "mpcheck-baseline.json", "-q")[:2] == (0, "")
    # unrelated edits move the findings: still accepted
    edited = "# a new header comment\n\n" + TRAIN.replace(
        "def step", "def helper():\n    pass\n\n\ndef step"
    )
    (repo / "train.py").write_text(edited)
    assert run(capsys, repo, "--baseline", "mpcheck-baseline.json", "-q")[:2] == (0, "")
    # a second overflow in another function is new, though its line reads the same
    (repo / "train.py").write_text(edited + "\n\ndef other(x):\n    x = x.half()\n    " + OVERFLOW)
    status, out, _ = run(capsys, repo, "--baseline", "mpcheck-baseline.json", "-q")
    assert status == 1 and codes(out) == ["MPC301"] and out.startswith("train.py:18:30: MPC301")


def test_the_baseline_counts_identical_lines_in_one_function(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, repo, "--write-baseline", "b.json")
    (repo / "train.py").write_text(TRAIN.replace(OVERFLOW, OVERFLOW + "    " + OVERFLOW))
    status, out, _ = run(capsys, repo, "--baseline", "b.json", "-q")
    assert status == 1 and codes(out) == ["MPC301"]


def test_gone_findings_are_counted_so_the_baseline_can_be_refreshed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, repo, "--write-baseline", "b.json")
    (repo / "amp.py").write_text("import torch\n\nscaler = torch.amp.GradScaler('cuda')\n")
    status, _, err = run(capsys, repo, "--baseline", "b.json")
    assert status == 0
    assert (
        "1 finding recorded in b.json no longer occur" in err and "--write-baseline b.json" in err
    )
    # checking another file only does not call the other file's entries gone
    (repo / "amp.py").write_text(f"import torch\n\n{DEPRECATED}")
    assert "no longer" not in run(capsys, repo, "--baseline", "b.json", "train.py")[2]


def test_baseline_from_config_and_bad_baselines(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "sub").mkdir()
    run(capsys, repo, "--write-baseline", "sub/b.json")
    (repo / "pyproject.toml").write_text('[tool.mpcheck]\nbaseline = "sub/b.json"\n')
    assert run(capsys, repo, "-q")[:2] == (0, "")
    (repo / "sub" / "b.json").write_text("{not json")
    status, out, err = run(capsys, repo)
    assert status == 2 and "is not valid JSON" in err and "Traceback" not in err
    (repo / "sub" / "b.json").write_text('{"version": 3}')
    assert "is not an mpcheck baseline" in run(capsys, repo)[2]
    (repo / "pyproject.toml").write_text("[tool.mpcheck]\nbaseline = 3\n")
    assert "'baseline' in [tool.mpcheck] must be a path" in run(capsys, repo)[2]


def test_a_baseline_entry_survives_reformatting_and_one_finding_is_singular(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fingerprint ignores whitespace, as documented: a formatter's pass changes nothing."""
    (repo / "amp.py").unlink()
    status, _, err = run(capsys, repo, "--write-baseline", "b.json")
    assert status == 0 and "recorded 1 finding in b.json" in err
    squeezed = TRAIN.replace(OVERFLOW, "y=x.masked_fill( x>0,-1e9 )\n")
    (repo / "train.py").write_text(squeezed.replace("def step(x):", "def step( x ):"))
    assert run(capsys, repo, "--baseline", "b.json", "-q")[:2] == (0, "")


def test_a_baseline_after_add_noqa_adoption_is_empty(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, repo, "--add-noqa")[0] == 0
    run(capsys, repo, "--write-baseline", "b.json")
    assert json.loads((repo / "b.json").read_text())["findings"] == []
    (repo / "new.py").write_text(f"import torch\n\n{DEPRECATED}")
    status, out, _ = run(capsys, repo, "--baseline", "b.json", "-q")
    assert status == 1 and codes(out) == ["MPC404"] and out.startswith("new.py:3:")


def git(tree: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True)


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@needs_git
@pytest.mark.integration  # the base is checked by a child mpcheck
def test_diff_base_reports_only_the_findings_a_change_introduces(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    assert run(capsys, repo, "--diff-base", "main", "-q")[:2] == (0, "")
    # moved by an edit above: not changed; a new overflow line: changed
    (repo / "train.py").write_text(
        "# header\n"
        + TRAIN.replace(
            "    return y\n", "    " + OVERFLOW.replace("y =", "z =") + "    return y\n"
        )
    )
    git(repo, "commit", "-qam", "edit")
    (repo / "untracked.py").write_text(f"import torch\n\n{DEPRECATED}")
    status, out, _ = run(capsys, repo, "--diff-base", "HEAD~1", "--output-format", "concise", "-q")
    assert status == 1
    assert [line.split(": ")[0] for line in out.splitlines()] == [
        "train.py:8:30",
        "untracked.py:3:10",
    ]
    # uncommitted edits count too; against HEAD only the untracked file and the new edit
    (repo / "amp.py").write_text(f"import torch\n\n\n{DEPRECATED}")
    status, out, _ = run(capsys, repo, "--diff-base", "HEAD", "--output-format", "concise", "-q")
    assert {line.split(":")[0] for line in out.splitlines()} == {"untracked.py"}


@needs_git
def test_diff_base_errors_are_one_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, repo, "--diff-base", "main")
    assert status == 2 and "git rev-parse failed" in err and "Traceback" not in err
    git(repo, "init", "-q")
    status, _, err = run(capsys, repo, "--diff-base", "no-such-ref")
    assert (
        status == 2 and err.strip() == "mpcheck: error: --diff-base: unknown revision `no-such-ref`"
    )
    assert "is not a revision" in run(capsys, repo, "--diff-base=--output=x")[2]


def test_severity_is_shown_and_counted_apart(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, repo, "--output-format", "concise")
    assert status == 1
    assert "amp.py:3:10: MPC404 [*] warning: " in out
    assert "train.py:6:" in out and "MPC301 error: " in out
    assert "\nFound 1 error and 1 warning.\n[*] 1 fixable with the `--fix` option.\n" in out


def test_fail_on_error_lets_warnings_pass(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "train.py").unlink()
    assert run(capsys, repo, "--fail-on", "error")[0] == 0
    assert run(capsys, repo)[0] == 1
    (repo / "pyproject.toml").write_text('[tool.mpcheck]\nfail-on = "error"\n')
    assert run(capsys, repo)[0] == 0
    assert run(capsys, repo, "--fail-on", "warning")[0] == 1
    (repo / "pyproject.toml").write_text('[tool.mpcheck]\nfail-on = "never"\n')
    status, _, err = run(capsys, repo)
    assert status == 2 and 'must be "error" or "warning"' in err


def test_statistics_text_and_json(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "more.py").write_text(f"import torch\n\n{DEPRECATED}")
    _, out, _ = run(capsys, repo, "--statistics")
    assert out.splitlines() == [
        "    2\tMPC404\twarning\t[*] deprecated-amp-api",
        "    1\tMPC301\terror  \t    fp16-overflow-constant",
    ]
    _, out, _ = run(capsys, repo, "--statistics", "--output-format", "json")
    rows = json.loads(out)
    assert rows[0] == {
        "code": "MPC404",
        "name": "deprecated-amp-api",
        "count": 2,
        "severity": "warning",
        "fixable": 2,
        "unsafe_fixable": 0,
    }


def test_show_files_show_settings_and_no_files(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "notes.txt").write_text("x")
    status, out, _ = run(capsys, repo, "--show-files")
    assert status == 0 and out.splitlines() == ["amp.py", "train.py"]
    (repo / "pyproject.toml").write_text('[tool.mpcheck]\nignore = ["MPC404"]\n')
    status, out, _ = run(capsys, repo, "--show-settings")
    assert status == 0 and "config: pyproject.toml" in out and "ignore: ['MPC404']" in out
    assert "MPC404" not in out.splitlines()[-1] and "MPC301" in out.splitlines()[-1]
    (repo / "empty").mkdir()
    status, _, err = run(capsys, repo, "empty")
    assert status == 0 and "warning: No Python files found under empty" in err


def test_an_unknown_option_prints_the_subcommand_usage(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(capsys, repo, "--bad-option")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mpcheck check") and "unrecognized arguments: --bad-option" in err


def test_ruff_keeps_our_noqa_comments_with_lint_external(tmp_path: Path) -> None:
    """Without ``lint.external = ["MPC"]`` ruff's RUF102 fix deletes ``# noqa: MPC101``."""
    ruff = [sys.executable, "-m", "ruff", "check", "--preview", "--fix", "--no-cache"]
    source = "import torch\n\ny = torch.ones(2).half().masked_fill(True, -1e9)  # noqa: MPC301\n"
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["RUF100", "RUF102"]\n')
    subprocess.run([*ruff, "a.py"], cwd=tmp_path, capture_output=True, check=False)
    assert "noqa" not in (tmp_path / "a.py").read_text()
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "ruff.toml").write_text(
        '[lint]\nselect = ["RUF100", "RUF102"]\nexternal = ["MPC"]\n'
    )
    done = subprocess.run([*ruff, "a.py"], cwd=tmp_path, capture_output=True, check=False)
    assert done.returncode == 0 and (tmp_path / "a.py").read_text() == source


def test_fixing_a_warning_counts_a_finding_not_an_error(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "train.py").unlink()
    status, _, err = run(capsys, repo, "--fix")  # MPC404 is a warning
    assert status == 0 and err.strip() == "Fixed 1 finding.", err
    assert "torch.cuda.amp" not in (repo / "amp.py").read_text()
    assert run(capsys, repo, "--diff")[2].strip() == "No findings would be fixed."


def test_one_file_is_singular_in_the_verbose_count(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = run(capsys, repo, "-v", "amp.py")[2]
    assert "mpcheck: 1 file: 1 analysed" in err and "1 files" not in err
