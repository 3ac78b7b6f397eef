"""The server speaks the client's position encoding (LSP 3.17), driven by a real client.

Each encoding is negotiated, then every range the server sends (diagnostics, related
information, quick fixes, ``noqa`` edits, ``source.fixAll``) is read and applied the way a
client of that encoding does, on lines where non-ASCII (``größe``) and astral characters
(an emoji, ``𝔘``) come before the finding. The results are compared byte for byte with what
the CLI reports and writes for the same file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

SOURCE = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        größe = "😀𝔘"; h = x.float()  # 𝔘😀
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = h * self.weight
        𝔘ber = "größe😀"; return self.proj(h)


s = "😀"; scaler = torch.cuda.amp.GradScaler()
"""
CODECS = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}


def units(text: str, encoding: str) -> int:
    codec, width = CODECS[encoding]
    return len(text.encode(codec)) // width


def apply(text: str, edits: list[lsp.TextEdit], encoding: str) -> str:
    """Apply edits as a client counting columns in ``encoding`` does: on encoded units."""
    codec, width = CODECS[encoding]
    data = text.encode(codec)
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line.encode(codec)))

    def offset(pos: lsp.Position) -> int:
        return starts[pos.line] + pos.character * width

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        data = data[:start] + edit.new_text.encode(codec) + data[end:]
    return data.decode(codec)  # (a split character would fail to decode here)


def expected_range(text: str, loc: dict[str, Any], end: dict[str, Any], enc: str) -> lsp.Range:
    """The CLI's 1-based code-point location as the client's range."""
    lines = text.splitlines()

    def pos(p: dict[str, Any]) -> lsp.Position:
        line = lines[p["row"] - 1]
        return lsp.Position(line=p["row"] - 1, character=units(line[: p["column"] - 1], enc))

    return lsp.Range(start=pos(loc), end=pos(end))


def cli(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mpcheck", "check", path.name, "--no-cache", *extra]
    return subprocess.run(command, cwd=path.parent, capture_output=True, text=True, check=False)


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "mpcheck", "server"]),
    params=["utf-8", "utf-16", "utf-32", None],
)
async def client(lsp_client: LanguageClient, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)(lambda _params: None)
    capabilities = client_capabilities("visual-studio-code")
    offered = request.param
    capabilities.general = lsp.GeneralClientCapabilities(
        position_encodings=None if offered is None else ["x-made-up", offered, "utf-16"]
    )
    result = await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=capabilities, root_uri=tmp_path.as_uri())
    )
    # the client's first known preference; UTF-16 when it offers none, as the protocol says
    assert result.capabilities.position_encoding == (offered or "utf-16")
    lsp_client.encoding = offered or "utf-16"  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def _open(client: LanguageClient, path: Path) -> list[lsp.Diagnostic]:
    path.write_text(SOURCE, encoding="utf-8")
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=path.as_uri(), language_id="python", version=1, text=SOURCE
            )
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return sorted(client.diagnostics[path.as_uri()], key=lambda d: d.range.start.line)


async def _actions(
    client: LanguageClient, uri: str, diags: list[lsp.Diagnostic], only: list[str] | None = None
) -> list[lsp.CodeAction]:
    span = diags[0].range if diags else lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(0, 0))
    result = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=span,
            context=lsp.CodeActionContext(diagnostics=diags, only=only),
        )
    )
    return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


def _edits(action: lsp.CodeAction) -> list[lsp.TextEdit]:
    assert action.edit is not None and action.edit.document_changes is not None
    (change,) = action.edit.document_changes
    assert isinstance(change, lsp.TextDocumentEdit)
    return [e for e in change.edits if isinstance(e, lsp.TextEdit)]


