"""``# noqa`` suppressions with flake8's matching and ruff's file-level directive.

Only files that have findings (or mention "noqa", for unused-noqa reporting) are scanned, and
scanning uses :mod:`tokenize` rather than libcst: it is cheap, it tells real comments from
``#`` inside strings, and its NEWLINE tokens give the logical lines a noqa comment covers.
"""

from __future__ import annotations

import bisect
import io
import re
import tokenize
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from mpcheck.codes import UNUSED_NOQA
from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.files.source import split_lines

__all__ = [
    "UNUSED_NOQA_NAME",
    "FileSuppressions",
    "NoqaComment",
    "apply",
    "might_have_noqa",
    "noqa_row_for",
    "scan",
]

UNUSED_NOQA_NAME = "unused-noqa"
_OWN_PREFIX = "MPC"

_CODE = r"[A-Z]+[0-9]+"
_CODES = rf"{_CODE}(?:(?:\s*,\s*|\s+){_CODE})*"
# flake8's NOQA_INLINE_REGEXP, but accepting spaces around the colon and after the hash,
# and not matching words that merely start with noqa.
_INLINE_RE = re.compile(rf"#\s*noqa(?![\w-])(?:\s*:\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
# The file-level directive ("mpcheck: noqa", optionally with codes) on a line of its own.
_FILE_RE = re.compile(
    rf"#\s*mpcheck\s*:\s*noqa(?:\s*:\s*(?P<codes>{_CODES}))?(?:\s.*)?", re.IGNORECASE
)
_SPLIT_RE = re.compile(r"[\s,]+")
_MIGHT_RE = re.compile("noqa", re.IGNORECASE)


@dataclass(frozen=True)
class NoqaComment:
    """An inline ``# noqa`` directive; columns are 1-based, ``end_col`` exclusive.

    The span covers the directive itself (``# noqa: MPC101``), not text around it.
    ``codes`` is None for a blanket ``# noqa``; otherwise upper-cased, in written order.
    """

    row: int
    start_col: int
    end_col: int
    codes: tuple[str, ...] | None

    def matches(self, code: str) -> bool:
        """flake8's rule: blanket, or a listed code equal to or a prefix of ``code``."""
        return self.codes is None or any(code.startswith(c) for c in self.codes)


@dataclass(frozen=True)
class FileSuppressions:
    """Everything about one file's noqa directives that :func:`apply` needs."""

    comments: tuple[NoqaComment, ...] = ()
    # Logical lines spanning several physical lines, as sorted (first_row, last_row) pairs.
    logical_lines: tuple[tuple[int, int], ...] = ()
    file_exempt: bool = False  # a blanket ``# mpcheck: noqa``
    file_codes: frozenset[str] = frozenset()  # codes from ``# mpcheck: noqa: ...``
    _starts: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(first for first, _ in self.logical_lines))

    def logical_range(self, row: int) -> tuple[int, int]:
        """The rows of the logical line containing ``row`` (just ``row`` if it is single)."""
        i = bisect.bisect_right(self._starts, row) - 1
        if i >= 0:
            first, last = self.logical_lines[i]
            if first <= row <= last:
                return first, last
        return row, row

    def file_suppresses(self, code: str) -> bool:
        return self.file_exempt or any(code.startswith(c) for c in self.file_codes)


def might_have_noqa(source: str) -> bool:
    """Cheap pre-check so files without findings are tokenized only if they mention noqa."""
    return _MIGHT_RE.search(source) is not None


def _split_codes(codes: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.upper() for c in _SPLIT_RE.split(codes) if c))


def _inline(text: str, row: int, col0: int) -> NoqaComment | None:
    match = _INLINE_RE.search(text)
    if match is None:
        return None
    codes = match.group("codes")
    return NoqaComment(
        row=row,
        start_col=col0 + match.start() + 1,
        end_col=col0 + match.end() + 1,
        codes=None if codes is None else _split_codes(codes),
    )


class _Builder:
    def __init__(self) -> None:
        self.comments: list[NoqaComment] = []
        self.file_exempt = False
        self.file_codes: set[str] = set()

    def comment(self, text: str, row: int, col0: int, own_line: bool) -> None:
        if own_line:
            file_match = _FILE_RE.fullmatch(text.rstrip())
            if file_match is not None:
                codes = file_match.group("codes")
                if codes is None:
                    self.file_exempt = True
                else:
                    self.file_codes.update(_split_codes(codes))
                return
        found = _inline(text, row, col0)
        if found is not None:
            self.comments.append(found)

    def build(self, logical_lines: Sequence[tuple[int, int]]) -> FileSuppressions:
        return FileSuppressions(
            comments=tuple(self.comments),
            logical_lines=tuple(logical_lines),
            file_exempt=self.file_exempt,
            file_codes=frozenset(self.file_codes),
        )


_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")


