"""``sarif``: SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

Unlike every other format it keeps ``# noqa``-suppressed findings (marked ``inSource``),
because code scanning uses them to close alerts instead of leaving them open. Paths are
relative to ``%SRCROOT%``, the repository root (found from the working directory), so the
log is portable between checkouts and code scanning finds the files even when mpcheck ran
in a subdirectory; the fingerprints let code scanning track a finding across commits that
move it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mpcheck.diagnostics import Diagnostic, Fix, Position, RuleInfo

from .base import (
    HOMEPAGE,
    STDIN,
    TOOL_NAME,
    ReportContext,
    absolute,
    fingerprints,
    in_file,
    json_text,
    relative_to_root,
    repository_root,
    uri_path,
)

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = f"{TOOL_NAME}/v1"


def render_sarif(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """A complete SARIF log with one run; always non-empty (a clean run has ``results: []``)."""
    rules = [ctx.rules[code] for code in sorted(ctx.rules)]
    rule_index = {rule.code: index for index, rule in enumerate(rules)}
    root = repository_root(ctx.root)
    prints = fingerprints(diagnostics, ctx, root)  # a notebook's: from its cell's line
    # notebooks: regions on the file's own lines, and no fix (a cell edit is no JSON edit)
    diagnostics = [in_file(d, ctx) for d in diagnostics]
    results = [
        _result(d, fingerprint, rule_index, ctx, root)
        for d, fingerprint in zip(diagnostics, prints, strict=True)
    ]
    root_uri = "file://" + uri_path(root.as_posix())
    if not root_uri.endswith("/"):
        root_uri += "/"  # a base URI must end in "/" or its last segment is replaced
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": ctx.tool_version,
                        "informationUri": HOMEPAGE,
                        "rules": [_rule(rule) for rule in rules],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": root_uri}},
                # Our columns count characters, like ruff; SARIF's default is UTF-16 units.
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json_text(log, indent=2) + "\n"


def _rule(rule: RuleInfo) -> dict[str, Any]:
    # Viewers show fullDescription as a one-line description and help as the rule's page:
    # the page is Markdown, and help.text is the plain-text fallback for viewers without it.
    docs = rule.docs or rule.summary
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": first_sentence(rule.summary)},
        "help": {"text": f"{rule.summary} See {rule.url}", "markdown": docs},
        "helpUri": rule.url,
        "defaultConfiguration": {"level": rule.severity.value},
    }


def first_sentence(text: str) -> str:
    """The first sentence of ``text``, on one line (``e.g.``-style abbreviations aside)."""
    flat = " ".join(text.split())
    match = _SENTENCE_END.search(flat)
    return flat[: match.start() + 1] if match else flat


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.!?](?=\s+[A-Z`(]|$)")


def artifact_location(filename: str, ctx: ReportContext, root: Path) -> dict[str, str]:
    """Root-relative URI under ``%SRCROOT%``; an absolute ``file://`` URI outside the root."""
    if filename == STDIN:
        return {"uri": quote(filename)}
    path = absolute(filename, ctx.root)
    relative = relative_to_root(path, root)
    if relative is not None:
        return {"uri": uri_path(relative), "uriBaseId": SRCROOT}
    return {"uri": "file://" + uri_path(Path(path).as_posix())}


def _literal(text: str) -> str:
    """Escape what SARIF's embedded-link syntax reserves (``\\``, ``[``, ``]``)."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _message(d: Diagnostic) -> str:
    """The message, plus a link to each related location (``[text](id)``).

    Code scanning only shows related locations that the result's message links to, so each
    place a dtype came from is linked; the other text is then escaped as SARIF requires.
    """
    if not d.related:
        return d.message
    links = "; ".join(
        f"[{_literal(related.message)}]({index})" for index, related in enumerate(d.related, 1)
    )
    return f"{_literal(d.message)}\nSee {links}."


def _region(start: Position, end: Position) -> dict[str, int]:
    # SARIF's endColumn is exclusive, like ours.
    return {
        "startLine": start.row,
        "startColumn": start.column,
        "endLine": end.row,
        "endColumn": end.column,
    }


def _fixes(fix: Fix, artifact: dict[str, str]) -> list[dict[str, Any]]:
    if not fix.edits:
        return []  # SARIF requires at least one replacement per change
    replacements: list[dict[str, Any]] = []
    for edit in fix.edits:
        replacement: dict[str, Any] = {"deletedRegion": _region(edit.start, edit.end)}
        if edit.content:
            replacement["insertedContent"] = {"text": edit.content}
        replacements.append(replacement)
    change = {"artifactLocation": artifact, "replacements": replacements}
    return [{"description": {"text": fix.message}, "artifactChanges": [change]}]


def _result(
    d: Diagnostic, fingerprint: str, rule_index: dict[str, int], ctx: ReportContext, root: Path
) -> dict[str, Any]:
    artifact = artifact_location(d.filename, ctx, root)
    result: dict[str, Any] = {"ruleId": d.code}
    if d.code in rule_index:
        result["ruleIndex"] = rule_index[d.code]
    result["level"] = d.severity.value
    result["message"] = {"text": _message(d)}
    result["locations"] = [
        {"physicalLocation": {"artifactLocation": artifact, "region": _region(d.start, d.end)}}
    ]
    if d.related:
        result["relatedLocations"] = [
            {
                "id": index,
                "message": {"text": related.message},
                "physicalLocation": {
                    "artifactLocation": (
                        artifact_location(related.filename, ctx, root)
                        if related.filename
                        else artifact
                    ),
                    "region": _region(related.start, related.end),
                },
            }
            for index, related in enumerate(d.related, start=1)
        ]
    if d.fix is not None and (fixes := _fixes(d.fix, artifact)):
        result["fixes"] = fixes
    result["partialFingerprints"] = {FINGERPRINT_KEY: fingerprint}
    if d.suppressed:
        # Absent (not empty) for the others: some consumers drop any result that has the key.
        result["suppressions"] = [{"kind": "inSource"}]
    return result
