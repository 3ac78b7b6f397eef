"""The language server: analysis in a worker thread, stale results dropped, one config resolver.

Each document's analysis runs off the event loop so the editor stays responsive on a large
file; when it finishes, its result is published only if the document is still at the version
that was analysed (a newer change has its own analysis under way). Analyses run one at a
time: they share the project's summaries (:mod:`mpcheck.server.project`), which are not
made for concurrent use.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from mpcheck import __version__
from mpcheck.codes import INVALID_SYNTAX
from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.files import notebook as nb
from mpcheck.files.discovery import discover
from mpcheck.output.fixes import apply_fixes
from mpcheck.pipeline.one_file import Options, analyse_source, suppress
from mpcheck.server.convert import FIX_ALL, fix_action, fix_all_action, key_of, noqa_action, to_lsp
from mpcheck.server.encoding import Text, split_lines
from mpcheck.server.project import Overlay
from mpcheck.server.stdio import GuardedStdin
from mpcheck.settings.config import CONFIG_FILENAMES, ConfigError, Settings
from mpcheck.settings.resolver import Project, Resolver

_SURROGATE = re.compile("[\ud800-\udfff]")
_FIX_ROUNDS = 10  # as ruff: fixes that make room for others apply in later rounds


@dataclass(frozen=True)
class _Published:
    version: int | None
    findings: dict[str, Diagnostic]
    text: Text
    path: str


class MpcheckServer(LanguageServer):
    """Holds the resolver (the CLI's hierarchical config) and the last findings per document."""

    def __init__(self) -> None:
        super().__init__(
            "mpcheck",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Full,
            notebook_document_sync=lsp.NotebookDocumentSyncOptions(
                notebook_selector=[
                    lsp.NotebookDocumentFilterWithCells(
                        notebook="jupyter-notebook", cells=[lsp.NotebookCellLanguage("python")]
                    )
                ]
            ),
        )
        self.root = Path.cwd()
        self.resolver = Resolver(self.root)
        self.published: dict[str, _Published] = {}
        self.reported_configs: set[str] = set()
        self.overlay = Overlay()
        self.analyser = ThreadPoolExecutor(1, thread_name_prefix="mpcheck-analysis")

    def reset_root(self, root: str | None) -> None:
        self.root = Path(root) if root else Path.cwd()
        self.reload()

    def reload(self) -> None:
        """Read the configuration again (an edited pyproject.toml applies at once)."""
        self.resolver = Resolver(self.root)
        self.reported_configs.clear()
        self.overlay.forget()

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or lsp.PositionEncodingKind.Utf16)

    # -- checking ----------------------------------------------------------------------------
    def _project(self, path: str) -> Project | None:
        try:
            project = self.resolver.project_for(path)
        except ConfigError as exc:
            self.window_show_message(
                lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"mpcheck: {exc}")
            )
            return None
        self._log_settings(path, project.settings)
        return project

    def _excluded(self, path: str) -> bool:
        """Whether the configuration excludes the file, as ``--force-exclude`` decides (ruff's
        server does the same: an editor opens any file, the config says which to lint)."""
        if not os.path.isfile(path):
            return False
        try:
            return not discover([Path(path)], self.resolver.settings_for, force_exclude=True)
        except (ConfigError, OSError):
            return False

    def _options(self, project: Project, local: bool) -> Options:
        settings = project.settings
        root = str(self.root) if local and settings.follow_imports != "skip" else None
        return Options.from_settings(settings, root)

    def check(self, source: str, path: str, project: Project, local: bool) -> list[Diagnostic]:
        """The shown findings of ``source`` (runs in the analysis thread)."""
        bad = _SURROGATE.search(source)
        if bad is not None:
            return [_lone_surrogate(source, bad.start(), path)]
        data = source.encode("utf-8")
        rules = project.rules_for(path)
        options = self._options(project, local)
        link = self.overlay.link(path, options)
        found = analyse_source(data, path, rules, options, link=link).diagnostics
        marked = suppress(found, data, path, rules, options)
        return [d for d in marked if not d.suppressed and project.reports(d.code)]

    async def analyse(self, uri: str) -> None:
        """Check the document as it is now and publish, unless it changed meanwhile."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            await self.analyse_notebook(notebook.uri)
            return
        document = self.workspace.get_text_document(uri)
        version, source = document.version, document.source
        fs_path = to_fs_path(uri) if uri.startswith("file:") else None
        path = fs_path or uri
        project = self._project(path)
        if project is None:
            return
        shown: list[Diagnostic] = []
        if fs_path is None or not self._excluded(fs_path):
            shown = await asyncio.get_running_loop().run_in_executor(
                self.analyser, self.check, source, path, project, fs_path is not None
            )
        if self.workspace.get_text_document(uri).version != version:
            return  # outdated: the newer version's analysis publishes
        self._publish(uri, version, Text(source, self.encoding), path, shown)

    async def analyse_notebook(self, notebook_uri: str) -> None:
        """Check a notebook's code cells joined (the CLI's mapping) and publish per cell."""
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        version = notebook.version
        cells = list(notebook.cells)
        texts = [self.workspace.get_text_document(c.document).source for c in cells]
        path = to_fs_path(notebook_uri) or notebook_uri
        project = self._project(path)
        if project is None:
            return
        found: list[Diagnostic] = []
        parsed = nb.load(
            json.dumps({"cells": [_cell_json(c, t) for c, t in zip(cells, texts, strict=True)]})
        )
        excluded = self._excluded(path)
        if parsed.cells and not excluded:
            found = await asyncio.get_running_loop().run_in_executor(
                self.analyser, self.check, parsed.source, path, project, True
            )
        current = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if current is None or current.version != version:
            return
        per_cell: dict[int, list[Diagnostic]] = {}
        for diag in found:
            number, moved = _to_cell(parsed, diag)
            per_cell.setdefault(number, []).append(moved)
        for index, (cell, text) in enumerate(zip(cells, texts, strict=True), start=1):
            document = self.workspace.get_text_document(cell.document)
            shown = per_cell.get(index, [])
            self._publish(cell.document, document.version, Text(text, self.encoding), path, shown)

    def _publish(
        self, uri: str, version: int | None, text: Text, path: str, shown: list[Diagnostic]
    ) -> None:
        self.published[uri] = _Published(version, {key_of(d): d for d in shown}, text, path)
        diagnostics = [to_lsp(d, uri, text, self._other_text) for d in shown]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics)
        )

    def _other_text(self, filename: str) -> Text | None:
        """Another file's text, to place a related location in the client's units."""
        data = self.overlay.buffers.get(os.path.realpath(filename))
        if data is None:
            try:
                data = Path(filename).read_bytes()
            except OSError:
                return None
        return Text(data.decode("utf-8", "replace").removeprefix("\ufeff"), self.encoding)

    async def analyse_all(self, but: str | None = None) -> None:
        """Check every open document again (the configuration or another file changed),
        except ``but`` (just checked); a notebook once, not once per cell."""
        self.overlay.forget()
        skipped = self.workspace.get_notebook_document(cell_uri=but) if but else None
        for uri in list(self.workspace.notebook_documents):
            if skipped is None or uri != skipped.uri:
                await self.analyse_notebook(uri)
        for uri in list(self.workspace.text_documents):
            if uri != but and self.workspace.get_notebook_document(cell_uri=uri) is None:
                await self.analyse(uri)

    def _log_settings(self, path: str, settings: Settings) -> None:
        """Say once per config which settings govern the documents (window/logMessage)."""
        config = settings.config_path
        name = f"settings from {config}" if config is not None else "default settings (no config)"
        target = settings.target_torch_version
        if target is None:
            name += ", target torch: latest"
        else:
            name += f", target torch: {target[0]}.{target[1]} ({settings.target_torch_source})"
        if name in self.reported_configs:
            return
        self.reported_configs.add(name)
        self.window_log_message(
            lsp.LogMessageParams(
                type=lsp.MessageType.Info,
                message=f"mpcheck {__version__}: {os.path.basename(path)} uses {name}",
            )
        )

    # -- code actions ------------------------------------------------------------------------
    async def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        published = self.published.get(uri)
        if published is None:
            return []
        only = params.context.only
        actions: list[lsp.CodeAction] = []
        if _wanted(only, lsp.CodeActionKind.QuickFix):
            for diag, shown in self._asked(params, published):
                for action in (
                    fix_action(diag, uri, published.version, shown, published.text),
                    noqa_action(diag, uri, published.version, shown, published.text),
                ):
                    if action is not None:
                        actions.append(action)
        if _wanted(only, FIX_ALL):
            if self.workspace.get_notebook_document(cell_uri=uri) is None:
                fixed = await self._fix_all(uri, published)
            else:  # a cell: its own safe fixes, one round (the cells are checked together)
                findings = list(published.findings.values())
                fixed = apply_fixes(published.text.text, findings, unsafe=False)[0]
            if fixed is not None:
                actions.append(fix_all_action(uri, published.version, published.text, fixed))
        return actions

    def _asked(
        self, params: lsp.CodeActionParams, published: _Published
    ) -> list[tuple[Diagnostic, lsp.Diagnostic]]:
        """The findings a request is about: the diagnostics it sends back, else (a client
        that sends none) the published findings its range touches, read in its units."""
        asked = []
        for shown in params.context.diagnostics:
            data = shown.data if isinstance(shown.data, dict) else {}
            diag = published.findings.get(str(data.get("key")))
            if diag is not None:
                asked.append((diag, shown))
        if params.context.diagnostics:
            return asked
        text = published.text
        start, end = text.from_client(params.range.start), text.from_client(params.range.end)
        for diag in published.findings.values():
            if diag.start <= end and start <= diag.end:
                asked.append((diag, to_lsp(diag, params.text_document.uri, text, self._other_text)))
        return asked

    async def _fix_all(self, uri: str, published: _Published) -> str | None:
        """The document with every safe fix applied, round after round (None: it changed
        since its findings were published, and the editor will ask again)."""
        document = self.workspace.get_text_document(uri)
        if document.version != published.version:
            return None
        project = self._project(published.path)
        if project is None:
            return None
        text, found = document.source, list(published.findings.values())
        local = uri.startswith("file:")
        loop = asyncio.get_running_loop()
        for _ in range(_FIX_ROUNDS):
            new, applied = apply_fixes(text, found, unsafe=False)
            if not applied:
                break
            text = new
            found = await loop.run_in_executor(
                self.analyser, self.check, text, published.path, project, local
            )
        self.overlay.forget()  # the rounds' summaries are of text the buffer does not hold
        return text


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    """Whether a request's ``only`` asks for actions of ``kind`` (``source`` asks for
    ``source.fixAll.mpcheck``, as LSP's hierarchical kinds go)."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _cell_json(cell: lsp.NotebookCell, text: str) -> dict[str, str]:
    kind = "code" if cell.kind == lsp.NotebookCellKind.Code else "markdown"
    return {"cell_type": kind, "source": text}


