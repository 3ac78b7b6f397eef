"""Colour and the progress line: only where a terminal is, as NO_COLOR/FORCE_COLOR say."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.cli.terminal import Progress, colorize, use_color

ANSI = re.compile(r"\x1b\[[0-9;]*[mK]")
BAD = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x.float())
"""


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("choice", "tty", "env", "expected"),
    [
        ("auto", True, {}, True),
        ("auto", False, {}, False),
        ("auto", True, {"NO_COLOR": "1"}, False),
        ("auto", True, {"NO_COLOR": ""}, True),  # set but empty: not a request (no-color.org)
        ("auto", False, {"FORCE_COLOR": "1"}, True),
        ("auto", False, {"FORCE_COLOR": "0"}, False),
        ("auto", True, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),
        ("auto", True, {"TERM": "dumb"}, False),
        ("always", False, {"NO_COLOR": "1"}, True),  # the option wins
        ("never", True, {"FORCE_COLOR": "1"}, False),
    ],
)
def test_use_color(choice: str, tty: bool, env: dict[str, str], expected: bool) -> None:
    stream = Tty() if tty else io.StringIO()
    assert use_color(choice, stream, env) is expected


def test_colorize_keeps_the_text() -> None:
    text = (
        "a.py:3:5: MPC101 [*] error: `h` is float32\n"
        "  |\n"
        "3 |     y = lin(h)\n"
        "  |         ^^^^^^ MPC101\n"
        "  = help: Cast `h`\n"
        "\n"
        "Found 1 error.\n"
    )
    colored = colorize(text)
    assert colored != text and ANSI.sub("", colored) == text
    assert "\x1b[1;31mMPC101\x1b[0m" in colored and "\x1b[1;31merror\x1b[0m" in colored
    assert "\x1b[1;31m^^^^^^ MPC101\x1b[0m" in colored
    assert "    y = lin(h)" in colored  # the source itself is never painted


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_color(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(BAD)
    _, plain, _ = run(capsys, "check", "--no-cache")
    assert "\x1b[" not in plain  # not a terminal
    _, always, _ = run(capsys, "check", "--no-cache", "--color", "always")
    assert "\x1b[" in always and ANSI.sub("", always) == plain
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert run(capsys, "check", "--no-cache")[1] == always
    assert "\x1b[" not in run(capsys, "check", "--no-cache", "--output-format", "json")[1]
    monkeypatch.setenv("NO_COLOR", "1")
    assert run(capsys, "check", "--no-cache")[1] == plain


def test_progress_waits_then_counts_then_clears() -> None:
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(stream, 3, delay=3.0, clock=lambda: now[0])
    progress.advance()
    assert stream.getvalue() == ""  # a quick run prints nothing
    now[0] = 3.5
    progress.advance()
    assert stream.getvalue() == "\r\x1b[KChecking files: 2/3"
    progress.total = 4
    progress.advance()  # within 0.1 s of the last update: not rewritten
    assert stream.getvalue() == "\r\x1b[KChecking files: 2/3"
    progress.advance()  # the last one always is
    progress.close()
    assert stream.getvalue().endswith("\r\x1b[KChecking files: 4/4\r\x1b[K")


def test_progress_in_a_run_only_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for i in range(3):
        Path(f"m{i}.py").write_text(BAD)
    monkeypatch.setattr("mpcheck.cli.terminal.PROGRESS_DELAY", 0.0)  # as if the run were slow
    _, _, err = run(capsys, "check", "--no-cache")
    assert "Checking files" not in err  # stderr is not a terminal
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    assert cli.main(["check", "--no-cache"]) == 1
    shown = tty.getvalue()
    assert "Checking files: 3/3" in shown and shown.endswith("\r\x1b[K")
    capsys.readouterr()
