"""Finding and validating mpcheck's configuration, following ruff's conventions.

The configuration lives in ``.mpcheck.toml`` / ``mpcheck.toml`` (the whole file) or in the
``[tool.mpcheck]`` table of ``pyproject.toml``. Which of several files governs a given file is
:mod:`mpcheck.settings.resolver`'s business; this module finds and reads one. Every mistake is a
:class:`ConfigError` with a one-line message naming the file and the key, so the CLI can exit
with code 2 instead of silently running with a configuration the user did not write.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from mpcheck.settings.globs import glob_problem, rebase_pattern
from mpcheck.settings.torch_target import TorchVersion, declared_torch, parse_version, project_root

__all__ = [
    "CONFIG_FILENAMES",
    "DEFAULT_EXCLUDE",
    "ConfigError",
    "Settings",
    "config_in",
    "find_config",
    "is_valid_selector",
    "selector_covers",
    "load_settings",
    "with_overrides",
]

# Same list as ruff's default `exclude`, plus caches ruff leaves to `.gitignore`.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".mpcheck_cache",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pypackages__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
    "__pycache__",
    ".ipynb_checkpoints",
)

# Looked up in this order in each directory, as ruff does with .ruff.toml, ruff.toml, pyproject.
CONFIG_FILENAMES: tuple[str, ...] = (".mpcheck.toml", "mpcheck.toml", "pyproject.toml")

_SELECTOR_RE = re.compile(r"ALL|[A-Z]+[0-9]*")
_SELECTOR_PARTS = re.compile(r"([A-Z]+)([0-9]*)")

_CODE_LIST_KEYS = ("select", "extend-select", "ignore")
_PATTERN_LIST_KEYS = ("exclude", "extend-exclude")
_BOOL_KEYS = (
    "module-half-capable",
    "models-run-in-half",
    "open-world-premises",
    "respect-gitignore",
    "include-notebooks",
)
KNOWN_KEYS: tuple[str, ...] = (
    *_CODE_LIST_KEYS,
    "per-file-ignores",
    *_PATTERN_LIST_KEYS,
    *_BOOL_KEYS,
    "max-file-size",
    "cache-dir",
    "baseline",
    "fail-on",
    "target-torch-version",
    "extend",
    "follow-imports",
    "src",
)
_ACCUMULATED_KEYS = ("extend-select", "extend-exclude")
_EXTENDS = " extends"  # not a key anyone can write: the files ``extend`` led to, in order
FAIL_ON = ("error", "warning")  # the least severe finding that makes the exit status 1
# "normal": imports of the project's own files are followed; "site": installed libraries too;
# "skip": none, each file is checked alone
FOLLOW_IMPORTS = ("normal", "site", "skip")
# libcst holds about 0.8 GB per MB of source while a file is analysed: above this size a file
# is skipped (MPC002), so one generated file cannot exhaust the machine's memory.
DEFAULT_MAX_FILE_SIZE = 1024 * 1024
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(|b|kb|kib|mb|mib|gb|gib)\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}
_UNITS |= {"gb": 1000**3, "gib": 1024**3}


def parse_size(value: str | int) -> int | None:
    """``1048576``, ``"512KiB"``, ``"2 MB"`` as a number of bytes; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    match = _SIZE.fullmatch(value)
    if match is None:
        return None
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    return size if size > 0 else None


class ConfigError(Exception):
    """A configuration problem; the message is one line naming the file and the key."""


