"""flake8 plugin: mpcheck's findings under ``flake8 --select MPC``.

Registered as the ``MPC`` entry point of ``flake8.extension``. The plugin reuses flake8's
already-read ``lines`` and runs the same engine call as ``mpcheck check`` (one libcst parse),
so both report the same codes at the same rows; columns are converted to flake8's 0-based
convention. Division of labour with flake8:

* flake8 owns file selection, ``--select``/``--ignore``/``--per-file-ignores`` and ``# noqa``:
  a finding that flake8's own ``# noqa`` matching suppresses is yielded and flake8 drops it
  (so ``--disable-noqa`` and noqa-auditing plugins see it). ``MPC100`` is never yielded.
* Suppressions flake8 would not apply are applied by the plugin, so both tools agree: the
  file-level ``# mpcheck: noqa[: codes]``, a ``# noqa`` on another line of a multi-line
  statement (mpcheck covers the whole logical line; flake8 only joins lines for backslash
  continuations and multi-line strings), and the spellings only mpcheck accepts (``#noqa``,
  lower-case codes). ``--disable-noqa`` turns these off too.
* ``[tool.mpcheck]`` decides the enabled rules (``select``/``extend-select``/``ignore``/
  ``per-file-ignores``) and the analysis options, with the configuration chosen for each file
  by :class:`mpcheck.settings.resolver.Resolver`, exactly as ``mpcheck check`` chooses it;
  ``--mpcheck-module-half-capable`` (or ``mpcheck-module-half-capable`` in flake8's config)
  overrides the analysis option.
* Nothing raised inside mpcheck aborts flake8: a file libcst cannot parse is ``MPC001``, an
  internal error or an invalid ``[tool.mpcheck]`` is ``MPC002`` at 1:1 of the file. (A file
  Python's own parser rejects never reaches any plugin: flake8 reports it as ``E999``.)
"""

from __future__ import annotations

import argparse
import ast
import os
import tokenize
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from mpcheck import __version__
from mpcheck.codes import INTERNAL_ERROR, UNUSED_NOQA

if TYPE_CHECKING:  # the engine (libcst, the rules) is imported only to check a file
    from mpcheck.diagnostics import Diagnostic
    from mpcheck.settings.resolver import Project, Resolver

__all__ = ["MpcheckPlugin"]

Result = tuple[int, int, str, type[Any]]

# flake8 reports unused noqa comments itself (or not at all); mpcheck's report would be noise.
NOT_YIELDED = frozenset({UNUSED_NOQA.code})
BROKEN = INTERNAL_ERROR.code
HALF_CAPABLE_OPTION = "--mpcheck-module-half-capable"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _parse_bool(value: str) -> bool:
    """flake8 hands config values over as raw strings; argparse needs the same parsing."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


# One resolver per working directory: it picks the config for files with none above them and
# names config files in error messages relative to it.
_resolvers: dict[Path, Resolver] = {}


def _project_for(filename: str) -> Project:
    """The configuration governing ``filename``: the same lookup as ``mpcheck check``'s."""
    cwd = Path.cwd()
    resolver = _resolvers.get(cwd)
    if resolver is None:
        from mpcheck.settings.resolver import Resolver

        resolver = _resolvers[cwd] = Resolver(cwd)
    return resolver.project_for(filename)


def _declared_encoding(lines: Sequence[str]) -> str:
    """The source's PEP 263 encoding, so libcst sees the bytes ``mpcheck check`` would read."""
    head = iter([line.encode("utf-8", "surrogateescape") for line in lines[:2]])
    try:
        encoding, _ = tokenize.detect_encoding(lambda: next(head, b""))
    except SyntaxError:
        return "utf-8"
    return encoding


def _source_bytes(lines: Sequence[str]) -> bytes:
    text = "".join(lines)
    encoding = _declared_encoding(lines)
    if encoding not in ("utf-8", "utf-8-sig"):
        try:
            return text.encode(encoding)
        except (LookupError, UnicodeError):
            pass
    return text.encode("utf-8", "surrogateescape")


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def _reports_mpc(options: argparse.Namespace) -> bool:
    """Whether flake8 would report any MPC code under these options (when unsure: yes).

    Each selector or ignore entry that names MPC codes stands for the codes it starts, so
    asking flake8's own decision for one code under each is exact for prefixes and codes.
    """
    try:
        from flake8.style_guide import Decision, DecisionEngine

        engine = DecisionEngine(options)
        named = [s for s in (*engine.selected, *engine.ignored) if s.startswith("MPC")]
        codes = {s.ljust(6, "9") for s in (*named, "MPC")}
        return any(engine.decision_for(code) is Decision.Selected for code in codes)
    except Exception:  # noqa: BLE001 - an unexpected flake8: check, as before
        return True