def _scan_tokens(source: str) -> FileSuppressions:
    builder = _Builder()
    logical: list[tuple[int, int]] = []
    depth = 0
    first = last = 0  # rows of the logical line being read; 0: none yet
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind in (tokenize.ENDMARKER, tokenize.DEDENT):
            continue
        if kind == tokenize.COMMENT:
            row, col0 = tok.start
            builder.comment(tok.string, row, col0, own_line=not tok.line[:col0].strip())
        elif kind == tokenize.OP:
            if tok.string in _OPENERS:
                depth += 1
            elif tok.string in _CLOSERS and depth:
                depth -= 1
        if not first:
            first = tok.start[0]
        last = max(last, tok.end[0])
        # NEWLINE ends a statement; NL outside brackets ends a blank or comment-only line.
        if kind == tokenize.NEWLINE or (kind == tokenize.NL and depth == 0):
            if last > first:
                logical.append((first, last))
            first = last = 0
    return builder.build(logical)


def _scan_lines(source: str) -> FileSuppressions:
    """Fallback for sources tokenize rejects: every physical line stands alone."""
    builder = _Builder()
    for row, line in enumerate(split_lines(source), start=1):
        hash_at = line.find("#")
        if hash_at >= 0:
            own_line = not line[:hash_at].strip()
            builder.comment(line[hash_at:], row, hash_at, own_line=own_line)
    return builder.build(())


def scan(source: str) -> FileSuppressions:
    """Find the noqa directives and multi-line logical lines of ``source``."""
    try:
        return _scan_tokens(source)
    except (tokenize.TokenError, SyntaxError):
        return _scan_lines(source)


def noqa_row_for(row: int, sup: FileSuppressions) -> int:
    """The row where a noqa for a finding on ``row`` goes: the logical line's last row."""
    return sup.logical_range(row)[1]


def _unused_message(unused: Sequence[str], disabled: Sequence[str]) -> str:
    parts = []
    if unused:
        parts.append("unused: " + ", ".join(f"`{c}`" for c in unused))
    if disabled:
        parts.append("non-enabled: " + ", ".join(f"`{c}`" for c in disabled))
    return f"Unused `noqa` directive ({'; '.join(parts)})"


def apply(
    diags: Sequence[Diagnostic],
    sup: FileSuppressions,
    *,
    unused_noqa: bool,
    filename: str | None = None,
    enabled_codes: Collection[str] | None = None,
) -> list[Diagnostic]:
    """Mark suppressed diagnostics and, if asked, add ``MPC100`` for unused noqa codes.

    A noqa comment on any row of a logical line covers findings starting on any of its rows.
    Unused-noqa reporting considers only explicitly listed ``MPC`` codes (other tools own
    ``E501`` and friends, and a blanket noqa is never reported). With ``enabled_codes``, codes
    that could not have matched because their rule is off are reported as ``non-enabled``,
    like ruff. ``filename`` names the file in those reports; it defaults to the first
    diagnostic's, so pass it when ``diags`` may be empty. Returns every diagnostic, sorted;
    suppressed ones have ``suppressed=True``.
    """
    if filename is None:
        filename = diags[0].filename if diags else "-"
    by_row: dict[int, list[int]] = {}
    for index, comment in enumerate(sup.comments):
        by_row.setdefault(comment.row, []).append(index)
    used: list[set[str]] = [set() for _ in sup.comments]

    def covering(row: int) -> list[int]:
        first, last = sup.logical_range(row)
        return [i for r in range(first, last + 1) for i in by_row.get(r, ())]

    result: list[Diagnostic] = []
    for diag in diags:
        if diag.suppressed:
            result.append(diag)
            continue
        if sup.file_suppresses(diag.code):
            result.append(diag.with_suppressed())
            continue
        hit = False
        for index in covering(diag.start.row):
            comment = sup.comments[index]
            if comment.matches(diag.code):
                hit = True
                if comment.codes is not None:
                    used[index].update(c for c in comment.codes if diag.code.startswith(c))
        result.append(diag.with_suppressed() if hit else diag)

    if unused_noqa and not sup.file_exempt:
        for index, comment in enumerate(sup.comments):
            if comment.codes is None:
                continue
            candidates = [
                c
                for c in comment.codes
                if c.startswith(_OWN_PREFIX)
                and c not in used[index]
                and not UNUSED_NOQA.code.startswith(c)  # it suppresses its own report
            ]
            if not candidates:
                continue
            disabled: list[str] = []
            if enabled_codes is not None:
                disabled = [
                    c for c in candidates if not any(e.startswith(c) for e in enabled_codes)
                ]
            unused = [c for c in candidates if c not in disabled]
            report = Diagnostic(
                code=UNUSED_NOQA.code,
                name=UNUSED_NOQA_NAME,
                message=_unused_message(unused, disabled),
                severity=Severity.WARNING,
                filename=filename,
                start=Position(comment.row, comment.start_col),
                end=Position(comment.row, comment.end_col),
                noqa_row=comment.row,
            )
            silenced = sup.file_suppresses(UNUSED_NOQA.code) or any(
                sup.comments[i].matches(UNUSED_NOQA.code) for i in covering(comment.row)
            )
            result.append(report.with_suppressed() if silenced else report)
    return sorted(result, key=Diagnostic.sort_key)
