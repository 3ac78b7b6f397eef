"""The flake8 plugin: real flake8 (a subprocess and its legacy API) agrees with ``mpcheck check``.

Agreement is the contract: ``flake8 --select MPC`` reports the codes, rows and messages that
``mpcheck check`` reports (``MPC100`` aside: unused-noqa is flake8's business), and its
column is ours (flake8 adds 1 to what a plugin yields).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import mpcheck
from mpcheck import flake8_plugin
from mpcheck.cli import app as cli
from mpcheck.flake8_plugin import MpcheckPlugin
from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules
from mpcheck.settings import config, resolver
from tests.support import FIXTURES, ROOT, expected, fixture_files

Finding = tuple[str, int, int, str, str]  # real path, row, 1-based column, code, message
FORMAT = "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s"

# One finding in nn.Module code (row 12), one in script code (row 7).
UPCAST_BLOCK = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = x.float()
{body}
"""
MODULE_SOURCE = UPCAST_BLOCK.format(body="        return self.proj(h)")
SCRIPT_SOURCE = """\
import torch
from torch import nn

head = nn.Linear(16, 4).half()
features = torch.randn(3, 16, dtype=torch.float16)
normed = features.float()
head(normed)
"""
MODULE_FINDING = ("module.py", 12, "MPC101")
SCRIPT_FINDING = ("script.py", 7, "MPC101")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("GITHUB_STEP_SUMMARY", "MPCHECK_OUTPUT_FORMAT"):
        env.pop(name, None)
    return env


def _parse(text: str, cwd: Path) -> set[Finding]:
    found = set()
    for line in text.splitlines():
        path, row, col, code, message = line.split("\t", 4)
        found.add((os.path.realpath(cwd / path), int(row), int(col), code, message))
    return found


def flake8(
    paths: Sequence[str | Path],
    cwd: Path = ROOT,
    *extra: str,
    isolated: bool = True,
    jobs: str = "1",
) -> tuple[int, set[Finding], str]:
    """Run ``python -m flake8 --select MPC`` and parse its findings.

    One job unless asked: a worker pool per call would dominate the test's run time.
    """
    cmd = [sys.executable, "-m", "flake8", "--select", "MPC", f"--format={FORMAT}", *extra]
    cmd.append(f"--jobs={jobs}")
    if isolated:
        cmd.append("--isolated")  # ignore flake8 config files (not [tool.mpcheck])
    proc = subprocess.run(
        [*cmd, *map(str, paths)], cwd=cwd, capture_output=True, text=True, env=_env()
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, _parse(proc.stdout, cwd), proc.stderr


def mpcheck_json(paths: Sequence[str | Path], cwd: Path = ROOT, *extra: str) -> set[Finding]:
    """``mpcheck check --output-format json`` (in-process), minus MPC100 (flake8's business)."""
    out = io.StringIO()
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out):
            rc = cli.main(["check", "--output-format", "json", *extra, *map(str, paths)])
    finally:
        os.chdir(previous)
    assert rc in (0, 1)
    return {
        (
            os.path.realpath(d["filename"]),
            d["location"]["row"],
            d["location"]["column"],
            d["code"],
            " ".join(d["message"].split()),
        )
        for d in json.loads(out.getvalue())
        if d["code"] != "MPC100"
    }


def codes_at(found: set[Finding]) -> set[tuple[str, int, str]]:
    return {(Path(path).name, row, code) for path, row, _, code, _ in found}


