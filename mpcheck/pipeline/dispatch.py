"""Fans a walk's sites out to the rules that implement the matching hook."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mpcheck.codes import INTERNAL_ERROR
from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.ruleset.hooks import HOOKS, Site, SiteKind
from mpcheck.ruleset.rule import Rule

__all__ = ["Dispatch"]


class Dispatch:
    """Fans the walk's sites out to the rules that implement the matching hook.

    A rule that raises is switched off for the rest of the file and remembered: one rule's
    bug must not take the other rules' findings on the file with it.
    """

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._rules = tuple(rules)
        self._handlers: dict[str, list[tuple[Rule, Callable[[Any], None]]]] = {
            hook.kind: [(r, getattr(r, hook.method)) for r in rules if hook.method in r.hooks()]
            for hook in HOOKS
        }
        self.failed: dict[str, Exception] = {}  # rule code -> what it raised first

    def wants(self, kind: SiteKind) -> bool:
        return bool(self._handlers[kind])

    def deliver(self, kind: SiteKind, site: Site) -> None:
        for rule, handler in self._handlers[kind]:
            if rule.code not in self.failed:
                self.guarded(rule, handler, site)

    def guarded(self, rule: Rule, handler: Callable[..., None], *args: Any) -> None:
        try:
            handler(*args)
        except RecursionError:
            raise  # the file is too deep for every rule: the caller says so once
        except Exception as exc:  # noqa: BLE001 - isolated per rule, reported below
            self.failed.setdefault(rule.code, exc)

    def finish(self) -> None:
        """Each rule's :meth:`~mpcheck.ruleset.rule.Rule.finish`, the file walked."""
        for rule in self._rules:
            if rule.code not in self.failed:
                self.guarded(rule, rule.finish)

    def failures(self, filename: str) -> list[Diagnostic]:
        """An internal error at the file's start for each rule that raised."""
        code, name = INTERNAL_ERROR
        start, end = Position(1, 1), Position(1, 2)
        return [
            Diagnostic(
                code,
                name,
                f"rule {rule} failed on this file ({type(exc).__name__}: {exc}); its findings "
                "here may be incomplete, the other rules' are not; please report it",
                Severity.ERROR,
                filename,
                start,
                end,
                noqa_row=start.row,
            )
            for rule, exc in sorted(self.failed.items())
        ]
