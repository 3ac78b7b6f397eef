"""Apply diagnostics' fixes to source text, and write files so a crash never half-writes one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mpcheck.diagnostics import Diagnostic, Position


def applicable(diag: Diagnostic, *, unsafe: bool) -> bool:
    return diag.fix is not None and (unsafe or diag.fix.applicability == "safe")


def apply_fixes(source: str, diagnostics: Sequence[Diagnostic], *, unsafe: bool) -> tuple[str, int]:
    """The fixed text and how many fixes went in.

    A fix whose edits overlap an earlier one is left for the next run, as ruff
    does; all edits of one fix go in together or not at all.
    """
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(pos: Position) -> int:
        row = min(max(pos.row, 1), len(starts))
        return min(starts[row - 1] + pos.column - 1, len(source))

    chosen: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []
    applied = 0
    for diag in diagnostics:
        if diag.suppressed or not applicable(diag, unsafe=unsafe):
            continue
        assert diag.fix is not None
        spans = [(offset(e.start), offset(e.end), e.content) for e in diag.fix.edits]
        if any(_overlaps(a, b, ta, tb) for a, b, _ in spans for ta, tb in taken):
            continue
        chosen += spans
        taken += [(a, b) for a, b, _ in spans]
        applied += 1
    text = source
    for start, end, content in sorted(chosen, key=lambda s: (s[0], s[1]), reverse=True):
        text = text[:start] + content + text[end:]
    return text, applied


def _overlaps(a: int, b: int, c: int, d: int) -> bool:
    return a < d and c < b or a == b == c == d


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` in one step: a temporary file in the same directory, then rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".mpcheck", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
