"""mpcheck findings as LSP diagnostics and code actions (pure functions, no server state)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types as lsp

from mpcheck.diagnostics import Diagnostic, Edit, Position, Severity

SOURCE = "mpcheck"
_NOQA = re.compile(r"#\s*noqa:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)", re.IGNORECASE)


def lsp_position(pos: Position) -> lsp.Position:
    """mpcheck's 1-based row and column as LSP's 0-based line and character."""
    return lsp.Position(line=max(pos.row - 1, 0), character=max(pos.column - 1, 0))


def lsp_range(start: Position, end: Position) -> lsp.Range:
    return lsp.Range(start=lsp_position(start), end=lsp_position(end))


def to_lsp(diag: Diagnostic, uri: str) -> lsp.Diagnostic:
    """One finding; related places become ``relatedInformation`` in the same document."""
    severity = (
        lsp.DiagnosticSeverity.Error
        if diag.severity is Severity.ERROR
        else lsp.DiagnosticSeverity.Warning
    )
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(
                uri=Path(r.filename).as_uri() if r.filename else uri,
                range=lsp_range(r.start, r.end),
            ),
            message=r.message,
        )
        for r in diag.related
    ]
    return lsp.Diagnostic(
        range=lsp_range(diag.start, diag.end),
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


def _text_edit(edit: Edit) -> lsp.TextEdit:
    return lsp.TextEdit(range=lsp_range(edit.start, edit.end), new_text=edit.content)


def fix_action(
    diag: Diagnostic, uri: str, version: int | None, shown: lsp.Diagnostic
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
        edit=_document_edit(uri, version, [_text_edit(e) for e in diag.fix.edits]),
    )


def noqa_action(
    diag: Diagnostic, uri: str, version: int | None, lines: Sequence[str], shown: lsp.Diagnostic
) -> lsp.CodeAction | None:
    """Add the finding's code to the ``# noqa`` of the line that suppresses it."""
    row = diag.noqa_row or diag.start.row
    if not 1 <= row <= len(lines):
        return None
    line = lines[row - 1].rstrip("\r\n")
    existing = _NOQA.search(line)
    if existing is not None:
        if diag.code in re.split(r"[\s,]+", existing["codes"]):
            return None
        at = end = existing.end("codes")
        text = f", {diag.code}"
    else:  # the comment replaces the line's trailing blanks
        at, end, text = len(line.rstrip()), len(line), f"  # noqa: {diag.code}"
    edit = Edit(text, Position(row, at + 1), Position(row, end + 1))
    return lsp.CodeAction(
        title=f"{diag.code}: add `# noqa: {diag.code}`",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[shown],
        edit=_document_edit(uri, version, [_text_edit(edit)]),
    )


def _document_edit(uri: str, version: int | None, edits: list[lsp.TextEdit]) -> lsp.WorkspaceEdit:
    document = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    return lsp.WorkspaceEdit(
        document_changes=[lsp.TextDocumentEdit(text_document=document, edits=list(edits))]
    )
