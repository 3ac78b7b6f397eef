"""The editor shows what the CLI shows (pytest-lsp, a real client, against the CLI's JSON):
cross-file findings from the project's summaries, an unsaved buffer standing for its file,
configuration reloaded when it changes, excluded files left alone, and notebooks per cell."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types as lsp  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

XFILE = Path(__file__).parent.parent / "fixtures" / "xfile"


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "mpcheck", "server"]),
)
async def client(lsp_client: LanguageClient, tmp_path: Path):  # type: ignore[no-untyped-def]
    shutil.copytree(XFILE / "bad_rope_helper", tmp_path, dirs_exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[tool.mpcheck]\n")
    registered: list[lsp.RegistrationParams] = []
    lsp_client.registered = registered  # type: ignore[attr-defined]
    lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)(lambda params: registered.append(params))
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = lsp.NotebookDocumentClientCapabilities(
        synchronization=lsp.NotebookDocumentSyncClientCapabilities()
    )  # (as VS Code sends it; the recorded capabilities predate notebook sync)
    params = lsp.InitializeParams(capabilities=capabilities, root_uri=tmp_path.as_uri())
    lsp_client.result = await lsp_client.initialize_session(params)  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


def cli_json(root: Path, *paths: str) -> list[dict[str, Any]]:
    """What ``mpcheck check`` reports from the project's root for ``paths``."""
    command = [sys.executable, "-m", "mpcheck", "check", *paths, "--no-cache"]
    done = subprocess.run(
        [*command, "--output-format", "json"], cwd=root, capture_output=True, text=True
    )
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def lsp_view(finding: dict[str, Any], root: Path) -> tuple[Any, ...]:
    """A CLI finding as the server would publish it (ASCII lines: columns are units)."""

    def span(item: dict[str, Any]) -> tuple[int, int, int, int]:
        start, end = item["location"], item["end_location"]
        return (start["row"] - 1, start["column"] - 1, end["row"] - 1, end["column"] - 1)

    related = tuple(
        (Path(r.get("filename") or finding["filename"]).resolve().as_uri(), span(r))
        for r in finding["related"]
    )
    return finding["code"], span(finding), finding["message"], related


def published_view(diag: lsp.Diagnostic) -> tuple[Any, ...]:
    r = diag.range
    related = tuple(
        (
            info.location.uri,
            (
                info.location.range.start.line,
                info.location.range.start.character,
                info.location.range.end.line,
                info.location.range.end.character,
            ),
        )
        for info in diag.related_information or []
    )
    span = (r.start.line, r.start.character, r.end.line, r.end.character)
    return diag.code, span, diag.message, related


async def published(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    """The next diagnostics published for ``uri`` (others' are skipped); a server that
    never publishes them fails the test instead of hanging it."""

    async def wait() -> list[lsp.Diagnostic]:
        while True:
            params = await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if params.uri == uri:
                return list(params.diagnostics)

    # (a hang guard, no speed target: a CI machine at load 14 took minutes to start the
    # server and check the project once)
    return await asyncio.wait_for(wait(), timeout=600)


def open_file(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text or path.read_text()
            )
        )
    )
    return uri


async def test_cross_file_findings_as_the_cli(client: LanguageClient, tmp_path: Path) -> None:
    """The one-file check in the editor sees rope.py through the project, as the CLI does
    (before, the server checked the file alone and missed the MPC103)."""
    target = tmp_path / "pkg" / "attention.py"
    cli = cli_json(tmp_path, "pkg/attention.py")
    assert [f["code"] for f in cli] == ["MPC103"]
    shown = await published(client, open_file(client, target))
    assert [published_view(d) for d in shown] == [lsp_view(f, tmp_path) for f in cli]
    assert any(
        info.location.uri.endswith("pkg/rope.py") for info in shown[0].related_information or []
    )


async def test_src_layout_findings_as_the_cli(client: LanguageClient, tmp_path: Path) -> None:
    """A root script importing its package from ``src/`` shows the CLI's cross-file MPC201
    (the server built its options by hand and forgot the source roots: no finding)."""
    from tests.test_src_layout import project

    project(tmp_path, "src")
    cli = cli_json(tmp_path, "train.py")
    assert [f["code"] for f in cli] == ["MPC201"]
    shown = await published(client, open_file(client, tmp_path / "train.py"))
    assert [published_view(d) for d in shown] == [lsp_view(f, tmp_path) for f in cli]


async def test_unsaved_buffer_stands_for_its_file(client: LanguageClient, tmp_path: Path) -> None:
    target = tmp_path / "pkg" / "attention.py"
    uri = open_file(client, target)
    assert [d.code for d in await published(client, uri)] == ["MPC103"]
    good = (XFILE / "good_rope_helper" / "pkg" / "rope.py").read_text()
    open_file(client, tmp_path / "pkg" / "rope.py", good)  # opened, edited, not saved
    assert await published(client, uri) == []
    # the same text on disk: the CLI agrees
    (tmp_path / "pkg" / "rope.py").write_text(good)
    assert cli_json(tmp_path, "pkg/attention.py") == []
    # closing the buffer (its file back as it was): the finding is back once re-checked
    shutil.copy(XFILE / "bad_rope_helper" / "pkg" / "rope.py", tmp_path / "pkg" / "rope.py")
    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=(tmp_path / "pkg" / "rope.py").as_uri())
        )
    )
    change = lsp.FileEvent(
        uri=(tmp_path / "pkg" / "rope.py").as_uri(), type=lsp.FileChangeType.Changed
    )
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[change]))
    assert [d.code for d in await published(client, uri)] == ["MPC103"]