def _empty_mapping() -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The resolved configuration; patterns are relative to ``root``."""

    root: Path
    config_path: Path | None = None
    select: tuple[str, ...] | None = None  # None: every rule
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=_empty_mapping)
    exclude: tuple[str, ...] | None = None  # None: DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    module_half_capable: bool = True
    # the project is a model library whose users run every module of it in half (as they do
    # diffusers' ``ModelMixin``): that is evidence, not a premise (issue 36)
    models_run_in_half: bool = False
    # report latent hazards whose premise rests only on a half path mpcheck cannot follow (a
    # cast of a model of unknown class, a wrapper whose setting it cannot read): issue 36
    open_world_premises: bool = False
    respect_gitignore: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    include_notebooks: bool = True  # directory walks take *.ipynb too
    cache_dir: Path | None = None  # absolute; None: ``.mpcheck_cache`` at ``root``
    baseline: Path | None = None  # absolute: findings recorded there are not reported
    fail_on: str = "warning"  # "error": warnings are shown but exit 0
    # The oldest torch the project supports (None: the latest); rules recommend only what it has.
    target_torch_version: TorchVersion | None = None
    # Where that came from: "target-torch-version", "--target-torch-version" or a file name.
    target_torch_source: str | None = None
    extends: tuple[Path, ...] = ()  # the files ``extend`` built this one on, nearest first
    # "site": summarise imported installed libraries too; "skip": each file alone
    follow_imports: str = "normal"
    # Directories imports are resolved from besides the project root (absolute), as ruff's
    # ``src``; None: ``src/`` under ``root`` where it exists (a src-layout project).
    src: tuple[Path, ...] | None = None

    @property
    def source_roots(self) -> tuple[Path, ...]:
        """The configured ``src`` directories, else ``<root>/src`` when there is one."""
        if self.src is not None:
            return self.src
        default = self.root / "src"
        return (default,) if default.is_dir() else ()

    @property
    def effective_exclude(self) -> tuple[str, ...]:
        """``exclude`` (or the defaults) followed by ``extend-exclude``."""
        base = DEFAULT_EXCLUDE if self.exclude is None else self.exclude
        return (*base, *self.extend_exclude)


def is_valid_selector(value: str) -> bool:
    """Whether ``value`` looks like a code or prefix (``MPC``, ``MPC1``, ``MPC101``, ``ALL``)."""
    return _SELECTOR_RE.fullmatch(value) is not None


def selector_covers(outer: str, inner: str) -> bool:
    """Whether every code ``inner`` selects is also selected by ``outer`` (``MPC1`` ⊇ ``MPC10``)."""
    if outer == "ALL":
        return True
    a, b = _SELECTOR_PARTS.fullmatch(outer), _SELECTOR_PARTS.fullmatch(inner)
    if a is None or b is None:
        return outer == inner
    return a.group(1) == b.group(1) and b.group(2).startswith(a.group(2))


def _display(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    # imported here: a run in a tree without a configuration file never parses TOML
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised only on Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

    try:
        with open(path, "rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
            return data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: invalid TOML: file is not valid UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{shown}: invalid TOML: values nested too deeply") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror or exc}") from None


def _is_pyproject(path: Path) -> bool:
    return path.name == "pyproject.toml"


def _has_mpcheck_table(pyproject: Path, shown: str) -> bool:
    # Cheap text test first: an unrelated (or even broken) pyproject must not cost a parse.
    try:
        text = pyproject.read_bytes()
    except OSError as exc:  # it may hold our table: ignoring it would check with other rules
        raise ConfigError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    if b"mpcheck" not in text:
        return False
    tool = _read_toml(pyproject, shown).get("tool")
    return isinstance(tool, dict) and "mpcheck" in tool


def config_in(directory: Path, *, cwd: Path | None = None) -> Path | None:
    """The config file of ``directory`` itself, if any (ruff's precedence among the names).

    A broken pyproject.toml that may hold the table is an error, named relative to ``cwd``.
    """
    for name in CONFIG_FILENAMES:
        candidate = directory / name
        if not candidate.is_file():
            continue
        shown = str(candidate) if cwd is None else _display(candidate, cwd)
        if not _is_pyproject(candidate) or _has_mpcheck_table(candidate, shown):
            return candidate
    return None


def find_config(start: Path) -> Path | None:
    """The nearest config file at or above ``start``; a pyproject without the table is skipped."""
    directory = Path(os.path.abspath(start))
    if not directory.is_dir():
        directory = directory.parent
    for candidate_dir in (directory, *directory.parents):
        found = config_in(candidate_dir)
        if found is not None:
            return found
    return None


def _type_name(value: object) -> str:
    names = {bool: "boolean", str: "string", int: "integer", float: "float"}
    names.update({dict: "table", list: "array"})
    return names.get(type(value), type(value).__name__)


class _Validator:
    """Turns the raw TOML table into typed values, naming the file and key on errors."""

    def __init__(self, shown: str, table_name: str | None, known: Collection[str] | None) -> None:
        self.shown = shown
        self.where = f" in [{table_name}]" if table_name else ""
        self.known = known

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{self.shown}: {message}")

    def key(self, key: str) -> str:
        return f"'{key}'{self.where}"

    def unknown(self, key: str) -> ConfigError:
        hint = ""
        import difflib

        guesses = difflib.get_close_matches(key.replace("_", "-"), KNOWN_KEYS, n=1, cutoff=0.6)
        if guesses:
            hint = f" (did you mean '{guesses[0]}'?)"
        return self.error(f"unknown key '{key}'{self.where}{hint}")

    def strings(self, key: str, value: object, label: str | None = None) -> tuple[str, ...]:
        label = label or self.key(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            got = _type_name(value)
            if isinstance(value, list):
                bad = next(v for v in value if not isinstance(v, str))
                got = f"an array containing a {_type_name(bad)}"
            raise self.error(f"{label} must be an array of strings, got {got}")
        return tuple(value)

    def codes(self, key: str, value: object, label: str | None = None) -> tuple[str, ...]:
        label = label or self.key(key)
        codes = self.strings(key, value, label)
        for code in codes:
            if not is_valid_selector(code):
                raise self.error(
                    f"invalid rule selector '{code}' in {label} "
                    "(expected a code or prefix like 'MPC', 'MPC1', 'MPC101' or 'ALL')"
                )
            if self.known is not None and not any(selector_covers(code, k) for k in self.known):
                raise self.error(f"unknown rule selector '{code}' in {label}")
        return codes

    def patterns(self, key: str, value: object) -> tuple[str, ...]:
        patterns = self.strings(key, value)
        for pattern in patterns:
            if not pattern.strip():
                raise self.error(f"empty pattern in {self.key(key)}")
            if pattern.startswith("!"):
                raise self.error(
                    f"negated pattern '{pattern}' in {self.key(key)} is not supported "
                    "(an excluded directory is never entered)"
                )
            problem = glob_problem(pattern)
            if problem:
                raise self.error(f"invalid pattern '{pattern}' in {self.key(key)}: {problem}")
        return patterns

    def path(self, key: str, value: object) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{self.key(key)} must be a path (a string), got {_type_name(value)}")
        return Path(os.path.expanduser(value))

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.error(f"{self.key(key)} must be true or false, got {_type_name(value)}")
        return value

    def choice(self, key: str, value: object, choices: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in choices:
            expected = " or ".join(f'"{c}"' for c in choices)
            raise self.error(f"{self.key(key)} must be {expected}, got {value!r}")
        return value

    def torch_version(self, key: str, value: object) -> TorchVersion:
        version = parse_version(value) if isinstance(value, str) else None
        if version is None:
            raise self.error(f'{self.key(key)} must be a version such as "2.1", got {value!r}')
        return version

    def size(self, key: str, value: object) -> int:
        size = parse_size(value) if isinstance(value, (str, int)) else None
        if size is None:
            raise self.error(
                f'{self.key(key)} must be a positive size such as 1048576 or "2MiB", got {value!r}'
            )
        return size

    def per_file(self, key: str, value: object) -> Mapping[str, tuple[str, ...]]:
        if not isinstance(value, dict):
            raise self.error(f"{self.key(key)} must be a table, got {_type_name(value)}")
        result: dict[str, tuple[str, ...]] = {}
        for pattern, codes in value.items():
            label = f"'{key}' entry '{pattern}'{self.where}"
            if not pattern.strip() or pattern == "!":
                raise self.error(f"empty pattern in {self.key(key)}")
            problem = glob_problem(pattern.removeprefix("!"))
            if problem:
                raise self.error(f"invalid pattern '{pattern}' in {self.key(key)}: {problem}")
            result[pattern] = self.codes(key, codes, label)
        return MappingProxyType(result)


def load_settings(
    config_path: Path | None,
    *,
    cwd: Path,
    known_codes: Collection[str] | None = None,
    project: Path | None = None,
) -> Settings:
    """Read and validate ``config_path``; without one, defaults rooted at ``cwd``, with the
    torch that ``project`` (the checked file's project; else the cwd's) declares.

    With ``known_codes``, a selector matching none of them is an error naming the file and key.
    """
    cwd = Path(os.path.abspath(cwd))
    if config_path is None:  # the requirement files of the project the file is in
        return _with_declared_torch(Settings(root=cwd), project or project_root(cwd))
    path = Path(os.path.abspath(cwd / config_path))
    values = _values(path, cwd, known_codes, (path,))
    settings = Settings(
        root=path.parent,
        config_path=path,
        select=values.get("select"),
        extend_select=values.get("extend-select", ()),
        ignore=values.get("ignore", ()),
        per_file_ignores=values.get("per-file-ignores", _empty_mapping()),
        exclude=values.get("exclude"),
        extend_exclude=values.get("extend-exclude", ()),
        module_half_capable=values.get("module-half-capable", True),
        models_run_in_half=values.get("models-run-in-half", False),
        open_world_premises=values.get("open-world-premises", False),
        respect_gitignore=values.get("respect-gitignore", True),
        max_file_size=values.get("max-file-size", DEFAULT_MAX_FILE_SIZE),
        include_notebooks=values.get("include-notebooks", True),
        cache_dir=values.get("cache-dir"),
        baseline=values.get("baseline"),
        fail_on=values.get("fail-on", "warning"),
        target_torch_version=values.get("target-torch-version"),
        target_torch_source="target-torch-version" if "target-torch-version" in values else None,
        extends=values.get(_EXTENDS, ()),
        follow_imports=values.get("follow-imports", "normal"),
        src=values.get("src"),
    )
    if settings.models_run_in_half and not settings.module_half_capable:
        shown = _display(path, cwd)
        raise ConfigError(
            f"{shown}: 'models-run-in-half = true' needs modules checked as half-capable,"
            " but 'module-half-capable' is false"
        )
    return settings if settings.target_torch_version else _with_declared_torch(settings)


def _table(path: Path, shown: str) -> tuple[dict[str, Any], str | None]:
    """The configuration table of ``path`` and its name in messages."""
    if not path.is_file():
        raise ConfigError(f"{shown}: No such file or directory")
    data = _read_toml(path, shown)
    if not _is_pyproject(path):
        return data, None
    tool = data.get("tool", {})
    data = tool.get("mpcheck", {}) if isinstance(tool, dict) else {}
    if not isinstance(data, dict):
        raise ConfigError(f"{shown}: [tool.mpcheck] must be a table, got {_type_name(data)}")
    return data, "tool.mpcheck"


def _values(
    path: Path, cwd: Path, known_codes: Collection[str] | None, chain: tuple[Path, ...]
) -> dict[str, Any]:
    """The validated values of ``path``, over those of the file its ``extend`` names.

    Paths are made absolute and patterns relative to ``path``'s directory here, so each is
    read relative to the file that declares it whatever extends it.
    """
    shown = _display(path, cwd)
    data, table_name = _table(path, shown)
    check = _Validator(shown, table_name, known_codes)
    values: dict[str, Any] = {}
    inherited: dict[str, Any] = {}
    for key, value in data.items():
        if key not in KNOWN_KEYS:
            raise check.unknown(key)
        if key == "extend":
            parent = Path(os.path.abspath(path.parent / check.path(key, value)))
            if parent in chain:
                cycle = " -> ".join(_display(p, cwd) for p in (*chain, parent))
                raise check.error(f"{check.key(key)} makes a cycle: {cycle}")
            inherited = _values(parent, cwd, known_codes, (*chain, parent))
            inherited = _rebased(inherited, parent.parent, path.parent)
            values[_EXTENDS] = (parent, *inherited.get(_EXTENDS, ()))
        elif key in _CODE_LIST_KEYS:
            values[key] = check.codes(key, value)
        elif key in _PATTERN_LIST_KEYS:
            values[key] = check.patterns(key, value)
        elif key in _BOOL_KEYS:
            values[key] = check.boolean(key, value)
        elif key == "max-file-size":
            values[key] = check.size(key, value)
        elif key in ("cache-dir", "baseline"):
            values[key] = path.parent / check.path(key, value)
        elif key == "src":
            paths = value if isinstance(value, list) else [value]
            values[key] = tuple(
                Path(os.path.abspath(path.parent / check.path(key, p))) for p in paths
            )
        elif key == "fail-on":
            values[key] = check.choice(key, value, FAIL_ON)
        elif key == "target-torch-version":
            values[key] = check.torch_version(key, value)
        elif key == "follow-imports":
            values[key] = check.choice(key, value, FOLLOW_IMPORTS)
        else:
            values[key] = check.per_file(key, value)
    merged = inherited | values  # the extending file's own settings win
    for key in _ACCUMULATED_KEYS:  # ``extend-*`` add up along the chain, as in ruff
        if key in inherited and key in values:
            merged[key] = (*inherited[key], *values[key])
    return merged


def _rebased(values: dict[str, Any], source: Path, root: Path) -> dict[str, Any]:
    """An extended file's patterns, written relative to ``source``, relative to ``root``."""
    out = dict(values)
    for key in _PATTERN_LIST_KEYS:
        if key in out:
            out[key] = tuple(r for p in out[key] for r in rebase_pattern(p, source, root))
    if "per-file-ignores" in out:
        table: dict[str, tuple[str, ...]] = {}
        for pattern, codes in out["per-file-ignores"].items():
            negated = "!" if pattern.startswith("!") else ""
            for rebased in rebase_pattern(pattern.removeprefix("!"), source, root):
                table[negated + rebased] = codes
        out["per-file-ignores"] = MappingProxyType(table)
    return out


def _with_declared_torch(settings: Settings, root: Path | None = None) -> Settings:
    """``settings`` targeting the torch the requirement files at ``root`` (else at the
    configuration's directory) declare, if any."""
    declared = declared_torch(root or settings.root)
    if declared is None:
        return settings
    version, source = declared
    return replace(settings, target_torch_version=version, target_torch_source=source)


def _cli_codes(option: str, values: Sequence[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    for code in values:
        if not is_valid_selector(code):
            raise ConfigError(
                f"{option}: invalid rule selector '{code}' "
                "(expected a code or prefix like 'MPC', 'MPC1', 'MPC101' or 'ALL')"
            )
    return tuple(values)


def _cli_patterns(
    option: str, values: Sequence[str] | None, cwd: Path | None, root: Path
) -> tuple[str, ...] | None:
    if values is None:
        return None
    for pattern in values:
        if not pattern.strip() or pattern.startswith("!"):
            raise ConfigError(f"{option}: invalid exclude pattern '{pattern}'")
        problem = glob_problem(pattern)
        if problem:
            raise ConfigError(f"{option}: invalid exclude pattern '{pattern}': {problem}")
    return tuple(rebased for p in values for rebased in rebase_pattern(p, cwd, root))


def _kept(selectors: tuple[str, ...], overriders: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for s in selectors if not any(selector_covers(o, s) for o in overriders))


def with_overrides(
    settings: Settings,
    *,
    select: Sequence[str] | None = None,
    extend_select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    extend_exclude: Sequence[str] | None = None,
    respect_gitignore: bool | None = None,
    module_half_capable: bool | None = None,
    max_file_size: int | None = None,
    include_notebooks: bool | None = None,
    target_torch_version: TorchVersion | None = None,
    follow_imports: str | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Layer CLI options over ``settings`` with ruff's precedence.

    ``select`` replaces the configured selection; ``extend_select``/``ignore`` act as a layer
    applied after the config file's (so ``--ignore MPC1`` beats a configured ``MPC101`` and
    ``--extend-select MPC1`` beats a configured ``ignore = ["MPC101"]``), folded into the flat
    fields; ``exclude`` replaces and ``extend_exclude`` extends. Path patterns given on the command
    line are relative to ``cwd`` (like ruff) and rewritten relative to the config root, which
    may be above, at or below ``cwd``.
    """
    cli_select = _cli_codes("--select", select)
    cli_extend = _cli_codes("--extend-select", extend_select) or ()
    cli_ignore = _cli_codes("--ignore", ignore) or ()
    new_select: tuple[str, ...] | None = cli_select
    new_extend, new_ignore = cli_extend, cli_ignore
    if cli_select is None:
        # ruff applies the CLI as a later layer that wins whatever the specificity; folding it
        # into one layer is exact once the config selectors it overrides are dropped.
        new_select = None if settings.select is None else _kept(settings.select, cli_ignore)
        new_extend = (*_kept(settings.extend_select, cli_ignore), *cli_extend)
        new_ignore = (*_kept(settings.ignore, cli_extend), *cli_ignore)

    here = None if cwd is None else Path(os.path.abspath(cwd))
    root = Path(os.path.abspath(settings.root))
    new_exclude = _cli_patterns("--exclude", exclude, here, root)
    more_exclude = _cli_patterns("--extend-exclude", extend_exclude, here, root) or ()
    return replace(
        settings,
        select=new_select,
        extend_select=new_extend,
        ignore=new_ignore,
        exclude=settings.exclude if new_exclude is None else new_exclude,
        extend_exclude=(*settings.extend_exclude, *more_exclude),
        respect_gitignore=(
            settings.respect_gitignore if respect_gitignore is None else respect_gitignore
        ),
        module_half_capable=(
            settings.module_half_capable if module_half_capable is None else module_half_capable
        ),
        max_file_size=settings.max_file_size if max_file_size is None else max_file_size,
        include_notebooks=(
            settings.include_notebooks if include_notebooks is None else include_notebooks
        ),
        target_torch_version=target_torch_version or settings.target_torch_version,
        target_torch_source=(
            "--target-torch-version" if target_torch_version else settings.target_torch_source
        ),
        follow_imports=settings.follow_imports if follow_imports is None else follow_imports,
    )