@pytest.fixture(autouse=True)
def fresh_plugin_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugin caches configs per directory and keeps options on the class."""
    for name in ("GITHUB_STEP_SUMMARY", "MPCHECK_OUTPUT_FORMAT"):
        monkeypatch.delenv(name, raising=False)
    flake8_plugin._resolvers.clear()
    saved = MpcheckPlugin.module_half_capable, MpcheckPlugin.disable_noqa
    yield
    MpcheckPlugin.module_half_capable, MpcheckPlugin.disable_noqa = saved
    flake8_plugin._resolvers.clear()


def test_entry_point_and_metadata() -> None:
    (ep,) = [e for e in entry_points(group="flake8.extension") if e.name == "MPC"]
    assert ep.load() is MpcheckPlugin
    assert MpcheckPlugin.name == "mpcheck"
    assert MpcheckPlugin.version == mpcheck.__version__


def test_flake8_subprocess_reports_what_mpcheck_check_reports() -> None:
    rc, found, _ = flake8(["fixtures"], jobs="2")  # workers re-register the plugin
    expected = mpcheck_json(["fixtures"])
    assert expected, "the fixtures should have findings"
    assert found == expected
    assert rc == 1


def test_flake8_api_reports_what_mpcheck_check_reports(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flake8.api import legacy

    monkeypatch.chdir(ROOT)
    # The legacy API prints through the formatter (it never opens --output-file).
    style = legacy.get_style_guide(select=["MPC"], format=FORMAT)
    report = style.check_files([str(FIXTURES)])
    found = _parse(capsys.readouterr().out, ROOT)
    expected = mpcheck_json([FIXTURES])
    assert found == expected
    assert report.total_errors == len(expected)
    for code in {f[3] for f in expected}:
        # One statistics line per (code, message): "<count> <code> <message>".
        counted = sum(int(line.split()[0]) for line in report.get_statistics(code))
        assert counted == sum(1 for f in expected if f[3] == code)


def test_clean_files_exit_zero() -> None:
    good = [p for p in fixture_files() if p.name.startswith("good_") and not expected(p)]
    assert good
    rc, found, _ = flake8(good)
    assert (rc, found) == (0, set())


def test_plugin_yields_zero_based_columns() -> None:
    lines = MODULE_SOURCE.splitlines(keepends=True)
    results = list(MpcheckPlugin(ast.parse(MODULE_SOURCE), lines, "module.py").run())
    diagnostics = check_source(MODULE_SOURCE, "module.py", all_rules())
    ours = {(d.start.row, d.start.column, d.code) for d in diagnostics if not d.suppressed}
    assert ours
    assert {(row, col + 1, text.split()[0]) for row, col, text, _ in results} == ours
    assert all(kind is MpcheckPlugin for *_, kind in results)


def test_plugin_reads_flake8s_lines_and_parses_them_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import libcst

    from mpcheck.pipeline import one_file as engine

    parses: list[str] = []
    real_parse = libcst.parse_module

    def counting(source: str | bytes, *args: object, **kwargs: object) -> libcst.Module:
        parses.append(source.decode() if isinstance(source, bytes) else source)
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(engine.cst, "parse_module", counting)
    on_disk = tmp_path / "module.py"
    on_disk.write_text("import torch\n")  # clean: only flake8's lines hold the bug
    lines = MODULE_SOURCE.splitlines(keepends=True)
    results = list(MpcheckPlugin(ast.parse(MODULE_SOURCE), lines, str(on_disk)).run())
    assert [(row, text.split()[0]) for row, _, text, _ in results] == [(12, "MPC101")]
    assert parses == [MODULE_SOURCE]


def test_noqa_is_flake8s_job_and_both_tools_agree(tmp_path: Path) -> None:
    (tmp_path / "same_line.py").write_text(
        UPCAST_BLOCK.format(body="        return self.proj(h)  # noqa: MPC101")
    )
    # mpcheck covers every line of a multi-line statement; flake8 alone would not.
    (tmp_path / "multi_line.py").write_text(
        UPCAST_BLOCK.format(
            body="        return self.proj(\n            h,\n        )  # noqa: MPC1"
        )
    )
    (tmp_path / "other_code.py").write_text(
        UPCAST_BLOCK.format(body="        return self.proj(h)  # noqa: E501")
    )
    (tmp_path / "unused.py").write_text("import torch\nx = 1  # noqa: MPC101\n")
    paths = sorted(tmp_path.glob("*.py"))
    rc, found, _ = flake8(paths, tmp_path)
    assert found == mpcheck_json(paths, tmp_path)
    assert codes_at(found) == {("other_code.py", 12, "MPC101")}
    # flake8 really does see the same-line finding: --disable-noqa shows it, and every other.
    _, everything, _ = flake8(paths, tmp_path, "--disable-noqa")
    assert codes_at(everything) == {
        ("same_line.py", 12, "MPC101"),
        ("multi_line.py", 12, "MPC101"),
        ("other_code.py", 12, "MPC101"),
    }


def test_noqa_spellings_only_mpcheck_accepts(tmp_path: Path) -> None:
    """flake8 wants ``# noqa`` and exact-case codes; the plugin drops what mpcheck suppressed."""
    spellings = {
        "no_space.py": "#noqa",
        "lower_case.py": "# noqa: mpc101",
        "spaced_colon.py": "# noqa : MPC101",
        "flake8_too.py": "# noqa:MPC101,E501",
        "not_ours.py": "# noqa:E501",
    }
    for name, comment in spellings.items():
        (tmp_path / name).write_text(
            UPCAST_BLOCK.format(body=f"        return self.proj(h)  {comment}")
        )
    paths = sorted(tmp_path.glob("*.py"))
    _, found, _ = flake8(paths, tmp_path)
    assert found == mpcheck_json(paths, tmp_path)
    assert codes_at(found) == {("not_ours.py", 12, "MPC101")}
    _, everything, _ = flake8(paths, tmp_path, "--disable-noqa")
    assert codes_at(everything) == {(name, 12, "MPC101") for name in spellings}


