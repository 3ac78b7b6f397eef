"""The finding model shared by the engine, rules and every reporter.

Rows and columns are 1-based, like ruff's JSON output; ``end`` is exclusive
in the column (it points one past the last character), also like ruff.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class Severity(str, enum.Enum):
    """``error``: the code will raise. ``warning``: it runs but is silently wrong."""

    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class Position:
    """A place in a file: 1-based row, 1-based column in code points."""

    row: int
    column: int


@dataclass(frozen=True)
class Related:
    """Another place that explains a finding (where a dtype came from): in the finding's own
    file, or in ``filename`` (another file of the project) when that is set."""

    message: str
    start: Position
    end: Position
    filename: str = ""


@dataclass(frozen=True)
class Edit:
    """Replace the text between ``start`` and ``end`` with ``content``."""

    content: str
    start: Position
    end: Position


@dataclass(frozen=True)
class Fix:
    """Edits that fix a finding, and whether ``--fix`` applies them without ``--unsafe-fixes``."""

    message: str
    edits: tuple[Edit, ...]
    applicability: str = "safe"  # "safe" | "unsafe", as in ruff


RULES_URL = "https://github.com/mpcheck/mpcheck/blob/main/docs/rules/{code}.md"


@dataclass(frozen=True)
class Diagnostic:
    """One finding, as every reporter, the cache and the editor integrations see it."""

    code: str
    name: str
    message: str
    severity: Severity
    filename: str
    start: Position
    end: Position
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    noqa_row: int = 0
    suppressed: bool = field(default=False, compare=False)
    cell: int = 0  # in a notebook: the cell (1-based) that ``start`` and ``end`` are relative to

    @property
    def url(self) -> str:
        return RULES_URL.format(code=self.code)

    def sort_key(self) -> tuple[str, int, int, int, str]:
        # a notebook's rows restart in each cell: by cell first (0 for a .py file)
        return (self.filename, self.cell, self.start.row, self.start.column, self.code)

    def with_suppressed(self) -> Diagnostic:
        return replace(self, suppressed=True)


@dataclass(frozen=True)
class RuleInfo:
    """What reporters and docs need to know about a rule, without importing it."""

    code: str
    name: str
    severity: Severity
    summary: str
    docs: str  # Markdown: what, why, symptom, fix, examples

    @property
    def url(self) -> str:
        return RULES_URL.format(code=self.code)
