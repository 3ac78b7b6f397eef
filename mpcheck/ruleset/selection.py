"""Which rules run where: ruff's select/ignore semantics and per-file-ignores.

Rule codes are only known once the rules are registered, so this is where command-line
selectors are checked for existence (a config file's are checked as it is loaded with the known
codes, so the error can name the file and the key).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpcheck.settings.config import Settings, selector_covers
from mpcheck.settings.globs import GlobPattern, parse_pattern

__all__ = [
    "PerFileIgnores",
    "RuleSelection",
    "SelectionError",
    "enabled_codes",
    "expand_selector",
    "per_file_ignored",
    "resolve_codes",
    "resolve_layers",
    "selector_matches",
]


class SelectionError(ValueError):
    """A selector (``MPC999``, ``XYZ``) that matches no known rule."""


@dataclass(frozen=True)
class RuleSelection:
    """One layer of rule selection (a config file, then the command line), as in ruff.

    ``select=None`` keeps what the previous layer selected (for the first layer: every rule).
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def selector_matches(selector: str, code: str) -> bool:
    """``ALL`` matches everything; ``MPC1`` matches ``MPC101``; ``MP`` matches nothing."""
    return selector_covers(selector, code)


def _specificity(selector: str) -> int:
    # ALL < MPC < MPC1 < MPC10 < MPC101, like ruff's Specificity enum.
    return -1 if selector == "ALL" else len(selector)


def expand_selector(selector: str, all_codes: Iterable[str]) -> frozenset[str]:
    """The codes a selector stands for; an unknown selector is a :class:`SelectionError`."""
    codes = frozenset(code for code in all_codes if selector_matches(selector, code))
    if not codes:
        raise SelectionError(f"unknown rule selector '{selector}'")
    return codes


def resolve_layers(all_codes: Iterable[str], layers: Sequence[RuleSelection]) -> frozenset[str]:
    """Apply selection layers in order, as ruff does for config files and CLI options.

    Within a layer, selectors are applied from least to most specific, and at equal
    specificity ``ignore`` wins. A layer with ``select`` replaces the current set; one without
    only adds and removes codes. The first layer starts from every rule.
    """
    known = tuple(all_codes)
    enabled = frozenset(known)
    for layer in layers:
        updates: dict[str, bool] = {}
        selected = [*(layer.select or ()), *layer.extend_select]
        specificities = sorted({_specificity(s) for s in (*selected, *layer.ignore)})
        for spec in specificities:
            for selector in selected:
                if _specificity(selector) == spec:
                    updates.update(dict.fromkeys(expand_selector(selector, known), True))
            for selector in layer.ignore:
                if _specificity(selector) == spec:
                    updates.update(dict.fromkeys(expand_selector(selector, known), False))
        if layer.select is not None:
            enabled = frozenset(code for code, on in updates.items() if on)
        else:
            on = {code for code, value in updates.items() if value}
            enabled = (enabled | on) - {code for code, value in updates.items() if not value}
    return enabled


def resolve_codes(
    all_codes: Iterable[str],
    *,
    select: Sequence[str] | None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
) -> frozenset[str]:
    """The enabled codes for one select/extend-select/ignore triple (``select=None``: all)."""
    layer = RuleSelection(
        None if select is None else tuple(select), tuple(extend_select), tuple(ignore)
    )
    return resolve_layers(all_codes, [layer])


def enabled_codes(all_codes: Iterable[str], settings: Settings) -> frozenset[str]:
    """The enabled codes for ``settings`` (CLI overrides are already folded in)."""
    return resolve_codes(
        all_codes,
        select=settings.select,
        extend_select=settings.extend_select,
        ignore=settings.ignore,
    )


class PerFileIgnores:
    """``per-file-ignores`` compiled once, then asked once per file.

    Patterns are gitignore-style and relative to ``settings.root``; a pattern matches a file
    when it matches the file or a directory above it (so ``tests/`` covers ``tests/a/b.py``),
    and a slash-less pattern matches a name at any depth. A leading ``!`` inverts the match,
    as in ruff: the codes are ignored in every file the rest of the pattern does *not* match.
    """

    def __init__(self, settings: Settings, all_codes: Iterable[str]) -> None:
        known = tuple(all_codes)
        root = os.path.abspath(settings.root)
        self._root_prefix = root if root.endswith(os.sep) else root + os.sep
        self._entries: list[tuple[GlobPattern, frozenset[str]]] = []
        for pattern_text, selectors in settings.per_file_ignores.items():
            pattern = parse_pattern(pattern_text)
            if pattern is None:
                continue
            codes: frozenset[str] = frozenset()
            for selector in selectors:
                codes |= expand_selector(selector, known)
            self._entries.append((pattern, codes))

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __call__(self, path: Path | str) -> frozenset[str]:
        """The codes ignored in ``path`` (absolute, or relative to the current directory)."""
        if not self._entries:
            return frozenset()
        full = os.path.abspath(path)
        rel: str | None = None
        if full.startswith(self._root_prefix):
            rel = full[len(self._root_prefix) :].replace(os.sep, "/")
        name = os.path.basename(full)
        ignored: frozenset[str] = frozenset()
        for pattern, codes in self._entries:
            if pattern.matches_within(rel, name) != pattern.negated:
                ignored |= codes
        return ignored


def _registered_codes() -> tuple[str, ...]:
    from mpcheck.ruleset.rule import all_rules  # late: the registry imports libcst and every rule

    return tuple(rule.code for rule in all_rules())


_cache: list[tuple[Settings, tuple[str, ...], PerFileIgnores]] = []


def per_file_ignored(
    path: Path | str, settings: Settings, all_codes: Iterable[str] | None = None
) -> frozenset[str]:
    """The codes ``per-file-ignores`` turns off for ``path`` (prefixes expanded).

    ``all_codes`` defaults to the registered rules. The compiled patterns of the last
    settings are kept, so calling this once per file does not recompile them.
    """
    if not settings.per_file_ignores:
        return frozenset()
    codes = _registered_codes() if all_codes is None else tuple(all_codes)
    if not (_cache and _cache[0][0] is settings and _cache[0][1] == codes):
        _cache[:] = [(settings, codes, PerFileIgnores(settings, codes))]
    return _cache[0][2](path)
