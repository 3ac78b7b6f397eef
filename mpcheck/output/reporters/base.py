"""What every reporter receives, and the helpers they share.

Everything format-independent lives here (paths relative to the root, one-line messages,
escaping tables for CI logging commands, XML-safe text, stable fingerprints) so that the
format modules only decide layout.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mpcheck.diagnostics import RULES_URL, Diagnostic, Position, RuleInfo

if TYPE_CHECKING:
    from mpcheck.files.notebook_json import SourceMap

TOOL_NAME = "mpcheck"
# The project home, derived from the rules URL so the two cannot drift apart.
HOMEPAGE = RULES_URL.split("/blob/", 1)[0]
STDIN = "-"


@dataclass(frozen=True)
class ReportContext:
    """Everything a reporter may consult besides the diagnostics themselves."""

    root: Path  # paths are shown relative to this (cwd / repo root; SARIF %SRCROOT%)
    rules: Mapping[str, RuleInfo]  # every known rule by code
    # Lines (without newlines) of a reported file by Diagnostic.filename; [] when unavailable.
    source_lines: Callable[[str], Sequence[str]]
    tool_version: str


Renderer = Callable[[Sequence[Diagnostic], ReportContext], str]


def visible(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Findings a user should see: everything not silenced by ``# noqa``."""
    return [d for d in diagnostics if not d.suppressed]


def relative_to_root(filename: str, root: Path) -> str | None:
    """``filename`` as a POSIX path relative to ``root``, or None when it lies outside it.

    Purely lexical (no symlink resolution) so reporters never touch the file system.
    """
    if filename == STDIN:
        return None
    path = PurePath(filename)
    if not path.is_absolute():
        return path.as_posix()
    base = os.path.normpath(os.path.abspath(root))
    try:
        return PurePath(os.path.normpath(filename)).relative_to(base).as_posix()
    except ValueError:
        return None


def display_path(filename: str, root: Path) -> str:
    """Path as shown to people: relative to the root when under it, else as given.

    A newline in the name is shown as its picture (U+240A), as the text reports show the
    other control characters: raw, it would split a finding's header line in two."""
    relative = relative_to_root(filename, root)
    if relative is None:
        relative = filename if filename == STDIN else PurePath(filename).as_posix()
    return relative.replace("\n", "\u240a")


def absolute(filename: str, root: Path) -> str:
    """``filename`` made absolute (a relative one is relative to ``root``); stdin unchanged."""
    if filename == STDIN or os.path.isabs(filename):
        return filename
    return os.path.join(os.path.abspath(root), filename)


def repository_root(root: Path) -> Path:
    """The repository ``root`` lies in (nearest ancestor with ``.git``), else ``root`` itself.

    Code scanning and GitLab resolve paths against the repository, and fingerprints must not
    depend on the directory mpcheck happened to run in: SARIF and GitLab use this root.
    """
    start = Path(os.path.normpath(os.path.abspath(root)))
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