async def test_ranges_match_the_cli(client: LanguageClient, tmp_path: Path) -> None:
    encoding = client.encoding  # type: ignore[attr-defined]
    path = tmp_path / "block.py"
    diags = await _open(client, path)
    found = json.loads(cli(path, "--output-format", "json").stdout)
    assert [d.code for d in diags] == [f["code"] for f in found] == ["MPC101", "MPC404"]
    for diag, finding in zip(diags, found, strict=True):
        want = expected_range(SOURCE, finding["location"], finding["end_location"], encoding)
        assert diag.range == want
        related = [
            expected_range(SOURCE, r["location"], r["end_location"], encoding)
            for r in finding["related"]
        ]
        assert [r.location.range for r in diag.related_information or []] == related
    # what the ranges cover, read in the client's units
    lines = SOURCE.splitlines()
    mpc101, mpc404 = diags
    codec, width = CODECS[encoding]
    line = lines[mpc101.range.start.line].encode(codec)
    covered = line[mpc101.range.start.character * width : mpc101.range.end.character * width]
    assert covered.decode(codec) == "self.proj(h)"
    assert mpc101.related_information is not None
    place = mpc101.related_information[0].location.range
    line = lines[place.start.line].encode(codec)
    assert line[place.start.character * width :].decode(codec).startswith("x.float()")


async def test_quick_fixes_and_noqa_apply_byte_for_byte(
    client: LanguageClient, tmp_path: Path
) -> None:
    encoding = client.encoding  # type: ignore[attr-defined]
    path = tmp_path / "block.py"
    mpc101, mpc404 = await _open(client, path)
    uri = path.as_uri()

    actions = await _actions(client, uri, [mpc101])
    assert any(a.kind == "source.fixAll.mpcheck" for a in actions)  # offered when not filtered
    (fix,) = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix and "noqa" not in a.title]
    fixed = apply(SOURCE, _edits(fix), encoding)
    unsafe = SOURCE.replace("return self.proj(h)", "return self.proj(h.to(self.proj.weight.dtype))")
    assert fixed.encode() == unsafe.encode()

    actions = await _actions(client, uri, [mpc404], only=[lsp.CodeActionKind.QuickFix])
    (fix,) = [a for a in actions if "noqa" not in a.title]
    safe = SOURCE.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")')
    assert apply(SOURCE, _edits(fix), encoding).encode() == safe.encode()

    for diag, line in ((mpc404, "scaler = torch.cuda.amp.GradScaler()"), (mpc101, "(h)")):
        actions = await _actions(client, uri, [diag], only=[lsp.CodeActionKind.QuickFix])
        (noqa,) = [a for a in actions if "noqa" in a.title]
        silenced = apply(SOURCE, _edits(noqa), encoding)
        assert diag.code is not None
        want = SOURCE.replace(f"{line}\n", f"{line}  # noqa: {diag.code}\n")
        assert silenced.encode() == want.encode()


async def test_fix_all_writes_what_the_cli_writes(client: LanguageClient, tmp_path: Path) -> None:
    encoding = client.encoding  # type: ignore[attr-defined]
    path = tmp_path / "block.py"
    await _open(client, path)
    actions = await _actions(client, path.as_uri(), [], only=[lsp.CodeActionKind.SourceFixAll])
    (fix_all,) = actions
    assert fix_all.kind == "source.fixAll.mpcheck"
    fixed = apply(SOURCE, _edits(fix_all), encoding)
    cli(path, "--fix")
    assert fixed.encode() == path.read_bytes()
    assert fixed != SOURCE


async def test_range_without_diagnostics_read_in_client_units(
    client: LanguageClient, tmp_path: Path
) -> None:
    """A client that sends only its cursor gets the actions of the finding there: the
    cursor's column is read in the client's units (after an emoji, 2 UTF-16 units or 4
    UTF-8 bytes)."""
    encoding = client.encoding  # type: ignore[attr-defined]
    path = tmp_path / "block.py"
    _, mpc404 = await _open(client, path)
    line = mpc404.range.start.line

    async def at(column: int) -> list[lsp.CodeAction]:
        cursor = lsp.Position(line=line, character=column)
        result = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=path.as_uri()),
                range=lsp.Range(start=cursor, end=cursor),
                context=lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.QuickFix]),
            )
        )
        return [a for a in result or [] if isinstance(a, lsp.CodeAction)]

    actions = await at(mpc404.range.start.character)
    (fix,) = [a for a in actions if "noqa" not in a.title]
    safe = SOURCE.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")')
    assert apply(SOURCE, _edits(fix), encoding).encode() == safe.encode()
    before = units('s = "😀"; scaler =', encoding)  # on the line, before the finding
    assert await at(before) == []
