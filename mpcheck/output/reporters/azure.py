"""``azure``: Azure Pipelines logging commands, shown as errors/warnings on the build.

Azure's documentation asks for absolute file paths in ``sourcepath``, so this format (like
ruff's) reports ``Diagnostic.filename`` unchanged rather than relative to the root.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpcheck.diagnostics import Diagnostic

from .base import AZURE_DATA, AZURE_PROPERTY, ReportContext, escape, in_file, visible


def render_azure(diagnostics: Sequence[Diagnostic], ctx: ReportContext) -> str:
    """``##vso[task.logissue type=error;sourcepath=…;…;code=CODE;]message`` per finding."""
    lines = []
    for d in visible(in_file(d, ctx) for d in diagnostics):  # notebooks: the file's own lines
        properties = {
            "type": d.severity.value,
            "sourcepath": d.filename,
            "linenumber": d.start.row,
            "columnnumber": d.start.column,
            "code": d.code,
        }
        props = "".join(
            f"{key}={escape(str(value), AZURE_PROPERTY)};" for key, value in properties.items()
        )
        lines.append(f"##vso[task.logissue {props}]{escape(d.message, AZURE_DATA)}\n")
    return "".join(lines)