def test_file_level_mpcheck_noqa_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "all.py").write_text("# mpcheck: noqa\n" + MODULE_SOURCE)
    (tmp_path / "code.py").write_text("# mpcheck: noqa: MPC101\n" + MODULE_SOURCE)
    (tmp_path / "other.py").write_text("# mpcheck: noqa: MPC9\n" + MODULE_SOURCE)
    paths = sorted(tmp_path.glob("*.py"))
    _, found, _ = flake8(paths, tmp_path)
    assert found == mpcheck_json(paths, tmp_path)
    assert codes_at(found) == {("other.py", 13, "MPC101")}


def _write_project(tmp_path: Path, pyproject: str) -> list[Path]:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "module.py").write_text(MODULE_SOURCE)
    (tmp_path / "script.py").write_text(SCRIPT_SOURCE)
    return [tmp_path / "module.py", tmp_path / "script.py"]


def test_module_half_capable_comes_from_tool_mpcheck(tmp_path: Path) -> None:
    files = _write_project(tmp_path, "[tool.mpcheck]\nmodule-half-capable = false\n")
    _, found, _ = flake8(files, tmp_path)
    assert found == mpcheck_json(files, tmp_path)
    assert codes_at(found) == {SCRIPT_FINDING}


def test_config_is_found_from_the_checked_file_upward(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _write_project(project, "[tool.mpcheck]\nmodule-half-capable = false\n")
    # Run from outside the project: the config next to the files still applies.
    _, found, _ = flake8(["project"], tmp_path)
    assert codes_at(found) == {SCRIPT_FINDING}


def test_nested_projects_agree_with_mpcheck_check_from_outside(tmp_path: Path) -> None:
    """Both tools pick the closest config for each file, wherever they are run from."""
    repo = tmp_path / "repo"
    for sub in ("half_off", "pfi", "only_100"):
        (repo / sub).mkdir(parents=True)
    _write_project(repo, "[tool.mpcheck]\nignore = ['MPC2']\n")
    _write_project(repo / "half_off", "[tool.mpcheck]\nmodule-half-capable = false\n")
    (repo / "pfi" / "mpcheck.toml").write_text('[per-file-ignores]\n"/script.py" = ["MPC1"]\n')
    for name, source in (("module.py", MODULE_SOURCE), ("script.py", SCRIPT_SOURCE)):
        (repo / "pfi" / name).write_text(source)
    _write_project(repo / "only_100", "[tool.mpcheck]\nselect = ['MPC100']\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    _, found, _ = flake8(["../repo"], outside)
    assert found == mpcheck_json(["../repo"], outside)
    assert {(os.path.relpath(p, repo), row, code) for p, row, _, code, _ in found} == {
        ("module.py", 12, "MPC101"),
        ("script.py", 7, "MPC101"),
        (os.path.join("half_off", "script.py"), 7, "MPC101"),
        (os.path.join("pfi", "module.py"), 12, "MPC101"),
    }


def test_flake8_option_overrides_tool_mpcheck(tmp_path: Path) -> None:
    files = _write_project(tmp_path, "[tool.mpcheck]\nmodule-half-capable = false\n")
    _, on, _ = flake8(files, tmp_path, "--mpcheck-module-half-capable=true")
    assert codes_at(on) == {MODULE_FINDING, SCRIPT_FINDING}
    (tmp_path / ".flake8").write_text("[flake8]\nmpcheck-module-half-capable = yes\n")
    _, from_config, _ = flake8(files, tmp_path, isolated=False)
    assert from_config == on
    (tmp_path / "pyproject.toml").write_text("")
    _, off, _ = flake8(files, tmp_path, "--mpcheck-module-half-capable=false")
    assert codes_at(off) == {SCRIPT_FINDING}


def test_invalid_option_value_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT_SOURCE)
    rc, _, err = flake8(["script.py"], tmp_path, "--mpcheck-module-half-capable=maybe")
    assert rc != 0
    assert "--mpcheck-module-half-capable: expected true or false, got 'maybe'" in err


def test_option_is_documented_in_flake8_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "flake8", "--help"], capture_output=True, text=True, env=_env()
    )
    assert "--mpcheck-module-half-capable" in proc.stdout


def test_per_file_ignores_from_tool_mpcheck(tmp_path: Path) -> None:
    pyproject = '[tool.mpcheck]\nper-file-ignores = {"module.py" = ["MPC101"]}\n'
    files = _write_project(tmp_path, pyproject)
    _, found, _ = flake8(files, tmp_path)
    assert found == mpcheck_json(files, tmp_path)
    assert codes_at(found) == {SCRIPT_FINDING}


