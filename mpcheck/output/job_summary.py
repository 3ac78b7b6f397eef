"""The Markdown job summary GitHub shows on a workflow run's page (``$GITHUB_STEP_SUMMARY``).

Annotations are capped at 10 per level and step, so the summary is the one place where a
reader of the run sees every finding counted: a table per rule, then the findings as plain
lines. The CLI appends it whenever ``GITHUB_STEP_SUMMARY`` names a file (an empty value
turns it off, which the GitHub Action uses for its extra SARIF pass).
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from mpcheck.diagnostics import Diagnostic, RuleInfo
from mpcheck.output.reporters.base import display_path

__all__ = ["ENV_VAR", "MAX_LISTED", "render_summary", "write_step_summary"]

ENV_VAR = "GITHUB_STEP_SUMMARY"
# GitHub caps a step summary at 1 MiB; a few hundred lines keep it far below and readable.
MAX_LISTED = 200
_BACKTICKS = re.compile(r"`+")


def _cell(text: str) -> str:
    """Table cells end at ``|`` and at line breaks, so neither may appear raw."""
    return " ".join(text.split()).replace("|", "\\|")


def _fence(lines: Sequence[str]) -> str:
    """A backtick fence longer than any backtick run inside, so messages stay literal."""
    longest = max((len(m) for line in lines for m in _BACKTICKS.findall(line)), default=0)
    return "`" * max(3, longest + 1)


def render_summary(
    diagnostics: Sequence[Diagnostic],
    rules: Mapping[str, RuleInfo],
    *,
    root: Path,
    title: str = "mpcheck",
) -> str:
    """Markdown for the findings a user sees (``# noqa``-suppressed ones are left out)."""
    shown = [d for d in diagnostics if not d.suppressed]
    if not shown:
        return f"### {title}: no findings\n\nAll checks passed.\n\n"
    files = len({d.filename for d in shown})
    noun = "finding" if len(shown) == 1 else "findings"
    where = "file" if files == 1 else "files"
    out = [f"### {title}: {len(shown)} {noun} in {files} {where}", ""]
    out += ["| Rule | Name | Severity | Findings |", "| --- | --- | --- | ---: |"]
    counts = Counter(d.code for d in shown)
    first: dict[str, Diagnostic] = {}
    for d in shown:
        first.setdefault(d.code, d)
    for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        info = rules.get(code)
        name = info.name if info is not None else first[code].name
        severity = (info.severity if info is not None else first[code].severity).value
        link = f"[{code}]({info.url})" if info is not None else code
        out.append(f"| {link} | `{_cell(name)}` | {severity} | {count} |")
    out += [f"| **Total** | | | **{len(shown)}** |", ""]

    listed = [
        f"{display_path(d.filename, root)}:{d.start.row}:{d.start.column}: {d.code} "
        + " ".join(d.message.split())
        for d in shown[:MAX_LISTED]
    ]
    if len(shown) > MAX_LISTED:
        listed.append(f"... and {len(shown) - MAX_LISTED} more (see the job log)")
    fence = _fence(listed)
    out += ["<details><summary>All findings</summary>", "", fence, *listed, fence, "", "</details>"]
    return "\n".join(out) + "\n\n"


def write_step_summary(
    diagnostics: Sequence[Diagnostic],
    rules: Mapping[str, RuleInfo],
    *,
    root: Path,
    environ: Mapping[str, str] | None = None,
) -> Path | None:
    """Append the summary to ``$GITHUB_STEP_SUMMARY`` if set; returns the file written.

    A summary that cannot be written is a warning on stderr, never a failed check: the
    findings themselves have already been reported.
    """
    env = os.environ if environ is None else environ
    target = env.get(ENV_VAR, "")
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(render_summary(diagnostics, rules, root=root))
    except OSError as exc:
        print(
            f"mpcheck: warning: cannot write the step summary to {path}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return None
    return path
