"""The language server driven end to end by a real LSP client (pytest-lsp) over stdio."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

SOURCE = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
FIXED_MARK = 'torch.amp.GradScaler("cuda")'


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "mpcheck", "server"]),
)
async def client(lsp_client: LanguageClient, tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text("[tool.mpcheck]\nignore = ['MPC301']\n")
    lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)(lambda _params: None)
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri()
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    return uri


async def _diagnostics(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[uri])


def _apply(text: str, edits: list[lsp.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(pos: lsp.Position) -> int:
        return sum(len(line) for line in lines[: pos.line]) + pos.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text


def _edits(action: lsp.CodeAction) -> list[lsp.TextEdit]:
    assert action.edit is not None and action.edit.document_changes is not None
    change = action.edit.document_changes[0]
    assert isinstance(change, lsp.TextDocumentEdit)
    return [e for e in change.edits if isinstance(e, lsp.TextEdit)]


async def _actions(client: LanguageClient, uri: str, diag: lsp.Diagnostic) -> list[lsp.CodeAction]:
    result = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=diag.range,
            context=lsp.CodeActionContext(diagnostics=[diag]),
        )
    )
    return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def test_open_fix_and_cleared(client: LanguageClient, tmp_path: Path) -> None:
    uri = _open(client, tmp_path / "train.py", SOURCE)
    (diag,) = await _diagnostics(client, uri)
    assert diag.code == "MPC404"
    assert diag.source == "mpcheck"
    assert diag.range.start == lsp.Position(line=2, character=9)
    assert diag.code_description is not None and diag.code_description.href.endswith("MPC404.md")
    assert any(
        "settings from" in m.message and "pyproject.toml" in m.message for m in client.log_messages
    )
    assert any("target torch: " in m.message for m in client.log_messages)

    actions = await _actions(client, uri, diag)
    titles = [a.title for a in actions]
    assert any("noqa: MPC404" in t for t in titles), titles
    (fix,) = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix and "noqa" not in a.title]
    fixed = _apply(SOURCE, _edits(fix))
    assert FIXED_MARK in fixed

    _change(client, uri, 2, fixed)
    assert await _diagnostics(client, uri) == []


async def test_noqa_action_silences(client: LanguageClient, tmp_path: Path) -> None:
    uri = _open(client, tmp_path / "noqa.py", SOURCE)
    (diag,) = await _diagnostics(client, uri)
    (noqa,) = [a for a in await _actions(client, uri, diag) if "noqa" in a.title]
    silenced = _apply(SOURCE, _edits(noqa))
    assert "GradScaler()  # noqa: MPC404\n" in silenced
    _change(client, uri, 2, silenced)
    assert await _diagnostics(client, uri) == []


async def test_outdated_version_dropped(client: LanguageClient, tmp_path: Path) -> None:
    """Two changes in a row: only the newest version's findings are ever published."""
    uri = _open(client, tmp_path / "race.py", "x = 1\n")
    assert await _diagnostics(client, uri) == []
    slow = SOURCE + "".join(f"y{i} = torch.zeros(3).half() + {i}\n" for i in range(3000))
    _change(client, uri, 2, slow)
    _change(client, uri, 3, "import torch\n")
    published = await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert published.version == 3
    await asyncio.sleep(2)  # the version-2 analysis has finished by now, and was dropped
    assert list(client.diagnostics[uri]) == []