def test_invalid_tool_mpcheck_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    files = _write_project(tmp_path, '[tool.mpcheck]\nselect = ["MPC9"]\n')
    (tmp_path / "unused.py").write_text("import os\n")
    rc, found, _ = flake8([*files, tmp_path / "unused.py"], tmp_path, "--select", "MPC,F401")
    assert rc == 1
    by_file = {(Path(p).name, code) for p, _, _, code, _ in found}
    assert {f for f in by_file if f[1] == "MPC002"} == {
        ("module.py", "MPC002"),
        ("script.py", "MPC002"),
        ("unused.py", "MPC002"),
    }
    assert ("unused.py", "F401") in by_file  # flake8 and its other plugins carry on
    message = next(m for p, _, _, c, m in found if c == "MPC002")
    # Named like every config error: the file (relative to the cwd) and the key.
    assert "pyproject.toml: unknown rule selector 'MPC9' in 'select' in [tool.mpcheck]" in message


def test_syntax_error_does_not_stop_the_run(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import torch\nx = (\n")
    (tmp_path / "script.py").write_text(SCRIPT_SOURCE)
    rc, found, _ = flake8(["."], tmp_path, "--select", "MPC,E999")
    # Python's own parser rejects the file first, so flake8 reports E999 and runs no plugin.
    assert {(Path(p).name, code) for p, _, _, code, _ in found} == {
        ("broken.py", "E999"),
        ("script.py", "MPC101"),
    }
    assert rc == 1


def test_libcst_parse_failure_is_mpc001() -> None:
    lines = ["import torch\n", "x = (\n"]
    (result,) = MpcheckPlugin(ast.Module(body=[], type_ignores=[]), lines, "x.py").run()
    row, col, text, kind = result
    assert text.startswith("MPC001 SyntaxError")
    (diag,) = check_source("".join(lines), "x.py", all_rules())
    assert (row, col + 1) == (diag.start.row, diag.start.column)
    assert kind is MpcheckPlugin


def test_internal_error_is_mpc002_and_flake8_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flake8.api import legacy
    from flake8.main.options import JobsArgument

    def boom(*args: object, **kwargs: object) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(
        "mpcheck.pipeline.one_file.check_source", boom
    )  # imported when a file is checked
    source = SCRIPT_SOURCE + "import os\n"
    (tmp_path / "model.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    # One job: the checks run in this process, where check_source is patched.
    style = legacy.get_style_guide(select=["MPC", "F401"], format=FORMAT, jobs=JobsArgument("1"))
    report = style.check_files(["model.py"])
    found = _parse(capsys.readouterr().out, tmp_path)
    assert {(row, col, code) for _, row, col, code, _ in found} == {
        (1, 1, "MPC002"),
        (source.count("\n"), 1, "F401"),
    }
    assert "RuntimeError: boom" in next(m for *_, c, m in found if c == "MPC002")
    assert report.total_errors == 2


def test_encoding_cookie_keeps_columns(tmp_path: Path) -> None:
    source = UPCAST_BLOCK.format(body='        z = "\xe9\xe9\xe9"; return self.proj(h)')
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\n" + source.encode("latin-1"))
    _, found, _ = flake8([path], tmp_path)
    assert found == mpcheck_json([path], tmp_path)
    # Characters, not bytes: re-encoding flake8's text as UTF-8 would give column 30.
    assert {(row, col) for _, row, col, _, _ in found} == {(13, 27)}


def test_stdin(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "MPC", "-"],
        input=SCRIPT_SOURCE,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("stdin:7:1: MPC101 ")


def test_config_is_cached_per_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    looked_in: list[Path] = []
    loaded: list[Path | None] = []
    real_config_in, real_load = resolver.config_in, resolver.load_settings

    def counting_config_in(directory: Path, **kwargs: Any) -> Path | None:
        looked_in.append(directory)
        return real_config_in(directory, **kwargs)

    def counting_load(path: Path | None, **kwargs: Any) -> config.Settings:
        loaded.append(path)
        return real_load(path, **kwargs)

    monkeypatch.setattr(resolver, "config_in", counting_config_in)
    monkeypatch.setattr(resolver, "load_settings", counting_load)
    files = _write_project(tmp_path, "[tool.mpcheck]\nmodule-half-capable = false\n")
    nested = tmp_path / "sub" / "deeper" / "script.py"
    nested.parent.mkdir(parents=True)
    nested.write_text(SCRIPT_SOURCE)
    for path in [*files, nested] * 3:
        lines = path.read_text().splitlines(keepends=True)
        list(MpcheckPlugin(ast.parse("".join(lines)), lines, str(path)).run())
    # Each directory is looked at once (sub/ on the way up from deeper/), the config read once.
    assert looked_in == [tmp_path, tmp_path / "sub" / "deeper", tmp_path / "sub"]
    assert loaded == [tmp_path / "pyproject.toml"]