async def test_configuration_reloads(client: LanguageClient, tmp_path: Path) -> None:
    target = tmp_path / "pkg" / "attention.py"
    uri = open_file(client, target)
    assert [d.code for d in await published(client, uri)] == ["MPC103"]
    (registration,) = client.registered[0].registrations  # type: ignore[attr-defined]
    assert registration.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES
    globs = [w["globPattern"] for w in registration.register_options["watchers"]]
    assert "**/pyproject.toml" in globs and "**/mpcheck.toml" in globs and "**/*.py" in globs
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.mpcheck]\nignore = ['MPC103']\n")
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=config.as_uri(), type=lsp.FileChangeType.Changed)]
        )
    )
    assert await published(client, uri) == []
    assert cli_json(tmp_path, "pkg/attention.py") == []
    config.write_text("[tool.mpcheck]\n")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={}))
    assert [d.code for d in await published(client, uri)] == ["MPC103"]


async def test_excluded_file_is_not_linted(client: LanguageClient, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.mpcheck]\nextend-exclude = ['pkg/attention.py']\n"
    )
    assert cli_json(tmp_path, "--force-exclude", "pkg/attention.py") == []
    uri = open_file(client, tmp_path / "pkg" / "attention.py")
    assert await published(client, uri) == []


async def test_notebook_cells_as_the_cli(client: LanguageClient, tmp_path: Path) -> None:
    """notebookDocument sync: one check of the joined cells, findings per cell, the same
    rows, columns and messages as the CLI's JSON for the notebook file."""
    nbformat = pytest.importorskip("nbformat")
    result = client.result  # type: ignore[attr-defined]
    assert result.capabilities.notebook_document_sync is not None  # (a client syncs only then)
    cells = [
        "import torch\n%matplotlib inline",
        "# notes",
        "scaler = torch.cuda.amp.GradScaler()\nx = 1",
        "größe = 2; s2 = torch.cuda.amp.GradScaler()",
    ]
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_markdown_cell(c) if c.startswith("#") else nbformat.v4.new_code_cell(c)
        for c in cells
    ]
    path = tmp_path / "train.ipynb"
    nbformat.write(book, path)
    cli = cli_json(tmp_path, "train.ipynb")
    assert [(f["code"], f["cell"]) for f in cli] == [("MPC404", 3), ("MPC404", 4)]

    cell_uris = [f"vscode-notebook-cell:{path}#cell{i}" for i in range(len(cells))]
    kinds = [
        lsp.NotebookCellKind.Markup if c.startswith("#") else lsp.NotebookCellKind.Code
        for c in cells
    ]
    client.notebook_document_did_open(
        lsp.DidOpenNotebookDocumentParams(
            notebook_document=lsp.NotebookDocument(
                uri=path.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    lsp.NotebookCell(kind=k, document=u)
                    for k, u in zip(kinds, cell_uris, strict=True)
                ],
            ),
            cell_text_documents=[
                lsp.TextDocumentItem(uri=u, language_id="python", version=1, text=c)
                for u, c in zip(cell_uris, cells, strict=True)
            ],
        )
    )
    for _ in range(600):  # the cells are published back to back: watch what arrived
        if cell_uris[3] in client.diagnostics:
            break
        await asyncio.sleep(0.1)
    third, fourth = client.diagnostics[cell_uris[2]], client.diagnostics[cell_uris[3]]
    assert list(client.diagnostics[cell_uris[0]]) == []
    for shown, finding in zip((*third, *fourth), cli, strict=True):
        code, span, message, _ = lsp_view(finding, tmp_path)
        if finding["cell"] == 4:  # `größe` before it: UTF-16 units, as the client counts
            line = cells[3]
            span = (span[0], len(line[: span[1]].encode("utf-16-le")) // 2, span[2], span[3] + 0)
            end = finding["end_location"]["column"] - 1
            span = (*span[:3], len(line[:end].encode("utf-16-le")) // 2)
        assert published_view(shown)[:3] == (code, span, message)

    # source.fixAll in a cell: that cell's safe fixes, as `mpcheck check --fix` writes them
    result = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=cell_uris[3]),
            range=lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(0, 0)),
            context=lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.SourceFixAll]),
        )
    )
    (fix_all,) = [a for a in result or [] if isinstance(a, lsp.CodeAction)]
    assert fix_all.edit is not None and fix_all.edit.document_changes is not None
    (change,) = fix_all.edit.document_changes
    assert isinstance(change, lsp.TextDocumentEdit) and change.text_document.uri == cell_uris[3]
    (edit,) = change.edits
    assert isinstance(edit, lsp.TextEdit)
    line = cells[3]
    start = len(line.encode("utf-16-le")[: edit.range.start.character * 2].decode("utf-16-le"))
    end = len(line.encode("utf-16-le")[: edit.range.end.character * 2].decode("utf-16-le"))
    fixed_cell = line[:start] + edit.new_text + line[end:]
    subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "train.ipynb", "--no-cache", "--fix"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert nbformat.read(path, as_version=4).cells[3].source == fixed_cell
