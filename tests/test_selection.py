"""Rule selection with ruff's semantics and per-file-ignores (mpcheck.ruleset.selection)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcheck.ruleset.selection import (
    PerFileIgnores,
    RuleSelection,
    SelectionError,
    enabled_codes,
    expand_selector,
    per_file_ignored,
    resolve_codes,
    resolve_layers,
)
from mpcheck.settings.config import Settings

CODES = ("MPC001", "MPC002", "MPC100", "MPC101", "MPC102", "MPC103", "MPC110", "MPC201")


def resolve(
    select: tuple[str, ...] | None = None,
    extend_select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
) -> list[str]:
    codes = resolve_codes(CODES, select=select, extend_select=extend_select, ignore=ignore)
    return sorted(codes)


def test_default_selects_everything() -> None:
    assert resolve() == list(CODES)
    assert resolve(("ALL",)) == list(CODES)


def test_prefixes() -> None:
    assert resolve(("MPC1",)) == ["MPC100", "MPC101", "MPC102", "MPC103", "MPC110"]
    assert resolve(("MPC10",)) == ["MPC100", "MPC101", "MPC102", "MPC103"]
    assert resolve(("MPC0", "MPC201")) == ["MPC001", "MPC002", "MPC201"]
    assert resolve(("MPC",)) == list(CODES)


def test_empty_select_selects_nothing_but_extend_adds() -> None:
    assert resolve(()) == []
    assert resolve((), extend_select=("MPC2",)) == ["MPC201"]


def test_more_specific_wins() -> None:
    # ruff: select=["MPC"], ignore=["MPC1"], extend-select=["MPC101"] -> MPC101 back on.
    assert resolve(("MPC",), extend_select=("MPC101",), ignore=("MPC1",)) == [
        "MPC001",
        "MPC002",
        "MPC101",
        "MPC201",
    ]
    # A more specific ignore beats a less specific select.
    assert resolve(("MPC1",), ignore=("MPC10",)) == ["MPC110"]
    # A more specific select beats a less specific ignore, whichever list it is in.
    assert resolve(("MPC103",), ignore=("MPC1",)) == ["MPC103"]
    assert resolve(("ALL", "MPC102"), ignore=("MPC",)) == ["MPC102"]


def test_equal_specificity_ignore_wins() -> None:
    assert resolve(("MPC101",), ignore=("MPC101",)) == []
    assert resolve(("MPC1",), extend_select=("MPC2",), ignore=("MPC2",)) == [
        "MPC100",
        "MPC101",
        "MPC102",
        "MPC103",
        "MPC110",
    ]
    assert resolve(("ALL",), ignore=("ALL",)) == []


def test_ignore_without_select_starts_from_all() -> None:
    assert resolve(ignore=("MPC1", "MPC0")) == ["MPC201"]


@pytest.mark.parametrize("selector", ["MPC999", "MPC3", "MP", "XYZ", "MPC1010", "E501"])
def test_unknown_selector(selector: str) -> None:
    for kwargs in (
        {"select": (selector,)},
        {"ignore": (selector,)},
        {"extend_select": (selector,)},
    ):
        with pytest.raises(SelectionError) as info:
            resolve(**kwargs)
        assert str(info.value) == f"unknown rule selector '{selector}'"
        assert isinstance(info.value, ValueError)


def test_expand_selector() -> None:
    assert expand_selector("MPC11", CODES) == {"MPC110"}
    assert expand_selector("ALL", ["MPC101"]) == {"MPC101"}
    with pytest.raises(SelectionError):
        expand_selector("MPC1", [])


def test_later_layer_wins_regardless_of_specificity() -> None:
    config = RuleSelection(select=("MPC101",))
    cli = RuleSelection(ignore=("MPC1",))
    assert resolve_layers(CODES, [config, cli]) == frozenset()
    config = RuleSelection(ignore=("MPC101",))
    cli = RuleSelection(extend_select=("MPC",))
    assert resolve_layers(CODES, [config, cli]) == frozenset(CODES)
    cli = RuleSelection(select=("MPC2",))
    assert resolve_layers(CODES, [config, cli]) == {"MPC201"}


def test_enabled_codes_reads_settings() -> None:
    settings = Settings(root=Path("/p"), select=("MPC1",), ignore=("MPC11",))
    assert enabled_codes(CODES, settings) == {"MPC100", "MPC101", "MPC102", "MPC103"}


# -- per-file-ignores -----------------------------------------------------------------------------


def settings_with(root: Path, table: dict[str, tuple[str, ...]]) -> Settings:
    return Settings(root=root, per_file_ignores=table)


def test_per_file_ignores_patterns(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path,
        {
            "tests/*": ("MPC101",),  # a directory's contents, recursively (gitignore semantics)
            "__init__.py": ("MPC1",),  # a name at any depth; prefix expanded
            "/scripts/*.py": ("MPC2",),  # anchored at the root
            "legacy/": ("ALL",),
        },
    )
    ignored = PerFileIgnores(settings, CODES)

    def codes(path: str) -> list[str]:
        return sorted(ignored(tmp_path / path))

    assert codes("tests/test_a.py") == ["MPC101"]
    assert codes("tests/unit/deep/test_b.py") == ["MPC101"]
    assert codes("src/tests_x.py") == []
    assert codes("src/pkg/__init__.py") == ["MPC100", "MPC101", "MPC102", "MPC103", "MPC110"]
    assert codes("scripts/run.py") == ["MPC201"]
    assert codes("src/scripts/run.py") == []
    assert codes("legacy/a/b.py") == list(CODES)
    assert codes("legacy.py") == []
    assert codes("tests/__init__.py") == ["MPC100", "MPC101", "MPC102", "MPC103", "MPC110"]


def test_per_file_ignores_negation_applies_to_non_matching_files(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {"!src/**": ("MPC2",)})
    assert per_file_ignored(tmp_path / "src" / "a.py", settings, CODES) == frozenset()
    assert per_file_ignored(tmp_path / "tools" / "a.py", settings, CODES) == {"MPC201"}


def test_per_file_ignores_relative_path_and_outside_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    settings = settings_with(root, {"gen/*.py": ("MPC101",), "conftest.py": ("MPC102",)})
    monkeypatch.chdir(root)
    assert per_file_ignored(Path("gen/a.py"), settings, CODES) == {"MPC101"}
    # Outside the root only slash-less patterns (names) can match, as in ruff.
    assert per_file_ignored(tmp_path / "gen" / "a.py", settings, CODES) == frozenset()
    assert per_file_ignored(tmp_path / "conftest.py", settings, CODES) == {"MPC102"}


def test_per_file_ignores_unknown_selector(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {"a.py": ("MPC999",)})
    with pytest.raises(SelectionError, match=r"^unknown rule selector 'MPC999'$"):
        per_file_ignored(tmp_path / "a.py", settings, CODES)


def test_per_file_ignored_is_empty_without_table(tmp_path: Path) -> None:
    assert per_file_ignored(tmp_path / "a.py", Settings(root=tmp_path)) == frozenset()
    assert not PerFileIgnores(Settings(root=tmp_path), CODES)


def test_per_file_ignored_defaults_to_registered_rules(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {"a.py": ("MPC101",)})
    assert per_file_ignored(tmp_path / "a.py", settings) == {"MPC101"}
    assert per_file_ignored(tmp_path / "b.py", settings) == frozenset()
