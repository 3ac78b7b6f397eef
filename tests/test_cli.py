"""``mpcheck`` end to end: exit codes, options, configuration, suppressions, ``rule``.

Most tests call :func:`mpcheck.cli.app.main` in-process (fast); the ones about what reaches a
terminal (no traceback, ``--version``, stdin) run ``python -m mpcheck`` as a subprocess.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import mpcheck
from mpcheck.cli import app as cli
from mpcheck.ruleset.rule import all_rules

BAD = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = x.float()
        return self.proj(h){noqa}
"""
BAD_ROW, BAD_COL = 12, 16
GOOD = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = x.float().softmax(-1)
        return self.proj(h.to(x.dtype))
"""
NO_TORCH = "def f(x):\n    return x + 1\n"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test runs in its own directory, without CI variables leaking in."""
    for name in ("MPCHECK_OUTPUT_FORMAT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def write(path: str, text: str) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    rc, out, err = run(capsys, "check", "--output-format", "json", *argv)
    assert rc in (0, 1), err
    data: list[dict[str, Any]] = json.loads(out)
    return rc, data


def found(data: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    return {
        (os.path.relpath(d["filename"]), d["location"]["row"], d["code"])
        if d["filename"] != "-"
        else ("-", d["location"]["row"], d["code"])
        for d in data
    }


def subprocess_mpcheck(
    *argv: str, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MPCHECK_OUTPUT_FORMAT", "GITHUB_STEP_SUMMARY")
    }
    return subprocess.run(
        [sys.executable, "-m", "mpcheck", *argv],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
    )


# -- exit codes ---------------------------------------------------------------------------------


def test_exit_0_when_clean(capsys: pytest.CaptureFixture[str]) -> None:
    write("good.py", GOOD)
    write("plain.py", NO_TORCH)
    rc, out, _ = run(capsys, "check", ".")
    assert (rc, out) == (0, "All checks passed!\n")


def test_exit_1_with_findings(capsys: pytest.CaptureFixture[str]) -> None:
    write("pkg/bad.py", BAD.format(noqa=""))
    rc, out, _ = run(capsys, "check", "--output-format", "concise")
    assert rc == 1
    assert out.startswith(f"pkg/bad.py:{BAD_ROW}:{BAD_COL}: MPC101 ")
    assert "Found 1 warning." in out  # nothing casts ``Block``: a latent hazard


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "missing.py"], "mpcheck: error: missing.py: No such file or directory\n"),
        (["check", "--select", "MPC999"], "mpcheck: error: unknown rule selector 'MPC999'\n"),
        (["check", "--ignore", "mpc1"], "mpcheck: error: --ignore: invalid rule selector 'mpc1'"),
        (["check", "--config", "nope.toml"], "mpcheck: error: nope.toml: no such configuration"),
        (["rule", "MPC999"], "mpcheck: error: unknown rule `MPC999`"),
    ],
)
def test_exit_2_on_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    write("bad.py", BAD.format(noqa=""))
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert err.startswith(message)
    assert err.count("\n") == 1 and out == ""