class MpcheckPlugin:
    """flake8 AST plugin; ``tree`` is accepted (it selects the plugin kind) but unused."""

    name: ClassVar[str] = "mpcheck"
    version: ClassVar[str] = __version__
    # None: take ``module-half-capable`` from [tool.mpcheck] (default true).
    module_half_capable: ClassVar[bool | None] = None
    disable_noqa: ClassVar[bool] = False  # flake8's --disable-noqa
    # False when flake8's --select/--ignore leave no MPC code to report (``--select E,F``):
    # then no file is checked and the engine is never imported, so the plugin costs nothing.
    reports_mpc: ClassVar[bool] = True

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        """Register the analysis options, on the command line and in flake8's config."""
        option_manager.add_option(
            HALF_CAPABLE_OPTION,
            type=_parse_bool,
            default=None,
            metavar="BOOL",
            parse_from_config=True,
            help=(
                "mpcheck: treat methods of nn.Module subclasses as running in half precision "
                "(true/false; default: module-half-capable from [tool.mpcheck], else true)"
            ),
        )

    @classmethod
    def parse_options(
        cls, option_manager: Any, options: argparse.Namespace, args: Sequence[str]
    ) -> None:
        """Values from flake8's config file arrive unparsed (strings); parse them here."""
        value = getattr(options, "mpcheck_module_half_capable", None)
        if isinstance(value, str):
            try:
                value = _parse_bool(value)
            except argparse.ArgumentTypeError as exc:
                from flake8.exceptions import ExecutionError

                raise ExecutionError(f"mpcheck-module-half-capable: {exc}") from None
        cls.module_half_capable = value
        cls.disable_noqa = bool(getattr(options, "disable_noqa", False))
        cls.reports_mpc = _reports_mpc(options)

    def run(self) -> Iterator[Result]:
        """Yield ``(row, col, "MPCxxx message", type)`` with flake8's 0-based column."""
        if not self.reports_mpc:
            return
        from mpcheck.settings.config import ConfigError

        try:
            found = self._check()
        except ConfigError as exc:  # its message names the config file and the key
            found = [(1, 0, f"{BROKEN} invalid mpcheck configuration, file not checked: {exc}")]
        except Exception as exc:  # noqa: BLE001 - a plugin must never abort flake8's run
            found = [(1, 0, f"{BROKEN} mpcheck failed on this file ({type(exc).__name__}: {exc})")]
        for row, col, text in found:
            yield row, col, _one_line(text), type(self)

    def _check(self) -> list[tuple[int, int, str]]:
        from mpcheck.pipeline.one_file import Options, check_source
        from mpcheck.settings.roots import analysis_root

        project = _project_for(self.filename)
        rules = project.rules_for(self.filename)
        root = analysis_root(Path(self.filename), Path(os.getcwd()))
        options = Options.from_settings(
            project.settings,
            str(root),
            unused_noqa=False,
            module_half_capable=self.module_half_capable,
        )
        diagnostics = check_source(_source_bytes(self.lines), self.filename, rules, options)
        wanted = [d for d in diagnostics if self._wanted(d, project)]
        if not self.disable_noqa:
            wanted = [d for d in wanted if not d.suppressed or self._flake8_suppresses(d)]
        return [(d.start.row, max(d.start.column - 1, 0), f"{d.code} {d.message}") for d in wanted]

    @staticmethod
    def _wanted(d: Diagnostic, project: Project) -> bool:
        return d.code not in NOT_YIELDED and project.reports(d.code)

    def _flake8_suppresses(self, d: Diagnostic) -> bool:
        """Whether flake8's own ``# noqa`` logic drops ``d`` (mpcheck already suppressed it).

        Asked of flake8 itself, on the reported line: mpcheck accepts spellings flake8 does
        not (``#noqa``, ``# noqa: mpc101``), and a finding flake8 would not drop must not be
        yielded. Misjudging the other way is harmless: the finding is dropped either way.
        """
        row = d.start.row
        line = self.lines[row - 1] if 1 <= row <= len(self.lines) else ""
        try:
            from flake8.violation import Violation
        except ImportError:  # not running under flake8 (or a flake8 without this class)
            return False
        violation = Violation(d.code, self.filename, row, d.start.column, d.message, line)
        return bool(violation.is_inline_ignored(False))
