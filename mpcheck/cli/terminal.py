"""What only a terminal gets: colour in the text formats and a progress line on stderr.

Both follow the conventions a ruff user expects. Colour: ``--color always|never`` wins, else
``NO_COLOR`` (https://no-color.org) turns it off and ``FORCE_COLOR`` on, else stdout must be
a terminal that is not ``TERM=dumb``. Progress: only on a terminal's stderr, and only once a
run has taken a few seconds, so quick runs and every pipe or log stay byte-for-byte plain.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import TextIO

__all__ = ["COLOR_CHOICES", "Progress", "colorize", "printable", "use_color"]

COLOR_CHOICES = ("auto", "always", "never")
PROGRESS_DELAY = 3.0  # seconds a run goes on before the progress line appears

_RESET = "\x1b[0m"
_BOLD, _RED, _YELLOW, _BLUE, _CYAN, _GREEN = "1", "31", "33", "34", "36", "32"

# ``path:row:col: CODE [*] severity: message`` (``full``, ``concise``); grouped: ``  row:col CODE``
_HEADER = re.compile(
    r"^(?P<where>\S.*?:\d+:\d+:) (?P<code>[A-Z]+\d+)(?P<fix> \[\*\])? "
    r"(?P<severity>error|warning):(?P<rest>.*)$"
)
_GROUPED = re.compile(r"^(?P<where>  +\d+:\d+ *) (?P<code>[A-Z]+\d+)(?P<rest>.*)$")
_GUTTER = re.compile(r"^(?P<gutter> *\d* +\|)(?P<rest>.*)$")
_CARETS = re.compile(r"^(?P<lead>[ |]*)(?P<carets>_*\^+)(?P<code> [A-Z]+\d+)?$")
_NOTE = re.compile(r"^(?P<pad> += )(?P<label>note|help):(?P<rest>.*)$")
_SUMMARY = re.compile(r"^(Found \d+ .*|All checks passed!|\[\*\] \d+ fixable.*)$")


# A control character from a source line or a file name, shown as its one-column picture as
# ruff does (U+2400 + code, DEL as U+2421; C1 controls as U+FFFD): never raw to a terminal,
# where ESC or CSI would restyle, move or rewrite the screen, and carets stay aligned.
_CONTROLS = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_CONTROLS |= {0x7F: "\u2421"} | {c: "\ufffd" for c in range(0x80, 0xA0)}


def printable(text: str) -> str:
    """``text`` (a text report) with its control characters replaced but tabs and newlines."""
    return text.translate(_CONTROLS)


def use_color(choice: str, stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether to colour what goes to ``stream`` (the rules in the module's docstring)."""
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and environ.get("TERM") != "dumb"


def _paint(text: str, *styles: str) -> str:
    return f"\x1b[{';'.join(styles)}m{text}{_RESET}" if text else text


def colorize(text: str) -> str:
    """ANSI colours for the ``full``, ``concise`` and ``grouped`` output and the summary."""
    return "".join(_line(line) for line in text.splitlines(keepends=True))


def _line(raw: str) -> str:
    line = raw.rstrip("\n")
    end = raw[len(line) :]
    if m := _HEADER.match(line):
        severity = _RED if m["severity"] == "error" else _YELLOW
        fix = _paint(m["fix"] or "", _CYAN)
        out = (
            f"{_paint(m['where'], _BOLD)} {_paint(m['code'], _BOLD, _RED)}{fix} "
            f"{_paint(m['severity'], _BOLD, severity)}:{m['rest']}"
        )
    elif m := _GUTTER.match(line):
        caret = None if any(c.isdigit() for c in m["gutter"]) else _CARETS.match(m["rest"])
        rest = m["rest"]
        if caret is not None:  # the line under the source: carets and the code in red
            rest = caret["lead"] + _paint(caret["carets"] + (caret["code"] or ""), _BOLD, _RED)
        out = _paint(m["gutter"], _BOLD, _BLUE) + rest
    elif m := _NOTE.match(line):
        out = f"{_paint(m['pad'], _BOLD, _BLUE)}{_paint(m['label'], _BOLD, _CYAN)}:{m['rest']}"
    elif m := _GROUPED.match(line):
        out = f"{m['where']} {_paint(m['code'], _BOLD, _RED)}{m['rest']}"
    elif _SUMMARY.match(line):
        out = _paint(line, _BOLD, _GREEN) if line.startswith("All") else _paint(line, _BOLD)
    elif line.endswith(":") and not line.startswith(" ") and line:  # grouped: a file's header
        out = _paint(line, _BOLD)
    else:
        out = line
    return out + end


class Progress:
    """``Checking files: 120/4000`` on stderr, rewritten in place, cleared when done.

    Silent for the first ``delay`` seconds: a run that ends sooner prints nothing at all.
    """

    def __init__(
        self,
        stream: TextIO,
        total: int,
        *,
        delay: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.total = total
        self.delay = PROGRESS_DELAY if delay is None else delay
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.shown = False
        self._last = float("-inf")

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = self.clock()
        if now - self.started < self.delay:
            return
        if now - self._last < 0.1 and self.done < self.total:  # at most ten updates a second
            return
        self._last = now
        self.shown = True
        self.stream.write(f"\r\x1b[KChecking files: {self.done}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        """Erase the line, so what follows on stderr starts at column 0 of a clean line."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
