"""Which torch a project supports: ``target-torch-version``, or its declared requirement.

Rules and fixes must not recommend an API the oldest supported torch lacks (a fix writing
``torch.amp.GradScaler("cuda")`` into a torch 2.1 project breaks it). Without a setting, the
lowest version the project's ``torch`` requirement allows is the target: ``torch>=2.1,<3`` is
2.1, ``torch==2.4.*`` is 2.4, ``torch~=2.2.1`` is 2.2. A requirement with no lower bound, or
none at all, means the latest torch (no restriction).
"""

from __future__ import annotations

import configparser
import re
import sys
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any

__all__ = [
    "TorchVersion",
    "declared_torch",
    "format_version",
    "parse_version",
    "project_root",
]

TorchVersion = tuple[int, int]  # (major, minor): torch adds and deprecates APIs per minor

_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.\d+)*\s*")
# ``torch``, ``torch[extra]``, optionally followed by specifiers; markers after ``;``
_REQUIREMENT = re.compile(r"\s*torch\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#@]*)", re.IGNORECASE)
_CLAUSE = re.compile(r"\s*(===|==|~=|>=|>|<=|<|!=)\s*v?(\d+)(?:\.(\d+))?[\w.*+!-]*\s*")
_LOWER_BOUNDS = ("===", "==", "~=", ">=", ">")


def parse_version(value: str) -> TorchVersion | None:
    """``"2.1"`` or ``"2.1.2"`` as ``(2, 1)``; None when it is not a version."""
    match = _VERSION.fullmatch(value)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def format_version(version: TorchVersion) -> str:
    return f"{version[0]}.{version[1]}"


def lowest_allowed(requirement: str) -> TorchVersion | None:
    """The lowest (major, minor) a ``torch`` requirement line allows; None without a bound.

    ``>2.1`` still allows 2.1.1, so it counts as 2.1; ``<`` and ``!=`` do not raise the floor.
    """
    match = _REQUIREMENT.match(requirement) if _is_torch(requirement) else None
    if match is None:
        return None
    lowest: TorchVersion | None = None
    for clause in match.group("spec").split(","):
        found = _CLAUSE.fullmatch(clause)
        if found is None or found.group(1) not in _LOWER_BOUNDS:
            continue
        version = (int(found.group(2)), int(found.group(3) or 0))
        lowest = version if lowest is None else max(lowest, version)
    return lowest


def _is_torch(requirement: str) -> bool:
    name = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
    return name is not None and name.group(1).lower() == "torch"


def declared_torch(root: Path) -> tuple[TorchVersion, str] | None:
    """The lowest torch the project at ``root`` declares, and the file that says so.

    Looked up in ``pyproject.toml`` (``[project]`` dependencies and optional dependencies,
    ``[dependency-groups]``, Poetry's dependencies),
    ``setup.cfg`` (``install_requires`` and ``extras_require``), then ``requirements*.txt``;
    the first file with a bounded ``torch`` requirement wins, its lowest bound across lines.
    Unreadable or malformed files are skipped: they are not mpcheck's to validate.
    """
    sources = [
        (root / "pyproject.toml", _pyproject),
        (root / "setup.cfg", _setup_cfg),
        *((path, _requirements) for path in sorted(root.glob("requirements*.txt"))),
    ]
    for path, read in sources:
        try:
            if not path.is_file():
                continue
            lines = list(read(path))
        except (OSError, UnicodeDecodeError, ValueError, configparser.Error):
            continue
        bounds = [b for b in map(lowest_allowed, lines) if b is not None]
        if bounds:
            return min(bounds), path.name
    return None


def project_root(start: Path, seen: MutableMapping[Path, bool] | None = None) -> Path:
    """The nearest directory at or above ``start`` that declares a project (a
    ``pyproject.toml``, ``setup.cfg`` or ``requirements*.txt``) or is a git checkout's top;
    ``start`` itself when there is none. ``seen``: the answers one run has had (its files'
    directories share their parents, and globbing each parent again for each was seconds)."""
    for directory in (start, *start.parents):
        declares = None if seen is None else seen.get(directory)
        if declares is None:
            declares = _declares(directory)
            if seen is not None:
                seen[directory] = declares
        if declares:
            return directory
    return start


def _declares(directory: Path) -> bool:
    if (directory / "pyproject.toml").is_file() or (directory / "setup.cfg").is_file():
        return True
    return any(directory.glob("requirements*.txt")) or (directory / ".git").exists()


def _pyproject(path: Path) -> Iterable[str]:
    if sys.version_info >= (3, 11):  # imported here: most runs read no pyproject.toml
        import tomllib
    else:  # pragma: no cover - exercised only on Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]
    with open(path, "rb") as fh:
        data: dict[str, Any] = tomllib.load(fh)
    project = data.get("project")
    if isinstance(project, dict):
        yield from _strings(project.get("dependencies"))
        yield from _groups(project.get("optional-dependencies"))
    yield from _groups(data.get("dependency-groups"))  # PEP 735 (uv's dev dependencies)
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if isinstance(poetry, dict):
        yield from _poetry(poetry)


def _groups(table: object) -> Iterable[str]:
    if isinstance(table, dict):
        for group in table.values():
            yield from _strings(group)


def _poetry(poetry: dict[str, Any]) -> Iterable[str]:
    """Poetry's ``torch = "^2.1"`` (or ``{version = ...}``, or a list of them) as requirements."""
    tables = [poetry.get("dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        tables += [g.get("dependencies") for g in groups.values() if isinstance(g, dict)]
    for table in tables:
        if not isinstance(table, dict):
            continue
        for name, spec in table.items():
            if name.lower() != "torch":
                continue
            for one in spec if isinstance(spec, list) else [spec]:
                version = one.get("version") if isinstance(one, dict) else one
                for alternative in version.split("||") if isinstance(version, str) else ():
                    yield "torch" + _POETRY_OPERATOR.sub(_pep440, alternative.strip())


# ``^2.1`` and ``~2.1`` allow 2.1 and up (to the next major or minor); a bare ``2.1`` is ``==``.
_POETRY_OPERATOR = re.compile(r"(?:(?<=^)|(?<=,))\s*(\^|~(?!=)|(?=\d))")


def _pep440(match: re.Match[str]) -> str:
    return ">=" if match.group(1) in ("^", "~") else "=="


def _setup_cfg(path: Path) -> Iterable[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    if parser.has_option("options", "install_requires"):
        yield from parser.get("options", "install_requires").splitlines()
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            yield from value.splitlines()


def _requirements(path: Path) -> Iterable[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            yield line


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
