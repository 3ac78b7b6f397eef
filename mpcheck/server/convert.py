"""mpcheck findings as LSP diagnostics and code actions (pure functions, no server state).

Every position goes through a :class:`~mpcheck.server.encoding.Text` of the document it is
in, so columns are in the client's negotiated encoding, never mpcheck's code points.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types as lsp

from mpcheck.diagnostics import Diagnostic, Edit, Position, Severity
from mpcheck.server.encoding import Text

SOURCE = "mpcheck"
_NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)", re.IGNORECASE)


# The text of another file a finding relates to (an open buffer, else the file), or None
Other = Callable[[str], Text | None]


def _code_points(start: Position, end: Position) -> lsp.Range:
    """A range in a file that cannot be read: code points are the best guess left."""
    return lsp.Range(
        start=lsp.Position(line=max(start.row - 1, 0), character=max(start.column - 1, 0)),
        end=lsp.Position(line=max(end.row - 1, 0), character=max(end.column - 1, 0)),
    )


def to_lsp(diag: Diagnostic, uri: str, text: Text, other: Other) -> lsp.Diagnostic:
    """One finding; related places become ``relatedInformation``, each placed in the text
    of its own file."""
    severity = (
        lsp.DiagnosticSeverity.Error
        if diag.severity is Severity.ERROR
        else lsp.DiagnosticSeverity.Warning
    )
    related = []
    for r in diag.related:
        place = other(r.filename) if r.filename else text
        span = (
            _code_points(r.start, r.end) if place is None else place.range_to_client(r.start, r.end)
        )
        location = lsp.Location(uri=Path(r.filename).as_uri() if r.filename else uri, range=span)
        related.append(lsp.DiagnosticRelatedInformation(location=location, message=r.message))
    return lsp.Diagnostic(
        range=text.range_to_client(diag.start, diag.end),
        message=diag.message,
        severity=severity,
        code=diag.code,
        code_description=lsp.CodeDescription(href=diag.url),
        source=SOURCE,
        related_information=related or None,
        data={"key": key_of(diag)},
    )


def key_of(diag: Diagnostic) -> str:
    """Identifies a finding across the publish/code-action round trip."""
    return f"{diag.code}:{diag.start.row}:{diag.start.column}:{diag.end.row}:{diag.end.column}"


def _text_edit(edit: Edit, text: Text) -> lsp.TextEdit:
    return lsp.TextEdit(range=text.range_to_client(edit.start, edit.end), new_text=edit.content)


def fix_action(
    diag: Diagnostic, uri: str, version: int | None, shown: lsp.Diagnostic, text: Text
) -> lsp.CodeAction | None:
    """The finding's fix as a quick fix; an unsafe one says so in its title."""
    if diag.fix is None:
        return None
    unsafe = diag.fix.applicability != "safe"
    title = f"{diag.code}: {diag.fix.message}" + (" (unsafe fix)" if unsafe else "")
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[shown],
        is_preferred=not unsafe,
        edit=_document_edit(uri, version, [_text_edit(e, text) for e in diag.fix.edits]),
    )


def noqa_action(
    diag: Diagnostic, uri: str, version: int | None, shown: lsp.Diagnostic, text: Text
) -> lsp.CodeAction | None:
    """Add the finding's code to the ``# noqa`` of the line that suppresses it."""
    row = diag.noqa_row or diag.start.row
    if not 1 <= row <= len(text.lines):
        return None
    line = text.lines[row - 1]
    existing = _NOQA.search(line)
    if existing is not None:
        if diag.code in re.split(r"[\s,]+", existing["codes"]):
            return None
        at = end = existing.end("codes")
        comment = f", {diag.code}"
    else:  # the comment replaces the line's trailing blanks
        at, end, comment = len(line.rstrip()), len(line), f"  # noqa: {diag.code}"
    edit = Edit(comment, Position(row, at + 1), Position(row, end + 1))
    return lsp.CodeAction(
        title=f"{diag.code}: add `# noqa: {diag.code}`",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[shown],
        edit=_document_edit(uri, version, [_text_edit(edit, text)]),
    )


def _document_edit(uri: str, version: int | None, edits: list[lsp.TextEdit]) -> lsp.WorkspaceEdit:
    document = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    return lsp.WorkspaceEdit(
        document_changes=[lsp.TextDocumentEdit(text_document=document, edits=list(edits))]
    )


FIX_ALL = f"{lsp.CodeActionKind.SourceFixAll.value}.{SOURCE}"


def fix_all_action(uri: str, version: int | None, text: Text, fixed: str) -> lsp.CodeAction:
    """``source.fixAll.mpcheck``: every safe fix of the document, as ruff's server offers
    (an empty edit when there is nothing to fix, so an on-save hook has nothing to do)."""
    edit = text.replace_all(fixed)
    return lsp.CodeAction(
        title="mpcheck: fix all auto-fixable problems",
        kind=FIX_ALL,
        edit=_document_edit(uri, version, [] if edit is None else [edit]),
    )
