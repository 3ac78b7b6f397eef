"""Bad input is one line on stderr and exit 2: never a traceback, never silence.

Exit codes as in ruff: 0 clean, 1 findings, 2 for a usage, configuration, I/O or internal
error. Each case here used to end in a traceback (exit 1, indistinguishable from findings)
or in a run that checked nothing and said "All checks passed!".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

import jsonschema
import pytest

import mpcheck.cli.check
from mpcheck.cli.app import main
from mpcheck.output.reporters import FORMATS

FINDING = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
SCHEMA = Path(__file__).resolve().parents[3] / "shared" / "reference" / "sarif-schema-2.1.0.json"


def run(*args: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mpcheck", "check", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload, no-any-return]


def one_line_error(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("mpcheck")]
    assert lines, err
    return lines[0]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "a.py").write_text(FINDING)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_bad_glob_in_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text('[tool.mpcheck]\nexclude = ["[z-a]"]\n')
    assert main(["check", "."]) == 2
    assert "invalid pattern '[z-a]'" in one_line_error(capsys.readouterr().err)


def test_bad_glob_on_the_command_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--exclude", "[z-a]", "."]) == 2
    assert "invalid exclude pattern '[z-a]'" in one_line_error(capsys.readouterr().err)


def test_bad_glob_in_gitignore_is_skipped_as_git_does(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("[z-a]\n")
    assert main(["check", "-q", "."]) == 1


def test_deeply_nested_toml(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text("[tool.mpcheck]\nx = " + "[" * 5000 + "]" * 5000)
    assert main(["check", "."]) == 2
    assert "nested too deeply" in one_line_error(capsys.readouterr().err)


def test_unreadable_pyproject_is_an_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project / "pyproject.toml"
    config.write_text('[tool.mpcheck]\nignore = ["MPC404"]\n')
    real = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self.name == "pyproject.toml":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    assert main(["check", "a.py"]) == 2
    assert "cannot read" in one_line_error(capsys.readouterr().err)


def test_unreadable_directory_is_an_error_and_the_rest_is_checked(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "locked").mkdir()
    real = os.scandir

    def scandir(path: str) -> object:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr("mpcheck.files.discovery.os.scandir", scandir)
    assert main(["check", "--output-format", "concise", "."]) == 2
    out, err = capsys.readouterr()
    assert "locked: cannot read the directory" in one_line_error(err)
    assert "a.py:2:10: MPC404" in out and "All checks passed" not in out


def test_stdout_full(project: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    cmd = [sys.executable, "-m", "mpcheck", "check", "."]
    with open("/dev/full", "w") as full:
        done = subprocess.run(cmd, cwd=project, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 2
    assert "No space left on device" in one_line_error(done.stderr)


def test_stdout_closed_early(project: Path) -> None:
    for i in range(300):
        (project / f"m{i}.py").write_text(FINDING * 20)
    cmd = [sys.executable, "-m", "mpcheck", "check", "."]
    proc = subprocess.Popen(cmd, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # ``| head -n 1``
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-j", "-1"], "must be 0 (one per CPU) or more"),
        (["-j", "x"], "not a number"),
        (["--select", ""], "expected at least one value"),
        (["--max-file-size", "big"], "not a positive size"),
    ],
)
def test_bad_options_are_usage_errors(project: Path, args: list[str], message: str) -> None:
    done = run(*args, ".", cwd=project)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_huge_job_count_is_capped(project: Path) -> None:
    for i in range(70):
        (project / f"m{i}.py").write_text(FINDING)
    done = run("-j", "100000", "--output-format", "json", ".", cwd=project)
    assert done.returncode == 1, done.stderr
    assert len(json.loads(done.stdout)) == 71


def test_current_directory_removed(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    (tmp_path / "a.py").write_text(FINDING)
    script = f"cd {gone} && rmdir {gone} && {sys.executable} -m mpcheck check {tmp_path / 'a.py'}"
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "current directory no longer exists" in one_line_error(done.stderr)


def test_internal_error_is_one_line_and_traceback_with_verbose(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something broke")

    monkeypatch.setattr(mpcheck.cli.check, "check_files", boom)
    assert main(["check", "."]) == 2
    err = capsys.readouterr().err
    assert one_line_error(err) == "mpcheck: error: internal error: RuntimeError: something broke"
    assert main(["check", "--verbose", "."]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_file_that_cannot_be_decoded_is_reported_even_without_torch(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.py").write_bytes(b"x = 1  # \xff\xfe\n")
    assert main(["check", "--output-format", "concise", "bad.py"]) == 1
    assert "bad.py:1:1: MPC001 error: cannot decode the file" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["config", "flag"])
def test_max_file_size(project: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "big.py").write_text(FINDING + "x = 1\n" * 2000)
    args = ["check", "--output-format", "concise", "big.py"]
    if where == "config":
        (project / "pyproject.toml").write_text('[tool.mpcheck]\nmax-file-size = "4KiB"\n')
    else:
        args[1:1] = ["--max-file-size", "4KiB"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "big.py:1:1: MPC002 error: the file is 12 KiB, above max-file-size (4 KiB)" in out


def test_bad_max_file_size_in_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text("[tool.mpcheck]\nmax-file-size = -3\n")
    assert main(["check", "."]) == 2
    assert "max-file-size" in one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_takes_file_names_that_are_not_utf8(tmp_path: Path, fmt: str) -> None:
    odd = os.fsencode(tmp_path) + b"/d\xfe"
    os.makedirs(odd)
    with open(odd + b"/\xff.py", "wb") as fh:
        fh.write(FINDING.encode())
    env = {**os.environ, "LC_ALL": "en_US.UTF-8", "GITHUB_STEP_SUMMARY": ""}
    done = subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--output-format", fmt, "."],
        cwd=tmp_path,
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 1, done.stderr.decode()
    raw = done.stdout
    if fmt in ("json", "sarif", "gitlab", "rdjson"):
        data = json.loads(raw.decode("utf-8"))
        if fmt == "json":
            assert os.fsencode(data[0]["filename"]).endswith(b"/d\xfe/\xff.py")
        if fmt == "sarif" and SCHEMA.is_file():
            jsonschema.validate(data, json.loads(SCHEMA.read_text()))
            location = data["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
            assert location["artifactLocation"]["uri"] == "d%FE/%FF.py"
    elif fmt == "json-lines":
        for line in raw.decode("utf-8").splitlines():
            json.loads(line)
    elif fmt == "junit":
        xml.dom.minidom.parseString(raw)
    else:
        assert b"d\xfe/\xff.py" in raw  # text formats print the name's own bytes


def test_output_file_is_written_atomically(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*args: object, **kwargs: object) -> str:
        raise OSError(28, "No space left on device")

    report = project / "report.json"
    report.write_text("[]\n")
    monkeypatch.setattr(os, "replace", boom)
    assert main(["check", "--output-format", "json", "-o", str(report), "."]) == 2
    assert report.read_text() == "[]\n"  # the old report, not an empty or partial one
    assert [p.name for p in project.iterdir() if p.name.startswith(".report")] == []
