"""Diff two ``mpcheck check --output-format json`` reports, finding by finding.

Usage::

    python bench/compare_json.py BEFORE.json AFTER.json [BEFORE2.json AFTER2.json ...]

Findings are matched on (file, row, column, code); for each report pair this prints
the findings only in one of them and, for matched ones, every field that changed.
Exits 0 when every pair is identical (the same findings in the same order), 1 otherwise.
Used to show that an engine refactoring changes no output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

Finding = dict[str, Any]


def _key(finding: Finding) -> tuple[str, int, int, str]:
    loc = finding.get("location") or {}
    return (finding.get("filename", ""), loc.get("row", 0), loc.get("column", 0), finding["code"])


def _where(key: tuple[str, int, int, str]) -> str:
    filename, row, column, code = key
    return f"{filename}:{row}:{column} {code}"


def compare(before: list[Finding], after: list[Finding]) -> list[str]:
    """Readable differences between two reports; empty when they are identical."""
    if before == after:
        return []
    lines: list[str] = []
    old = {_key(f): f for f in before}
    new = {_key(f): f for f in after}
    for key in old.keys() - new.keys():
        lines.append(f"- {_where(key)}: {old[key]['message']}")
    for key in new.keys() - old.keys():
        lines.append(f"+ {_where(key)}: {new[key]['message']}")
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        for field in sorted(a.keys() | b.keys()):
            if a.get(field) != b.get(field):
                lines.append(f"~ {_where(key)} {field}:\n    before: {a.get(field)!r}")
                lines.append(f"    after:  {b.get(field)!r}")
    if not lines:
        lines.append("  the same findings, in a different order")
    return lines


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    differs = False
    for before_path, after_path in zip(argv[::2], argv[1::2], strict=True):
        before = json.loads(Path(before_path).read_text())
        after = json.loads(Path(after_path).read_text())
        diff = compare(before, after)
        status = "identical" if not diff else "DIFFERENT"
        print(f"{after_path}: {len(before)} -> {len(after)} findings, {status}")
        for line in diff:
            print("  " + line)
        differs = differs or bool(diff)
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