def one_line(text: str) -> str:
    """Collapse line breaks so line-oriented formats keep one finding per line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def summary_line(
    d: Diagnostic, ctx: ReportContext, *, fix_marker: bool = True, severity: bool = True
) -> str:
    """``path:row:col: CODE [*] error: message``, the line editors and CI logs know how to
    parse (a tool reading ``path:row:col: CODE message`` sees the severity as the message's
    first word)."""
    marker = " [*]" if fix_marker and d.fix is not None and d.fix.applicability == "safe" else ""
    cell = f"cell {d.cell}:" if d.cell else ""
    where = f"{display_path(d.filename, ctx.root)}:{cell}{d.start.row}:{d.start.column}"
    level = f"{d.severity}: " if severity else ""
    return f"{where}: {d.code}{marker} {level}{one_line(d.message)}"


def last_row(start: Position, end: Position) -> int:
    """The last row a range actually covers (an exclusive end at column 1 ends the row above)."""
    if end.row > start.row and end.column == 1:
        return end.row - 1
    return end.row


def source_line(ctx: ReportContext, filename: str, row: int) -> str | None:
    """Text of a 1-based row, or None when the source is unavailable or too short."""
    lines = ctx.source_lines(filename)
    return lines[row - 1] if 1 <= row <= len(lines) else None


def fingerprints(
    diagnostics: Sequence[Diagnostic], ctx: ReportContext, root: Path | None = None
) -> list[str]:
    """A stable identity per finding, in input order, for SARIF and GitLab.

    Hashes the code, the path relative to ``root`` (the repository root, so neither the
    checkout's location nor the directory mpcheck ran in matters), the stripped text of the
    reported line and the occurrence index among findings sharing those three: it survives
    lines moving up or down and stays unique per finding. Row numbers are deliberately left
    out. Suppressed findings count too, so adding a ``# noqa`` does not renumber neighbours.
    """
    from hashlib import sha256  # only SARIF and GitLab ask

    base = repository_root(ctx.root) if root is None else root
    seen: Counter[tuple[str, str, str]] = Counter()
    result = []
    for d in diagnostics:
        if d.cell:  # a notebook's: the text of the cell's line (the JSON's may hold a cell)
            lines = cell_lines(ctx, d.filename, d.cell)
            line = lines[d.start.row - 1] if 1 <= d.start.row <= len(lines) else None
        else:
            line = source_line(ctx, d.filename, d.start.row)
        text = (line or "").strip()
        key = (d.code, display_path(absolute(d.filename, ctx.root), base), text)
        occurrence = seen[key]
        seen[key] += 1
        payload = "\0".join((*key, str(occurrence)))
        result.append(sha256(payload.encode("utf-8", "surrogateescape")).hexdigest())
    return result


# Formats that tools lay over the file itself (CI annotations, review comments, code scanning)
# cannot use a notebook's cell rows: ``in_file`` moves such findings onto the ``.ipynb``
# file's own lines. One source map per notebook, rebuilt when its lines are re-read.
_SOURCE_MAPS: dict[str, tuple[Sequence[str], SourceMap | None]] = {}


def in_file(d: Diagnostic, ctx: ReportContext) -> Diagnostic:
    """A notebook finding placed on the ``.ipynb`` file's own line and column (the JSON line
    holding that source line, the column of that character in the string literal); the cell
    and its row go at the front of the message (``cell 3, line 2: ...``).

    Its fix is dropped: a fix edits the cell's code, not the JSON text, so no format may offer
    it as a replacement of the file's bytes. Where the file cannot be mapped (stdin, a file
    changed since), the finding is placed on line 1, column 1, never on a wrong line.
    """
    if not d.cell:
        return d
    source_map = _source_map(ctx, d.filename)

    def place(pos: Position) -> Position:
        found = source_map.file_position(d.cell, pos.row, pos.column) if source_map else None
        return Position(found.row, found.column) if found is not None else Position(1, 1)

    start, end = place(d.start), place(d.end)
    related = tuple(
        r if r.filename else replace(r, start=place(r.start), end=place(r.end)) for r in d.related
    )
    return replace(
        d,
        message=f"cell {d.cell}, line {d.start.row}: {d.message}",
        start=start,
        end=max(start, end),
        related=related,
        fix=None,
        cell=0,
    )


def cell_lines(ctx: ReportContext, filename: str, cell: int) -> list[str]:
    """The lines (without endings) of a notebook's cell, as the file holds them now."""
    from mpcheck.files.notebook_json import split_lines

    source_map = _source_map(ctx, filename)
    value = source_map.sources.get(cell - 1) if source_map else None
    return [line.rstrip("\r\n") for line in split_lines(value.text)] if value else []


def _source_map(ctx: ReportContext, filename: str) -> SourceMap | None:
    from mpcheck.files.notebook_json import ScanError, SourceMap  # only notebooks pay for it

    lines = ctx.source_lines(filename)
    cached = _SOURCE_MAPS.get(filename)
    if cached is not None and cached[0] is lines:
        return cached[1]
    try:
        found: SourceMap | None = SourceMap("\n".join(lines)) if lines else None
    except ScanError:
        found = None
    _SOURCE_MAPS[filename] = (lines, found)
    return found


def escape(text: str, table: Mapping[str, str]) -> str:
    """Replace each character found in ``table`` (single pass, so escapes never re-escape)."""
    return "".join(table.get(char, char) for char in text)


# GitHub Actions workflow commands, as actions/toolkit's escapeData / escapeProperty.
GITHUB_DATA = {"%": "%25", "\r": "%0D", "\n": "%0A"}
GITHUB_PROPERTY = {**GITHUB_DATA, ":": "%3A", ",": "%2C"}
# Azure Pipelines logging commands, as azure-pipelines-task-lib's escapedata / escape.
AZURE_DATA = {"%": "%AZP25", "\r": "%0D", "\n": "%0A"}
AZURE_PROPERTY = {**AZURE_DATA, ";": "%3B", "]": "%5D"}

# Characters XML 1.0 cannot represent at all, even escaped (compiled on first use: the
# class spans most of Unicode, and compiling it costs more than a one-file check's output).
_XML_INVALID = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


# A file name that is not valid UTF-8 reaches us with its bad bytes as lone surrogates
# (os.fsdecode's surrogateescape): \udc80-\udcff stand for bytes 0x80-0xff.
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(data: object, **options: Any) -> str:
    """``json.dumps`` that keeps non-ASCII text readable and writes a name's undecodable
    bytes as ``\\udcXX`` escapes: valid JSON, and ``json.loads`` + ``os.fsencode`` give the
    original bytes back."""
    text = json.dumps(data, ensure_ascii=False, **options)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def uri_path(path: str) -> str:
    """A path as a URI path: percent-encoded from its bytes, so no name is unrepresentable."""
    return quote(os.fsencode(path))


def readable_path(path: str) -> str:
    """A name for formats that must be valid Unicode (XML): undecodable bytes as ``%XX``."""
    return _SURROGATE.sub(lambda m: f"%{ord(m.group()) - 0xDC00:02X}", path)


def xml_text(text: str) -> str:
    """Make text storable in XML 1.0 by replacing forbidden characters with U+FFFD."""
    return re.sub(_XML_INVALID, "\ufffd", text)