def _to_cell(notebook: nb.Notebook, diag: Diagnostic) -> tuple[int, Diagnostic]:
    """A finding on the joined cells, relative to its cell (the number, 1-based)."""
    cell, row = notebook.locate(diag.start.row)
    shift = cell.first_row - 1

    def moved(pos: Position) -> Position:
        return Position(pos.row - shift, pos.column)

    related = tuple(
        replace(r, start=moved(r.start), end=moved(r.end))
        for r in diag.related
        if not r.filename and notebook.locate(r.start.row)[0] == cell
    ) + tuple(r for r in diag.related if r.filename)
    fix = diag.fix
    if fix is not None:
        edits = tuple(replace(e, start=moved(e.start), end=moved(e.end)) for e in fix.edits)
        fix = replace(fix, edits=edits)
    noqa_row = diag.noqa_row - shift if diag.noqa_row else 0
    start, end = Position(row, diag.start.column), moved(diag.end)
    return cell.number, replace(
        diag, start=start, end=end, related=related, fix=fix, noqa_row=noqa_row
    )


def _lone_surrogate(source: str, offset: int, path: str) -> Diagnostic:
    """MPC001 for a document holding a lone UTF-16 surrogate (a client can send one in JSON
    as ``\\ud800``): it is no Unicode text, so no file can hold it."""
    before = split_lines(source[:offset])
    row, column = len(before), len(before[-1]) + 1
    code = ord(source[offset])
    message = f"the document holds a lone surrogate (U+{code:04X}), which is not valid Unicode"
    return Diagnostic(
        INVALID_SYNTAX.code,
        INVALID_SYNTAX.name,
        message,
        Severity.ERROR,
        path,
        Position(row, column),
        Position(row, column + 1),
        noqa_row=row,
    )


