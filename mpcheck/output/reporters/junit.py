"""``junit``: JUnit XML, so CI test-report views (GitLab, Jenkins, Azure) list findings.

Like ruff: one failing ``testcase`` per finding, or a single passing one when there are
none (some consumers reject an empty suite). Built with ElementTree so any message text
yields well-formed XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import PurePosixPath

from mpcheck.diagnostics import Diagnostic

from .base import (
    TOOL_NAME,
    ReportContext,
    display_path,
    one_line,
    readable_path,
    visible,
    xml_text,
)


def _counts(element: ET.Element, tests: int, failures: int) -> None:
    for key, value in (("tests", tests), ("failures", failures), ("errors", 0), ("skipped", 0)):
        element.set(key, str(value))


def _testcase(suite: ET.Element, d: Diagnostic, ctx: ReportContext, name: str) -> None:
    path = readable_path(display_path(d.filename, ctx.root))
    case = ET.SubElement(
        suite,
        "testcase",
        name=name,
        classname=str(PurePosixPath(path).with_suffix("")) if path != "-" else path,
        file=path,
        line=str(d.start.row),
        column=str(d.start.column),
    )
    properties = ET.SubElement(case, "properties")
    ET.SubElement(properties, "property", name="severity", value=d.severity.value)
    cell = f"cell {d.cell}, " if d.cell else ""
    details = [f"{cell}line {d.start.row}, col {d.start.column}, {d.message}"]
    details += [
        f"note: {display_path(r.filename, ctx.root) if r.filename else path}:"
        f"{r.start.row}:{r.start.column}: {one_line(r.message)}"
        for r in d.related
    ]
    if d.fix is not None:
        details.append(f"help: {one_line(d.fix.message)}")
    failure = ET.SubElement(case, "failure", message=xml_text(d.message), type=d.code)
    failure.text = xml_text("\n".join(details))


def _names(shown: Sequence[Diagnostic], ctx: ReportContext) -> list[str]:
    """A unique name per test case (report views merge or drop cases that share one):
    the code and the place, numbered when two findings of a code start at the same place."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for d in shown:
        path = readable_path(display_path(d.filename, ctx.root))
        cell = f"cell {d.cell}:" if d.cell else ""
        name = f"{TOOL_NAME}.{d.code} {path}:{cell}{d.start.row}:{d.start.column}"
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return names


def render_junit(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """``testsuites`` > ``testsuite name="mpcheck"`` > one ``testcase`` per finding."""
    shown = visible(diagnostics)
    root = ET.Element("testsuites", name=TOOL_NAME)
    suite = ET.SubElement(root, "testsuite", name=TOOL_NAME)
    for d, name in zip(shown, _names(shown, ctx), strict=True):
        _testcase(suite, d, ctx, name)
    if not shown:
        ET.SubElement(suite, "testcase", name="No errors found", classname=TOOL_NAME)
    for element in (root, suite):
        _counts(element, tests=max(len(shown), 1), failures=len(shown))
    ET.indent(root, space="    ")
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
