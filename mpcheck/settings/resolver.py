"""Which configuration governs which file: ruff's hierarchical configuration.

A file is governed by the closest config file among its ancestors, whose paths are relative to
its own directory; a file with none above it falls back to the config found from the working
directory, else the defaults. ``--config`` forces one config for everything, and command-line
options are layered over whichever config applies. ``mpcheck check`` (to walk and to check) and
the flake8 plugin both ask a :class:`Resolver`, so they cannot disagree about a file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mpcheck.codes import ENGINE_CODES
from mpcheck.ruleset.rule import Rule, all_rules
from mpcheck.ruleset.selection import PerFileIgnores, enabled_codes
from mpcheck.settings.config import ConfigError, Settings, config_in, load_settings
from mpcheck.settings.torch_target import project_root

__all__ = ["ENGINE_CODES", "Project", "Resolver"]

# Reported by the engine itself (syntax and internal errors): always on, never a "rule".


@dataclass(frozen=True)
class Project:
    """What one configuration means for the files it governs: rules, per-file-ignores."""

    settings: Settings
    selected: frozenset[str]
    active: tuple[type[Rule], ...]
    per_file_ignores: PerFileIgnores

    def rules_for(self, path: Path | str) -> tuple[type[Rule], ...]:
        """The active rules minus those ``per-file-ignores`` turns off for ``path``."""
        ignored = self.per_file_ignores(path) if self.per_file_ignores else None
        return tuple(r for r in self.active if r.code not in ignored) if ignored else self.active

    def reports(self, code: str) -> bool:
        """Whether a finding with ``code`` is shown (engine errors always are)."""
        return code in self.selected or code in ENGINE_CODES


class Resolver:
    """The :class:`Project` governing each directory, every lookup and parse cached.

    A directory's config is found once (from the cache of its parent chain), each config file
    is read and validated once, and an invalid one is remembered and raised again for every
    file it governs. ``overrides`` applies the command line to each configuration loaded.
    """

    def __init__(
        self,
        cwd: Path,
        *,
        config: Path | None = None,
        overrides: Callable[[Settings], Settings] | None = None,
        rules: Sequence[type[Rule]] | None = None,
    ) -> None:
        self.cwd = Path(os.path.abspath(cwd))
        self._forced = None if config is None else Path(os.path.abspath(self.cwd / config))
        self._overrides = overrides
        self._rules = tuple(all_rules() if rules is None else rules)
        self._config_of: dict[str, Path | ConfigError | None] = {}
        self._projects: dict[tuple[Path | None, Path | None], Project | ConfigError] = {}
        self._declaring: dict[str, Path] = {}
        self._declares: dict[Path, bool] = {}  # directory -> declares a project

    def project_for(self, path: Path | str) -> Project:
        """The project governing the file ``path``."""
        return self.project_for_dir(os.path.dirname(os.path.abspath(path)))

    def settings_for(self, directory: str) -> Settings:
        """The settings governing ``directory`` (what discovery asks of each one it enters)."""
        return self.project_for_dir(directory).settings

    def project_for_dir(self, directory: str) -> Project:
        """The project of the closest config at or above ``directory``, else the cwd's."""
        config, declaring = self._forced, None
        if config is None:
            config = self._closest(os.path.abspath(directory))
            if config is None:
                config = self._closest(str(self.cwd))
            if config is None:  # defaults, with the torch the file's own project declares
                declaring = self._declaring_root(os.path.abspath(directory))
        project = self._projects.get((config, declaring))
        if project is None:
            try:
                project = self._load(config, declaring)
            except ConfigError as exc:
                project = exc
            self._projects[(config, declaring)] = project
        if isinstance(project, ConfigError):
            raise project
        return project

    def _closest(self, directory: str) -> Path | None:
        """The config file at or above ``directory``, filling the cache for the whole chain."""
        chain: list[str] = []
        current = directory
        found: Path | ConfigError | None = None
        while current not in self._config_of:
            chain.append(current)
            try:
                found = config_in(Path(current), cwd=self.cwd)
            except ConfigError as exc:  # a broken pyproject.toml that may hold the table
                found = exc
            parent = os.path.dirname(current)
            if found is not None or parent == current:
                break
            current = parent
        else:
            found = self._config_of[current]
        for visited in chain:
            self._config_of[visited] = found
        if isinstance(found, ConfigError):
            raise found
        return found

    def _declaring_root(self, directory: str) -> Path:
        """The project directory at or above ``directory`` (``project_root``), cached."""
        found = self._declaring.get(directory)
        if found is None:
            found = project_root(Path(directory), self._declares)
            self._declaring[directory] = found
        return found

    def _load(self, config: Path | None, declaring: Path | None = None) -> Project:
        codes = [r.code for r in self._rules]
        settings = load_settings(config, cwd=self.cwd, known_codes=codes, project=declaring)
        if config is not None and config == self._forced:
            # as in ruff: the paths in a ``--config`` file are relative to the working directory
            settings = replace(settings, root=self.cwd)
        if self._overrides is not None:
            settings = self._overrides(settings)
        selected = enabled_codes(codes, settings)
        active = tuple(r for r in self._rules if r.code in selected and r.code not in ENGINE_CODES)
        return Project(settings, selected, active, PerFileIgnores(settings, codes))
