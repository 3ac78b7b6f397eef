"""The language server: analysis in worker threads, stale results dropped, one config resolver.

Each document's analysis runs off the event loop so the editor stays responsive on a large
file; when it finishes, its result is published only if the document is still at the version
that was analysed (a newer change has its own analysis under way).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from mpcheck import __version__
from mpcheck.config import ConfigError
from mpcheck.diagnostics import Diagnostic
from mpcheck.engine import Options, check_source
from mpcheck.records import dataclass
from mpcheck.resolver import Resolver
from mpcheck.server.convert import fix_action, key_of, noqa_action, to_lsp


@dataclass(frozen=True)
class _Published:
    version: int | None
    findings: dict[str, Diagnostic]


class MpcheckServer(LanguageServer):
    """Holds the resolver (the CLI's hierarchical config) and the last findings per document."""

    def __init__(self) -> None:
        super().__init__("mpcheck", __version__)
        self.resolver = Resolver(Path.cwd())
        self.published: dict[str, _Published] = {}
        self.reported_configs: set[str] = set()

    def reset_root(self, root: str | None) -> None:
        self.resolver = Resolver(Path(root) if root else Path.cwd())
        self.reported_configs.clear()

    async def analyse(self, uri: str) -> None:
        """Check the document as it is now and publish, unless it changed meanwhile."""
        document = self.workspace.get_text_document(uri)
        version, source = document.version, document.source
        path = to_fs_path(uri) or uri
        try:
            project = self.resolver.project_for(path)
        except ConfigError as exc:
            self.window_show_message(
                lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"mpcheck: {exc}")
            )
            return
        self._log_settings(path, project.settings.config_path)
        rules = project.rules_for(path)
        options = Options(module_half_capable=project.settings.module_half_capable)
        found = await asyncio.get_running_loop().run_in_executor(
            None, check_source, source, path, rules, options
        )
        current = self.workspace.get_text_document(uri)
        if current.version != version:
            return  # outdated: the newer version's analysis publishes
        shown = [d for d in found if not d.suppressed and project.reports(d.code)]
        self.published[uri] = _Published(version, {key_of(d): d for d in shown})
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=[to_lsp(d, uri) for d in shown]
            )
        )

    def _log_settings(self, path: str, config: Path | None) -> None:
        """Say once per config which settings govern the documents (window/logMessage)."""
        name = f"settings from {config}" if config is not None else "default settings (no config)"
        if name in self.reported_configs:
            return
        self.reported_configs.add(name)
        self.window_log_message(
            lsp.LogMessageParams(
                type=lsp.MessageType.Info,
                message=f"mpcheck {__version__}: {os.path.basename(path)} uses {name}",
            )
        )

    def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        published = self.published.get(uri)
        if published is None:
            return []
        lines = self.workspace.get_text_document(uri).lines
        actions: list[lsp.CodeAction] = []
        for shown in params.context.diagnostics:
            data = shown.data if isinstance(shown.data, dict) else {}
            diag = published.findings.get(str(data.get("key")))
            if diag is None:
                continue
            for action in (
                fix_action(diag, uri, published.version, shown),
                noqa_action(diag, uri, published.version, lines, shown),
            ):
                if action is not None:
                    actions.append(action)
        return actions


def create_server() -> MpcheckServer:
    server = MpcheckServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: MpcheckServer, params: lsp.InitializeParams) -> None:
        root = params.root_uri and to_fs_path(params.root_uri)
        folders = params.workspace_folders or []
        ls.reset_root(root or (to_fs_path(folders[0].uri) if folders else None))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: MpcheckServer, params: lsp.DidOpenTextDocumentParams) -> None:
        await ls.analyse(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: MpcheckServer, params: lsp.DidChangeTextDocumentParams) -> None:
        await ls.analyse(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: MpcheckServer, params: lsp.DidSaveTextDocumentParams) -> None:
        await ls.analyse(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MpcheckServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.published.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]),
    )
    def code_action(ls: MpcheckServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return ls.code_actions(params)

    return server


def serve() -> None:
    """Run over stdin/stdout, as editors start language servers."""
    create_server().start_io()
