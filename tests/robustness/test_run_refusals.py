"""Issue 34, round two: one line and exit 2 (never "internal error", never a lost source) for
output onto an input, a closed or narrow stdout, bad globs, baselines and special files; and
no control character from a source line or a file name reaches the terminal raw."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpcheck.cli.app import main

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "mpc101" / "bad_rmsnorm_block.py"
FLAGGED = "return self.proj(h)  # expect: MPC101:16"


def run(*args: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, check=False, timeout=120, **kw)  # type: ignore[call-overload, no-any-return]


def only_error(err: str) -> str:
    """The one line a refusal prints."""
    assert "internal error" not in err and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpcheck: error: "), err
    return lines[0]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "a.py").write_bytes(FIXTURE.read_bytes())
    (tmp_path / "b.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "option", [["-o", "a.py"], ["--extra-output", "json:a.py"], ["--write-baseline", "a.py"]]
)
@pytest.mark.parametrize("named", [["."], ["a.py", "b.py"]])
def test_output_onto_an_input_is_refused(
    project: Path, option: list[str], named: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = (project / "a.py").read_bytes()
    assert main(["check", "--no-cache", *option, *named]) == 2
    assert "it is one of the files being checked" in only_error(capsys.readouterr().err)
    assert (project / "a.py").read_bytes() == before


def test_output_through_a_link_onto_an_input_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "report.txt").symlink_to(project / "a.py")
    before = (project / "a.py").read_bytes()
    assert main(["check", "--no-cache", "-o", "report.txt", "."]) == 2
    only_error(capsys.readouterr().err)
    assert (project / "a.py").read_bytes() == before
    assert main(["check", "--no-cache", "-o", "out.txt", "."]) == 1  # any other file is fine


@pytest.mark.parametrize("args", [[], ["--diff"], ["--statistics"]])
def test_closed_stdout(project: Path, args: list[str]) -> None:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", *args, "."]
    done = subprocess.run(
        cmd, cwd=project, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1), timeout=120
    )
    assert done.returncode == 2
    assert "standard output is closed" in only_error(done.stderr.decode())
    assert (project / "a.py").read_bytes() == FIXTURE.read_bytes()


def test_a_bad_per_file_ignores_glob(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.mpcheck]\nper-file-ignores = {"[z-a].py" = ["MPC101"]}\n'
    )
    assert main(["check", "--no-cache", "."]) == 2
    assert "invalid pattern '[z-a].py' in 'per-file-ignores'" in only_error(capsys.readouterr().err)


def test_a_deeply_nested_baseline(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "base.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["check", "--no-cache", "--baseline", "base.json", "."]) == 2
    assert "nested too deeply" in only_error(capsys.readouterr().err)


@pytest.mark.integration  # (starts mpcheck in a process of its own)
@pytest.mark.parametrize("option", [[], ["--baseline"]])
def test_special_files_are_refused_not_read(project: Path, option: list[str]) -> None:
    """``/dev/zero`` would be read until memory runs out; a FIFO would block forever."""
    os.mkfifo(project / "pipe.py")
    for special in ("/dev/zero", "pipe.py"):
        done = run(*option, special, *(["."] if option else []), cwd=project)
        assert done.returncode == 2, done.stderr
        assert "not a regular file" in only_error(done.stderr.decode())


@pytest.mark.integration  # (starts mpcheck in a process of its own)
def test_a_narrow_stdout_encoding_gets_escapes(project: Path) -> None:
    """A name or a line the encoding cannot hold is escaped (JSON escapes it itself)."""
    name = "caf\u00e9.py"
    (project / name).write_text(FIXTURE.read_text().replace(FLAGGED, FLAGGED + " na\u00efve"))
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    for fmt in ("full", "concise", "json"):
        done = run("--output-format", fmt, name, cwd=project, env=env)
        assert done.returncode == 1, done.stderr
        assert done.stdout.isascii()
        assert b"caf\\xe9.py" in done.stdout or b"caf\\u00e9.py" in done.stdout
        if fmt == "full":
            assert b"na\\xefve" in done.stdout


def test_fix_and_add_noqa_together_are_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (project / "a.py").read_bytes()
    for other in ("--fix", "--diff"):
        assert main(["check", "--no-cache", "--add-noqa", other, "."]) == 2
        assert f"--add-noqa cannot be combined with {other}" in only_error(capsys.readouterr().err)
    assert (project / "a.py").read_bytes() == before


@pytest.mark.integration  # (starts mpcheck in a process of its own)
def test_control_characters_never_reach_the_terminal_raw(project: Path) -> None:
    """An ESC, BEL or C1 CSI in a reported line or a file name shows as its picture, as ruff
    shows it, in every text format; the JSON keeps the text exact (escaped by JSON)."""
    hostile = FLAGGED + " \x1b[2J\x07\x9b31m"
    name = "evil\x1b]0;title\x07.py"
    (project / name).write_text(FIXTURE.read_text().replace(FLAGGED, hostile))
    for fmt in ("full", "concise", "grouped"):
        done = run("--output-format", fmt, "--color", "never", name, cwd=project)
        assert done.returncode == 1, done.stderr
        out = done.stdout.decode()
        assert not any(c in out for c in "\x1b\x07\x9b"), out
        assert "evil\u241b]0;title\u2407.py" in out
        if fmt == "full":
            assert "\u241b[2J\u2407\ufffd31m" in out
            lines = out.splitlines()
            row = next(i for i, line in enumerate(lines) if "return self.proj(h)" in line)
            # the carets still sit under ``self.proj(h)``: one column per replaced character
            assert lines[row + 1].index("^") == lines[row].index("self.proj(h)")
    done = run("--output-format", "json", name, cwd=project)
    assert "evil\\u001b]0;title\\u0007.py" in done.stdout.decode()


@pytest.mark.parametrize("fmt", ["full", "concise", "grouped", "pylint"])
def test_a_newline_in_a_file_name_keeps_the_header_one_line(
    project: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The name shows ``\\n`` as its picture: raw, it split the finding's header line."""
    (project / "evil\nname.py").write_bytes(FIXTURE.read_bytes())
    assert main(["check", "--no-cache", "--output-format", fmt, "evil\nname.py"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("evil\u240aname.py:"), out
    assert not any(line.startswith("name.py") for line in out.splitlines()), out


def test_stdin_named_as_the_output_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--stdin-filename a.py -o a.py`` would write the report over the file stdin stands
    for (an editor's buffer of it), as ``-o a.py`` with ``a.py`` checked would."""
    before = (project / "a.py").read_bytes()
    monkeypatch.setattr(sys, "stdin", open(project / "b.py"))  # noqa: SIM115 - closed by pytest
    assert main(["check", "--no-cache", "--stdin-filename", "a.py", "-o", "a.py", "-"]) == 2
    assert "it is one of the files being checked" in only_error(capsys.readouterr().err)
    assert (project / "a.py").read_bytes() == before


@pytest.mark.integration  # (starts mpcheck in a process of its own)
@pytest.mark.parametrize("args", [["MPC101"], ["--all"], ["MPC101", "--output-format", "json"]])
def test_rule_docs_to_a_closed_or_narrow_stdout(tmp_path: Path, args: list[str]) -> None:
    """``mpcheck rule`` writes as ``check`` does: a closed stdout is one line, exit 2 (it was
    "internal error: AttributeError"), and ASCII gets escapes (it was UnicodeEncodeError)."""
    cmd = [sys.executable, "-m", "mpcheck", "rule", *args]
    done = subprocess.run(
        cmd, cwd=tmp_path, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1), timeout=120
    )
    assert done.returncode == 2
    assert "standard output is closed" in only_error(done.stderr.decode())
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, env=env, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert done.stdout.isascii()
    if args == ["MPC101"]:
        assert b"\\xb7" in done.stdout  # the docs' middle dot, escaped