def _watchers() -> list[lsp.FileSystemWatcher]:
    names = [*CONFIG_FILENAMES, "*.py", "*.pyi"]
    return [lsp.FileSystemWatcher(glob_pattern=f"**/{name}") for name in names]


def create_server() -> MpcheckServer:
    server = MpcheckServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: MpcheckServer, params: lsp.InitializeParams) -> None:
        root = params.root_uri and to_fs_path(params.root_uri)
        folders = params.workspace_folders or []
        ls.reset_root(root or (to_fs_path(folders[0].uri) if folders else None))

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: MpcheckServer, params: lsp.InitializedParams) -> None:
        """Ask the client to report edits of config files and Python files (when it can)."""
        workspace = ls.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace is not None else None
        if watched is None or not watched.dynamic_registration:
            return
        options = lsp.DidChangeWatchedFilesRegistrationOptions(watchers=_watchers())
        registration = lsp.Registration(
            id="mpcheck-watched-files",
            method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=options,
        )
        try:
            await ls.client_register_capability_async(
                lsp.RegistrationParams(registrations=[registration])
            )
        except Exception as exc:  # noqa: BLE001 - the client refused: saves still re-check
            ls.window_log_message(
                lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"mpcheck: {exc}")
            )

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: MpcheckServer, params: lsp.DidOpenTextDocumentParams) -> None:
        await _changed(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: MpcheckServer, params: lsp.DidChangeTextDocumentParams) -> None:
        await _changed(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: MpcheckServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.overlay.forget()  # (files may have changed on disk too, in a client without watchers)
        await ls.analyse(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MpcheckServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.published.pop(uri, None)
        if uri.startswith("file:"):
            ls.overlay.set_buffer(to_fs_path(uri) or uri, None)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def notebook_open(ls: MpcheckServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        await ls.analyse_notebook(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def notebook_change(
        ls: MpcheckServer, params: lsp.DidChangeNotebookDocumentParams
    ) -> None:
        await ls.analyse_notebook(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: MpcheckServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.published.pop(cell.uri, None)
            ls.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[])
            )

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched(ls: MpcheckServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        names = {os.path.basename(to_fs_path(c.uri) or c.uri) for c in params.changes}
        if names & set(CONFIG_FILENAMES):
            ls.reload()
        await ls.analyse_all()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration(ls: MpcheckServer, params: lsp.DidChangeConfigurationParams) -> None:
        ls.reload()
        await ls.analyse_all()

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]),
    )
    async def code_action(ls: MpcheckServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return await ls.code_actions(params)

    return server


async def _changed(ls: MpcheckServer, uri: str) -> None:
    """An open buffer changed: it stands for its file in every check from now on, and the
    other open documents, which may import it, are checked again."""
    if uri.startswith("file:") and ls.workspace.get_notebook_document(cell_uri=uri) is None:
        source = ls.workspace.get_text_document(uri).source
        ls.overlay.set_buffer(to_fs_path(uri) or uri, source.encode("utf-8", "surrogatepass"))
    await ls.analyse(uri)
    await ls.analyse_all(but=uri)


def serve() -> None:
    """Run over stdin/stdout, as editors start language servers; a message header that
    cannot be honoured ends the session with exit status 1 and one line on stderr."""
    stdin = GuardedStdin(sys.stdin.buffer)
    create_server().start_io(stdin)  # type: ignore[arg-type]
    if stdin.rejected is not None:
        print(stdin.rejected, file=sys.stderr)
        raise SystemExit(1)