def test_exit_2_on_unknown_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "--no-such-option"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "[tool.mpcheck]\nselectt = []\n",
            "pyproject.toml: unknown key 'selectt' in [tool.mpcheck]",
        ),
        ("[tool.mpcheck]\nmodule-half-capable = 1\n", "'module-half-capable' in [tool.mpcheck]"),
        ("[tool.mpcheck\n", "pyproject.toml: invalid TOML"),
        ('[tool.mpcheck]\nselect = ["MPC9"]\n', "unknown rule selector 'MPC9'"),
    ],
)
def test_config_errors_are_one_line_without_traceback(
    tmp_path: Path, config: str, message: str
) -> None:
    write("pyproject.toml", config)
    write("bad.py", BAD.format(noqa=""))
    proc = subprocess_mpcheck("check", ".", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("mpcheck: error: ") and message in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


# -- options ------------------------------------------------------------------------------------


def _two_rules_project() -> None:
    write("bad.py", BAD.format(noqa=""))
    # MPC100 (unused noqa) is a second, independent code to select and ignore.
    write("noqa.py", "import torch\nx = torch.ones(3)  # noqa: MPC101\n")


def test_select_and_ignore(capsys: pytest.CaptureFixture[str]) -> None:
    _two_rules_project()
    both = {("bad.py", BAD_ROW, "MPC101"), ("noqa.py", 2, "MPC100")}
    assert found(run_json(capsys, ".")[1]) == both
    assert found(run_json(capsys, "--select", "MPC101", ".")[1]) == {("bad.py", BAD_ROW, "MPC101")}
    assert found(run_json(capsys, "--select", "MPC1", ".")[1]) == both
    assert found(run_json(capsys, "--ignore", "MPC101", ".")[1]) == {("noqa.py", 2, "MPC100")}
    assert run_json(capsys, "--select", "ALL", "--ignore", "MPC1", ".") == (0, [])
    rc, data = run_json(capsys, "--select", "MPC100", "--extend-select", "MPC101", ".")
    assert (rc, found(data)) == (1, both)


def test_repeated_list_flags_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    """As in ruff: ``--ignore A --ignore B`` ignores both, like ``--ignore A,B``."""
    _two_rules_project()
    write("skip_a/bad.py", BAD.format(noqa=""))
    write("skip_b/bad.py", BAD.format(noqa=""))
    assert run_json(capsys, "--ignore", "MPC101", "--ignore", "MPC100", ".") == (0, [])
    assert run_json(capsys, "--select", "MPC101", "--select", "MPC100", ".")[0] == 1
    rc, data = run_json(capsys, "--extend-exclude", "skip_a", "--extend-exclude", "skip_b", ".")
    assert {d["filename"].rsplit("/", 2)[-2] for d in data} == {Path.cwd().name}


def test_statistics(capsys: pytest.CaptureFixture[str]) -> None:
    _two_rules_project()
    write("bad2.py", BAD.format(noqa=""))
    rc, out, _ = run(capsys, "check", "--statistics", ".")
    assert rc == 1
    lines = [line.split("\t") for line in out.splitlines()]
    assert [(n.strip(), code, level.strip()) for n, code, level, _ in lines] == [
        ("2", "MPC101", "warning"),  # (latent: nothing in the project casts ``Block``)
        ("1", "MPC100", "warning"),
    ]
    assert lines[0][3].endswith("upcast-reaches-half-op")


def test_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    write("bad.py", BAD.format(noqa=""))
    rc, out, _ = run(capsys, "check", "--exit-zero", "--output-format", "concise", ".")
    assert rc == 0
    assert f"bad.py:{BAD_ROW}:{BAD_COL}: MPC101" in out


def test_stdin_with_dash(tmp_path: Path) -> None:
    proc = subprocess_mpcheck(
        "check", "--output-format", "concise", "-", cwd=tmp_path, stdin=BAD.format(noqa="")
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith(f"-:{BAD_ROW}:{BAD_COL}: MPC101 ")
    clean = subprocess_mpcheck("check", "-", cwd=tmp_path, stdin=GOOD)
    assert (clean.returncode, clean.stdout) == (0, "All checks passed!\n")


def test_stdin_filename_names_the_file_and_selects_per_file_ignores(tmp_path: Path) -> None:
    write("pyproject.toml", '[tool.mpcheck]\nper-file-ignores = {"legacy/*" = ["MPC101"]}\n')
    source = BAD.format(noqa="")
    proc = subprocess_mpcheck(
        "check",
        "--output-format",
        "json",
        "--stdin-filename",
        "models/block.py",
        "-",
        cwd=tmp_path,
        stdin=source,
    )
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)
    assert finding["filename"] == str(tmp_path / "models" / "block.py")
    ignored = subprocess_mpcheck(
        "check", "--stdin-filename", "legacy/block.py", cwd=tmp_path, stdin=source
    )
    assert ignored.returncode == 0, ignored.stdout + ignored.stderr


def test_stdin_cannot_mix_with_paths(capsys: pytest.CaptureFixture[str]) -> None:
    write("bad.py", BAD.format(noqa=""))
    rc, _, err = run(capsys, "check", "-", "bad.py")
    assert rc == 2 and "cannot be mixed" in err


def test_config_option(capsys: pytest.CaptureFixture[str]) -> None:
    write("bad.py", BAD.format(noqa=""))
    write("ci/strict.toml", "select = ['MPC100']\n")
    write("ci/off.toml", "module-half-capable = false\n")
    assert run_json(capsys, ".")[0] == 1
    assert run_json(capsys, "--config", "ci/strict.toml", ".") == (0, [])
    assert run_json(capsys, "--config", "ci/off.toml", ".") == (0, [])


def test_paths_in_a_config_option_file_are_relative_to_the_working_directory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As in ruff: ``extend-exclude = ["generated/bad.py"]`` in ``--config ci/cfg.toml``."""
    write("generated/bad.py", BAD.format(noqa=""))
    write("ci/generated/bad.py", BAD.format(noqa=""))
    write("ci/cfg.toml", "extend-exclude = ['generated/bad.py']\n")
    rc, data = run_json(capsys, "--config", "ci/cfg.toml", ".")
    assert (rc, found(data)) == (1, {("ci/generated/bad.py", BAD_ROW, "MPC101")})


def test_nearest_pyproject_is_used(capsys: pytest.CaptureFixture[str]) -> None:
    write("bad.py", BAD.format(noqa=""))
    write("pyproject.toml", "[tool.mpcheck]\nignore = ['MPC101']\n")
    assert run_json(capsys, ".") == (0, [])


def test_force_exclude(capsys: pytest.CaptureFixture[str]) -> None:
    write("build/generated.py", BAD.format(noqa=""))
    write("pyproject.toml", "[tool.mpcheck]\nextend-exclude = ['legacy']\n")
    write("legacy/old.py", BAD.format(noqa=""))
    # Walking a directory skips excluded ones; explicit paths are checked unless forced.
    assert run_json(capsys, ".") == (0, [])
    explicit = ("build/generated.py", "legacy/old.py")
    assert found(run_json(capsys, *explicit)[1]) == {
        ("build/generated.py", BAD_ROW, "MPC101"),
        ("legacy/old.py", BAD_ROW, "MPC101"),
    }
    assert run_json(capsys, "--force-exclude", *explicit) == (0, [])


def test_force_exclude_without_paths_checks_the_current_directory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What pre-commit would run if it ever called the hook without file names.
    write("pkg/bad.py", BAD.format(noqa=""))
    write("build/generated.py", BAD.format(noqa=""))
    rc, data = run_json(capsys, "--force-exclude")
    assert (rc, found(data)) == (1, {("pkg/bad.py", BAD_ROW, "MPC101")})


def test_output_file(capsys: pytest.CaptureFixture[str]) -> None:
    write("bad.py", BAD.format(noqa=""))
    rc, out, _ = run(capsys, "check", "--output-format", "json", "-o", "report.json", ".")
    assert (rc, out) == (1, "")
    (finding,) = json.loads(Path("report.json").read_text())
    assert finding["code"] == "MPC101"
    rc, out, err = run(capsys, "check", "-o", "no/such/dir/report.txt", ".")
    assert rc == 2 and out == ""
    assert err.startswith("mpcheck: error: cannot write no/such/dir/report.txt")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_output_file_that_is_no_regular_file_is_written_not_replaced(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ``-o /dev/null`` once replaced the device with a file (as root): a device or a pipe is
    # written to, a symbolic link keeps pointing at the report it names.
    write("bad.py", BAD.format(noqa=""))
    os.mkfifo("pipe")
    received: list[bytes] = []
    reader = threading.Thread(
        target=lambda: received.append(Path("pipe").read_bytes()), daemon=True
    )
    reader.start()
    rc, _, _ = run(capsys, "check", "--output-format", "concise", "-o", "pipe", ".")
    reader.join(timeout=30)
    assert rc == 1 and b"MPC101" in received[0]
    assert stat.S_ISFIFO(os.lstat("pipe").st_mode)
    Path("reports").mkdir()
    Path("reports/latest.txt").write_text("old")
    os.symlink("reports/latest.txt", "link.txt")
    run(capsys, "check", "--output-format", "concise", "-o", "link.txt", ".")
    assert os.path.islink("link.txt") and "MPC101" in Path("reports/latest.txt").read_text()


def test_output_format_from_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write("bad.py", BAD.format(noqa=""))
    monkeypatch.setenv("MPCHECK_OUTPUT_FORMAT", "json-lines")
    rc, out, _ = run(capsys, "check", ".")
    assert rc == 1
    assert json.loads(out.splitlines()[0])["code"] == "MPC101"
    rc, out, _ = run(capsys, "check", "--output-format", "concise", ".")  # the flag wins
    assert out.startswith("bad.py:")
    monkeypatch.setenv("MPCHECK_OUTPUT_FORMAT", "yaml")
    rc, out, err = run(capsys, "check", ".")
    assert rc == 2 and out == ""
    assert err.startswith("mpcheck: error: unknown output format `yaml`")
    assert err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["github", "sarif", "junit", "gitlab", "pylint", "rdjson"])
def test_every_output_format_reports_the_finding(
    capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    write("bad.py", BAD.format(noqa=""))
    rc, out, _ = run(capsys, "check", "--output-format", fmt, ".")
    assert rc == 1
    assert "MPC101" in out and "bad.py" in out


# -- bad input ----------------------------------------------------------------------------------


def test_syntax_error_is_a_finding_and_other_files_are_still_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write("a_broken.py", "import torch\n\ndef f(:\n    pass\n")
    write("b_bad.py", BAD.format(noqa=""))
    write("c_undecodable.py", "import torch\n")
    Path("c_undecodable.py").write_bytes(b"import torch\nx = '\xff\xfe'\n")
    rc, data = run_json(capsys, ".")
    assert rc == 1
    codes = {(d["filename"].rsplit("/", 1)[1], d["code"]) for d in data}
    assert codes == {
        ("a_broken.py", "MPC001"),
        ("b_bad.py", "MPC101"),
        ("c_undecodable.py", "MPC001"),
    }
    broken = next(d for d in data if d["filename"].endswith("a_broken.py"))
    assert broken["location"]["row"] == 3
    assert broken["message"].startswith("SyntaxError")


def test_match_statements_are_analysed(capsys: pytest.CaptureFixture[str]) -> None:
    """A ``match`` once crashed the import scan and aborted the whole run."""
    write(
        "m.py",
        "import torch\nfrom torch import nn\n\n\nclass Head(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(4, 4)\n\n"
        "    def forward(self, x, kind):\n        match kind:\n"
        "            case 'fp32':\n                return self.proj(x.float())\n"
        "            case _:\n                return self.proj(x)\n",
    )
    rc, data = run_json(capsys, "m.py")
    assert rc == 1
    assert [(d["code"], d["location"]["row"]) for d in data] == [("MPC101", 13)]


def test_nesting_that_would_crash_the_parser_is_a_syntax_finding(tmp_path: Path) -> None:
    """libcst's native parser segfaults on ~1,500 nested brackets; CPython refuses 201."""
    deep = tmp_path / "deep.py"
    deep.write_text(f"import torch\ny = ')))'\nx = {'[' * 3000}1{']' * 3000}\n")
    fine = tmp_path / "fine.py"
    fine.write_text(f"import torch\nx = {'(' * 150}1{')' * 150}\ns = '{'(' * 500}'\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", str(deep), str(fine)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)
    assert finding["code"] == "MPC001" and finding["filename"].endswith("deep.py")
    assert finding["message"] == "SyntaxError: too many nested parentheses"
    assert finding["location"]["row"] == 3


# -- suppressions -------------------------------------------------------------------------------


def test_noqa_suppresses_and_unused_noqa_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    write("blanket.py", BAD.format(noqa="  # noqa"))
    write("coded.py", BAD.format(noqa="  # noqa: MPC101"))
    write("wrong_code.py", BAD.format(noqa="  # noqa: MPC103"))
    write("unused.py", "import torch\nx = torch.ones(3)  # noqa: MPC101\n")
    write("file_level.py", "# mpcheck: noqa\n" + BAD.format(noqa=""))
    rc, data = run_json(capsys, ".")
    assert rc == 1
    assert found(data) == {
        ("wrong_code.py", BAD_ROW, "MPC101"),
        ("wrong_code.py", BAD_ROW, "MPC100"),
        ("unused.py", 2, "MPC100"),
    }
    unused = next(d for d in data if d["filename"].endswith("unused.py"))
    assert "MPC101" in unused["message"]


def test_per_file_ignores(capsys: pytest.CaptureFixture[str]) -> None:
    write("pyproject.toml", '[tool.mpcheck]\nper-file-ignores = {"tests/**" = ["MPC1"]}\n')
    write("tests/test_block.py", BAD.format(noqa=""))
    write("src/block.py", BAD.format(noqa=""))
    rc, data = run_json(capsys, ".")
    assert (rc, found(data)) == (1, {("src/block.py", BAD_ROW, "MPC101")})


# -- hierarchical configuration -----------------------------------------------------------------


def _nested_projects() -> None:
    """A root project and two nested ones, each with its own rules, ignores and excludes."""
    write("pyproject.toml", "[tool.mpcheck]\nextend-exclude = ['scratch']\n")
    write("top.py", BAD.format(noqa=""))
    write("scratch/s.py", BAD.format(noqa=""))
    # quiet/: MPC101 off; its patterns are relative to quiet/.
    write("quiet/pyproject.toml", "[tool.mpcheck]\nignore = ['MPC101']\nexclude = []\n")
    write("quiet/q.py", BAD.format(noqa=""))
    write("quiet/build/gen.py", "import torch\nx = torch.ones(3)  # noqa: MPC101\n")
    # legacy/: per-file-ignores and an anchored exclude, relative to legacy/.
    write(
        "legacy/mpcheck.toml",
        'extend-exclude = ["/vendored"]\n[per-file-ignores]\n"old/*" = ["MPC1"]\n',
    )
    write("legacy/old/o.py", BAD.format(noqa=""))
    write("legacy/new/n.py", BAD.format(noqa=""))
    write("legacy/vendored/v.py", BAD.format(noqa=""))
    write("legacy/sub/vendored/w.py", BAD.format(noqa=""))


NESTED_FINDINGS = {
    ("top.py", BAD_ROW, "MPC101"),
    # quiet/ replaced the default excludes, so build/ is walked; only MPC101 is ignored there.
    ("quiet/build/gen.py", 2, "MPC100"),
    ("legacy/new/n.py", BAD_ROW, "MPC101"),
    ("legacy/sub/vendored/w.py", BAD_ROW, "MPC101"),
}


def test_each_file_uses_the_closest_config(capsys: pytest.CaptureFixture[str]) -> None:
    _nested_projects()
    rc, data = run_json(capsys, ".")
    assert (rc, found(data)) == (1, NESTED_FINDINGS)


def test_running_from_outside_the_project_uses_its_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _nested_projects()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.chdir(outside)
    rc, data = run_json(capsys, str(tmp_path))
    shown = {(os.path.relpath(f, tmp_path), row, code) for f, row, code in found(data)}
    assert (rc, shown) == (1, NESTED_FINDINGS)
    # Only the nested project: its config, not the (absent) one of the working directory.
    assert run_json(capsys, str(tmp_path / "quiet" / "q.py")) == (0, [])


def test_file_outside_every_config_uses_the_one_from_the_cwd(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    project, other = tmp_path / "project", tmp_path / "other"
    write("project/pyproject.toml", "[tool.mpcheck]\nignore = ['MPC101']\n")
    write("other/bad.py", BAD.format(noqa=""))
    os.chdir(project)
    assert run_json(capsys, str(other)) == (0, [])
    os.chdir(tmp_path)  # no config here or above: the defaults
    assert run_json(capsys, str(other))[0] == 1


def test_config_option_governs_every_file(capsys: pytest.CaptureFixture[str]) -> None:
    _nested_projects()
    write("ci/strict.toml", "select = ['MPC100']\n")
    rc, data = run_json(capsys, "--config", "ci/strict.toml", ".")
    # quiet/'s exclude = [] no longer applies: build/ is excluded by default again.
    assert (rc, found(data)) == (0, set())
    write("ci/all.toml", "")
    rc, data = run_json(capsys, "--config", "ci/all.toml", ".")
    assert ("quiet/q.py", BAD_ROW, "MPC101") in found(data)
    assert ("legacy/old/o.py", BAD_ROW, "MPC101") in found(data)
    assert ("scratch/s.py", BAD_ROW, "MPC101") in found(data)


def test_command_line_overrides_every_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _nested_projects()
    rc, data = run_json(capsys, "--extend-select", "MPC101", "--ignore", "MPC100", ".")
    assert ("quiet/q.py", BAD_ROW, "MPC101") in found(data)
    assert not any(code == "MPC100" for _, _, code in found(data))
    # Patterns are relative to the cwd, whichever config root they end up in.
    rc, data = run_json(capsys, "--extend-exclude", "legacy/new,legacy/**/vendored", ".")
    assert found(data) == NESTED_FINDINGS - {
        ("legacy/new/n.py", BAD_ROW, "MPC101"),
        ("legacy/sub/vendored/w.py", BAD_ROW, "MPC101"),
    }
    os.chdir(tmp_path / "legacy" / "sub")  # below legacy/'s root this time
    assert run_json(capsys, ".")[0] == 1
    assert run_json(capsys, "--extend-exclude", "vendored/w.py", ".") == (0, [])


def test_module_half_capable_comes_from_each_files_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write("a/bad.py", BAD.format(noqa=""))
    write("b/bad.py", BAD.format(noqa=""))
    write("b/mpcheck.toml", "module-half-capable = false\n")
    rc, data = run_json(capsys, ".")
    assert (rc, found(data)) == (1, {("a/bad.py", BAD_ROW, "MPC101")})


def test_broken_nested_config_is_exit_2_naming_file_and_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write("ok.py", GOOD)
    write("proj/bad.py", BAD.format(noqa=""))
    write("proj/pyproject.toml", "[tool.mpcheck]\nselct = ['MPC1']\n")
    rc, out, err = run(capsys, "check", ".")
    assert (rc, out) == (2, "")
    assert err == (
        "mpcheck: error: proj/pyproject.toml: unknown key 'selct' in [tool.mpcheck] "
        "(did you mean 'select'?)\n"
    )
    write("proj/pyproject.toml", "[tool.mpcheck]\nignore = ['MPC9']\n")
    rc, _, err = run(capsys, "check", "proj/bad.py")
    assert rc == 2
    assert err == (
        "mpcheck: error: proj/pyproject.toml: unknown rule selector 'MPC9' in 'ignore' "
        "in [tool.mpcheck]\n"
    )
    write("proj/pyproject.toml", "[tool.mpcheck\n")
    rc, _, err = run(capsys, "check", "proj")
    assert rc == 2 and err.startswith("mpcheck: error: proj/pyproject.toml: invalid TOML: ")


def test_broken_config_in_an_excluded_directory_is_never_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write("pkg/ok.py", GOOD)
    write(".venv/lib/dep/mpcheck.toml", "not toml at all [\n")
    write(".venv/lib/dep/mod.py", BAD.format(noqa=""))
    assert run_json(capsys, ".") == (0, [])


def test_stdin_filename_uses_the_config_above_it(tmp_path: Path) -> None:
    write("proj/pyproject.toml", "[tool.mpcheck]\nignore = ['MPC101']\n")
    source = BAD.format(noqa="")
    inside = subprocess_mpcheck(
        "check", "--stdin-filename", "proj/m.py", cwd=tmp_path, stdin=source
    )
    assert inside.returncode == 0, inside.stdout + inside.stderr
    outside = subprocess_mpcheck("check", "--stdin-filename", "m.py", cwd=tmp_path, stdin=source)
    assert outside.returncode == 1, outside.stdout + outside.stderr


# -- rule, version -------------------------------------------------------------------------------


def test_rule_prints_the_docs(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "rule", "MPC101")
    assert rc == 0
    assert out.startswith("# MPC101 `upcast-reaches-half-op`")
    assert "```python" in out
    assert run(capsys, "rule", "upcast-reaches-half-op")[1] == out  # by name too
    rc, out, _ = run(capsys, "rule", "MPC101", "--output-format", "json")
    assert json.loads(out)["name"] == "upcast-reaches-half-op"


def test_rule_all_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "rule", "--all")
    assert rc == 0
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == [r.code for r in all_rules()]
    assert {"MPC001", "MPC100", "MPC101"} <= set(listed)
    rc, out, _ = run(capsys, "rule", "--all", "--output-format", "json")
    assert [r["code"] for r in json.loads(out)] == listed


def test_version(tmp_path: Path) -> None:
    proc = subprocess_mpcheck("--version", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, f"mpcheck {mpcheck.__version__}\n")


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys)
    assert rc == 2 and "usage: mpcheck" in out


def test_stdin_in_process(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.format(noqa="").encode())))
    rc, data = run_json(capsys, "--stdin-filename", "x.py")
    assert (rc, found(data)) == (1, {("x.py", BAD_ROW, "MPC101")})


def test_extra_output_writes_a_second_report_from_the_same_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write("model.py", BAD.format(noqa=""))
    status, out, _ = run(
        capsys,
        "check",
        "--statistics",
        "--extra-output",
        "sarif:mpcheck.sarif",
        "--extra-output",
        "json:all.json",
    )
    assert status == 1 and "MPC101" in out  # the statistics on stdout
    sarif = json.loads(Path("mpcheck.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["MPC101"]
    assert [d["code"] for d in json.loads(Path("all.json").read_text())] == ["MPC101"]


@pytest.mark.parametrize("value", ["sarif", "xml:out.xml", "sarif:"])
def test_extra_output_needs_a_format_and_a_file(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    write("model.py", BAD.format(noqa=""))
    status, out, err = run(capsys, "check", "--extra-output", value)
    assert (status, out) == (2, "")
    assert (
        err.startswith("mpcheck: error: --extra-output: expected FORMAT:FILE")
        and err.count("\n") == 1
    )
