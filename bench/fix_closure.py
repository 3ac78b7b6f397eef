"""Apply every fix (safe and unsafe) to a tree of Python files and prove the result sound.

For each file with fixes: the fixed file compiles, pyflakes reports no undefined name it did
not report before, and re-checking it brings no finding that was not there before (compared
by rule and message, with line numbers left out, since fixes move lines). Everything happens
in memory: the trees are only read. Usage::

    python bench/fix_closure.py /path/to/transformers /path/to/diffusers ...

Prints one line per problem and a summary per tree; exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pyflakes.api import check as pyflakes_check
from pyflakes.reporter import Reporter

from mpcheck.diagnostics import Diagnostic
from mpcheck.files.source import SourceError, SourceFile
from mpcheck.output.fixes import apply_fixes
from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules

RULES = tuple(all_rules())
_LINE = re.compile(r"\bline \d+")


class _Undefined(Reporter):  # type: ignore[misc]
    """Collects pyflakes' "undefined name" messages; ignores everything else."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def flake(self, message: object) -> None:
        text = str(message)
        if "undefined name" in text:
            self.names[text.split("undefined name", 1)[1].strip()] += 1

    def syntaxError(self, *args: object) -> None:  # noqa: N802 - pyflakes' API
        self.names["<syntax error>"] += 1

    def unexpectedError(self, *args: object) -> None:  # noqa: N802 - pyflakes' API
        self.names["<error>"] += 1


def undefined(text: str, name: str) -> Counter[str]:
    reporter = _Undefined()
    pyflakes_check(text, name, reporter)
    return reporter.names


def findings(data: bytes, name: str) -> Counter[tuple[str, str]]:
    return _counted(_shown(data, name))


def _counted(diagnostics: Sequence[Diagnostic]) -> Counter[tuple[str, str]]:
    return Counter((d.code, _LINE.sub("line N", d.message)) for d in diagnostics)


def _shown(data: bytes, name: str) -> list[Diagnostic]:
    return [d for d in check_source(data, name, RULES) if not d.suppressed]


def close(
    data: bytes, name: str, shown: Sequence[Diagnostic] | None = None
) -> tuple[bytes | None, list[str]]:
    """The fixed bytes (None when nothing was fixed) and every problem the fixes caused.
    ``shown``: the file's unsuppressed findings, when the caller has them already."""
    try:
        source = SourceFile.decode(data)
    except SourceError:
        return None, []
    diagnostics = _shown(data, name) if shown is None else list(shown)
    if not any(d.fix for d in diagnostics):
        return None, []
    text, count = apply_fixes(source, diagnostics, unsafe=True)
    if not count:
        return None, []
    new = source.encode(text)
    problems = []
    try:
        compile(new, name, "exec")
    except SyntaxError as exc:
        return new, [f"{name}: the fixed file does not compile: {exc}"]
    gained = undefined(text, name) - undefined(source.text, name)
    problems += [f"{name}: the fixes use the undefined name {n}" for n in gained]
    appeared = findings(new, name) - _counted(diagnostics)
    problems += [f"{name}: a new {code} after fixing: {message}" for code, message in appeared]
    return new, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    failed = False
    for tree in args.trees:
        files = sorted(tree.rglob("*.py"))
        changed = 0
        problems: list[str] = []
        for path in files:
            fixed, found = close(path.read_bytes(), str(path.relative_to(tree)))
            changed += fixed is not None
            problems += found
        for problem in problems:
            print(problem)
        print(
            f"{tree.name}: {len(files)} files, {changed} changed by fixes, {len(problems)} problems"
        )
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
