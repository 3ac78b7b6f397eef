"""Config discovery, validation and CLI overrides (mpcheck.settings.config)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from mpcheck.ruleset.selection import RuleSelection, resolve_codes, resolve_layers
from mpcheck.settings import config
from mpcheck.settings.config import (
    DEFAULT_EXCLUDE,
    ConfigError,
    Settings,
    config_in,
    find_config,
    load_settings,
    selector_covers,
    with_overrides,
)
from mpcheck.settings.resolver import Resolver


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path, cwd: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, cwd=cwd)
    return str(info.value)


# -- find_config --------------------------------------------------------------------------------


def test_find_config_walks_up_to_the_nearest(tmp_path: Path) -> None:
    far = write(tmp_path / "mpcheck.toml", "")
    near = write(tmp_path / "a" / ".mpcheck.toml", "")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert find_config(deep) == near
    assert find_config(tmp_path / "a") == near
    assert find_config(tmp_path) == far


def test_find_config_from_a_file_starts_at_its_directory(tmp_path: Path) -> None:
    config = write(tmp_path / "mpcheck.toml", "")
    source = write(tmp_path / "pkg" / "mod.py", "")
    assert find_config(source) == config


def test_find_config_skips_pyproject_without_table(tmp_path: Path) -> None:
    outer = write(tmp_path / "pyproject.toml", "[tool.mpcheck]\nselect = ['MPC']\n")
    # Mentions mpcheck (as a dependency) but has no [tool.mpcheck] table: skipped, like ruff.
    write(
        tmp_path / "pkg" / "pyproject.toml",
        '[project]\nname = "x"\ndependencies = ["mpcheck"]\n[tool.ruff]\nline-length = 99\n',
    )
    write(tmp_path / "pkg" / "sub" / "pyproject.toml", "[tool.black]\n")
    assert find_config(tmp_path / "pkg" / "sub") == outer


def test_find_config_accepts_dotted_table_in_pyproject(tmp_path: Path) -> None:
    project = write(tmp_path / "pyproject.toml", "[tool.mpcheck.per-file-ignores]\n")
    assert find_config(tmp_path) == project


def test_find_config_precedence_within_one_directory(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.mpcheck]\n")
    assert find_config(tmp_path) == tmp_path / "pyproject.toml"
    write(tmp_path / "mpcheck.toml", "")
    assert find_config(tmp_path) == tmp_path / "mpcheck.toml"
    write(tmp_path / ".mpcheck.toml", "")
    assert find_config(tmp_path) == tmp_path / ".mpcheck.toml"


def test_find_config_none_without_any(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    write(tmp_path / "x" / "pyproject.toml", "[project]\nname = 'x'\n")
    assert find_config(tmp_path / "x") is None


def test_find_config_reports_broken_pyproject_that_may_hold_the_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.mpcheck\nselect = 1\n")
    with pytest.raises(ConfigError, match=r"pyproject\.toml: invalid TOML: "):
        find_config(tmp_path)


def test_find_config_ignores_broken_pyproject_unrelated_to_mpcheck(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.black\n")
    assert find_config(tmp_path) is None


def test_config_in_looks_in_one_directory_only(tmp_path: Path) -> None:
    write(tmp_path / "mpcheck.toml", "")
    (tmp_path / "sub").mkdir()
    assert config_in(tmp_path / "sub") is None
    assert config_in(tmp_path) == tmp_path / "mpcheck.toml"
    write(tmp_path / "sub" / "pyproject.toml", "[tool.mpcheck\n")
    with pytest.raises(ConfigError, match=r"^sub/pyproject\.toml: invalid TOML: "):
        config_in(tmp_path / "sub", cwd=tmp_path)


# -- load_settings: values ----------------------------------------------------------------------


def test_no_config_gives_defaults_rooted_at_cwd(tmp_path: Path) -> None:
    settings = load_settings(None, cwd=tmp_path)
    assert settings == Settings(root=tmp_path)
    assert settings.select is None
    assert settings.extend_select == ()
    assert settings.ignore == ()
    assert dict(settings.per_file_ignores) == {}
    assert settings.exclude is None
    assert settings.module_half_capable is True
    assert settings.respect_gitignore is True
    assert settings.config_path is None
    assert settings.effective_exclude == DEFAULT_EXCLUDE


def test_full_pyproject_table(tmp_path: Path) -> None:
    config = write(
        tmp_path / "pyproject.toml",
        """
[project]
name = "demo"

[tool.ruff]
line-length = 100

[tool.mpcheck]
select = ["MPC1", "MPC2"]
extend-select = ["MPC001"]
ignore = ["MPC103"]
exclude = ["legacy", "gen/*.py"]
extend-exclude = ["scratch/"]
module-half-capable = false
respect-gitignore = false

[tool.mpcheck.per-file-ignores]
"tests/**" = ["MPC101", "MPC2"]
"__init__.py" = ["ALL"]
""",
    )
    settings = load_settings(config, cwd=tmp_path)
    assert settings.root == tmp_path
    assert settings.config_path == config
    assert settings.select == ("MPC1", "MPC2")
    assert settings.extend_select == ("MPC001",)
    assert settings.ignore == ("MPC103",)
    assert dict(settings.per_file_ignores) == {
        "tests/**": ("MPC101", "MPC2"),
        "__init__.py": ("ALL",),
    }
    assert settings.exclude == ("legacy", "gen/*.py")
    assert settings.extend_exclude == ("scratch/",)
    assert settings.effective_exclude == ("legacy", "gen/*.py", "scratch/")
    assert settings.module_half_capable is False
    assert settings.respect_gitignore is False


def test_mpcheck_toml_is_the_whole_file(tmp_path: Path) -> None:
    config = write(tmp_path / "cfg" / "mpcheck.toml", 'ignore = ["MPC1"]\n')
    settings = load_settings(config, cwd=tmp_path)
    assert settings.ignore == ("MPC1",)
    assert settings.root == tmp_path / "cfg"


def test_relative_config_path_resolves_against_cwd(tmp_path: Path) -> None:
    write(tmp_path / "sub" / "mpcheck.toml", 'select = ["ALL"]\n')
    settings = load_settings(Path("sub/mpcheck.toml"), cwd=tmp_path)
    assert settings.select == ("ALL",)
    assert settings.config_path == tmp_path / "sub" / "mpcheck.toml"
    assert settings.root == tmp_path / "sub"


def test_explicit_pyproject_without_table_is_empty_config(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    settings = load_settings(config, cwd=tmp_path)
    assert settings == Settings(root=tmp_path, config_path=config)


def test_empty_lists_are_kept(tmp_path: Path) -> None:
    config = write(tmp_path / "mpcheck.toml", "select = []\nexclude = []\n")
    settings = load_settings(config, cwd=tmp_path)
    assert settings.select == ()
    assert settings.exclude == ()
    assert settings.effective_exclude == ()


def test_settings_are_immutable(tmp_path: Path) -> None:
    config = write(tmp_path / "mpcheck.toml", '[per-file-ignores]\n"a.py" = ["MPC1"]\n')
    settings = load_settings(config, cwd=tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.select = ("MPC",)  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.per_file_ignores["b.py"] = ("MPC1",)  # type: ignore[index]


# -- load_settings: errors ----------------------------------------------------------------------


def test_unknown_key_with_suggestion(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", '[tool.mpcheck]\nselct = ["MPC101"]\n')
    assert load_error(config, tmp_path) == (
        "pyproject.toml: unknown key 'selct' in [tool.mpcheck] (did you mean 'select'?)"
    )


def test_unknown_key_snake_case_suggests_kebab(tmp_path: Path) -> None:
    config = write(tmp_path / "mpcheck.toml", "respect_gitignore = false\n")
    assert load_error(config, tmp_path) == (
        "mpcheck.toml: unknown key 'respect_gitignore' (did you mean 'respect-gitignore'?)"
    )


def test_unknown_key_without_close_match(tmp_path: Path) -> None:
    config = write(tmp_path / "mpcheck.toml", "frobnicate = 1\n")
    assert load_error(config, tmp_path) == "mpcheck.toml: unknown key 'frobnicate'"


def test_unknown_nested_table_is_an_unknown_key(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", "[tool.mpcheck.lint]\nselect = []\n")
    assert load_error(config, tmp_path) == "pyproject.toml: unknown key 'lint' in [tool.mpcheck]"


def test_error_names_file_outside_cwd_absolutely(tmp_path: Path) -> None:
    config = write(tmp_path / "cfg" / "mpcheck.toml", "selct = []\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert load_error(config, other).startswith(f"{config}: unknown key 'selct'")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'select = "MPC101"',
            "'select' in [tool.mpcheck] must be an array of strings, got string",
        ),
        (
            "ignore = [101]",
            "'ignore' in [tool.mpcheck] must be an array of strings, "
            "got an array containing a integer",
        ),
        (
            "extend-exclude = {a = 1}",
            "'extend-exclude' in [tool.mpcheck] must be an array of strings, got table",
        ),
        (
            'respect-gitignore = "yes"',
            "'respect-gitignore' in [tool.mpcheck] must be true or false, got string",
        ),
        (
            "module-half-capable = 1",
            "'module-half-capable' in [tool.mpcheck] must be true or false, got integer",
        ),
        (
            'per-file-ignores = ["tests/*"]',
            "'per-file-ignores' in [tool.mpcheck] must be a table, got array",
        ),
        (
            '[tool.mpcheck.per-file-ignores]\n"tests/*" = "MPC101"',
            "'per-file-ignores' entry 'tests/*' in [tool.mpcheck] must be an array of "
            "strings, got string",
        ),
        (
            'select = ["mpc101"]',
            "invalid rule selector 'mpc101' in 'select' in [tool.mpcheck] "
            "(expected a code or prefix like 'MPC', 'MPC1', 'MPC101' or 'ALL')",
        ),
        (
            'extend-select = ["MPC-1"]',
            "invalid rule selector 'MPC-1' in 'extend-select' in [tool.mpcheck] "
            "(expected a code or prefix like 'MPC', 'MPC1', 'MPC101' or 'ALL')",
        ),
        (
            '[tool.mpcheck.per-file-ignores]\n"a.py" = ["101"]',
            "invalid rule selector '101' in 'per-file-ignores' entry 'a.py' in "
            "[tool.mpcheck] (expected a code or prefix like 'MPC', 'MPC1', 'MPC101' or 'ALL')",
        ),
        (
            'exclude = ["!keep"]',
            "negated pattern '!keep' in 'exclude' in [tool.mpcheck] is not supported "
            "(an excluded directory is never entered)",
        ),
        ('exclude = [""]', "empty pattern in 'exclude' in [tool.mpcheck]"),
    ],
)
def test_bad_values(tmp_path: Path, body: str, message: str) -> None:
    header = "" if body.startswith("[") else "[tool.mpcheck]\n"
    config = write(tmp_path / "pyproject.toml", header + body + "\n")
    assert load_error(config, tmp_path) == f"pyproject.toml: {message}"


def test_tool_mpcheck_must_be_a_table(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", "[tool]\nmpcheck = 3\n")
    assert load_error(config, tmp_path) == (
        "pyproject.toml: [tool.mpcheck] must be a table, got integer"
    )


def test_invalid_toml_reports_parser_message(tmp_path: Path) -> None:
    config = write(tmp_path / "mpcheck.toml", 'select = ["MPC101"\nignore = []\n')
    message = load_error(config, tmp_path)
    assert message.startswith("mpcheck.toml: invalid TOML: ")
    assert "(at line 2, column 1)" in message
    assert "\n" not in message


def test_invalid_utf8_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "mpcheck.toml"
    config.write_bytes(b"select = ['\xff']\n")
    assert load_error(config, tmp_path).startswith("mpcheck.toml: invalid TOML: ")


def test_known_codes_make_unknown_selectors_errors_naming_the_key(tmp_path: Path) -> None:
    codes = ["MPC001", "MPC101", "MPC102"]
    good = write(tmp_path / "good.toml", 'select = ["ALL", "MPC1", "MPC101"]\n')
    assert load_settings(good, cwd=tmp_path, known_codes=codes).select == ("ALL", "MPC1", "MPC101")
    for body, label in [
        ('select = ["MPC2"]', "'select'"),
        ('extend-select = ["MPC103"]', "'extend-select'"),
        ('[per-file-ignores]\n"a.py" = ["MPC9"]', "'per-file-ignores' entry 'a.py'"),
    ]:
        config = write(tmp_path / "mpcheck.toml", body + "\n")
        assert load_settings(config, cwd=tmp_path).config_path == config  # shape is fine
        with pytest.raises(ConfigError) as info:
            load_settings(config, cwd=tmp_path, known_codes=codes)
        assert str(info.value).startswith("mpcheck.toml: unknown rule selector ")
        assert str(info.value).endswith(f"in {label}")


def test_missing_explicit_config(tmp_path: Path) -> None:
    assert load_error(tmp_path / "nope.toml", tmp_path) == "nope.toml: No such file or directory"


# -- with_overrides -----------------------------------------------------------------------------


def base(**kwargs: object) -> Settings:
    return Settings(root=Path("/proj"), **kwargs)  # type: ignore[arg-type]


def test_overrides_nothing_given_is_identity() -> None:
    settings = base(select=("MPC1",), ignore=("MPC103",), extend_exclude=("x",))
    assert with_overrides(settings) == settings
    assert with_overrides(settings, extend_select=[], ignore=[], extend_exclude=[]) == settings


def test_cli_select_replaces_config_selection() -> None:
    settings = base(select=("MPC1",), extend_select=("MPC2",), ignore=("MPC103",))
    out = with_overrides(settings, select=["MPC101"], ignore=["MPC102"])
    assert (out.select, out.extend_select, out.ignore) == (("MPC101",), (), ("MPC102",))


def test_cli_ignore_beats_more_specific_config_select() -> None:
    settings = base(select=("MPC", "MPC101"), ignore=("MPC1",))
    out = with_overrides(settings, ignore=["MPC10"])
    assert (out.select, out.extend_select, out.ignore) == (("MPC",), (), ("MPC1", "MPC10"))
    codes = ["MPC001", "MPC101", "MPC102", "MPC110"]
    enabled = resolve_codes(codes, select=out.select, extend_select=out.extend_select,
                            ignore=out.ignore)  # fmt: skip
    assert enabled == {"MPC001"}


def test_cli_extend_select_beats_more_specific_config_ignore() -> None:
    settings = base(ignore=("MPC101", "MPC2"))
    out = with_overrides(settings, extend_select=["MPC1"])
    assert (out.select, out.extend_select, out.ignore) == (None, ("MPC1",), ("MPC2",))


def test_cli_excludes_replace_or_extend() -> None:
    settings = base(exclude=("a",), extend_exclude=("b",))
    out = with_overrides(settings, exclude=["c"], extend_exclude=["d"])
    assert (out.exclude, out.extend_exclude) == (("c",), ("b", "d"))
    assert with_overrides(settings, extend_exclude=["d"]).exclude == ("a",)


def test_cli_path_patterns_are_relative_to_cwd(tmp_path: Path) -> None:
    settings = Settings(root=tmp_path)
    cwd = tmp_path / "sub dir" / "x[1]"
    out = with_overrides(
        settings,
        exclude=["gen/*.py", "cache", "out/", "/top.py"],
        extend_exclude=["**/tmp"],
        cwd=cwd,
    )
    assert out.exclude == (
        "/sub dir/x\\[1\\]/gen/*.py",
        "cache",
        "out/",
        "/sub dir/x\\[1\\]/top.py",
    )
    assert out.extend_exclude == ("/sub dir/x\\[1\\]/**/tmp",)
    # cwd at the root: patterns are used as written.
    assert with_overrides(settings, exclude=["gen/a.py"], cwd=tmp_path).exclude == ("gen/a.py",)


def test_cli_path_patterns_reach_a_root_below_the_cwd(tmp_path: Path) -> None:
    """A nested project's root is below the cwd: keep what can match inside it, re-anchored."""
    settings = Settings(root=tmp_path / "proj")
    patterns = [
        "proj/gen/*.py",  # -> /gen/*.py
        "/proj/top.py",  # -> /top.py
        "p*j/out/",  # -> /out/
        "**/tmp",  # -> /**/tmp
        "**/proj/cache",  # -> /**/proj/cache or /cache
        "proj/**",  # -> /** (everything inside)
        "other/x.py",  # cannot match inside proj/: dropped
        "proj",  # a name: matched at any depth, as written
    ]
    out = with_overrides(settings, extend_exclude=patterns, cwd=tmp_path)
    assert out.extend_exclude == (
        "/gen/*.py",
        "/top.py",
        "/out/",
        "/**/tmp",
        "/**/proj/cache",
        "/cache",
        "/**",
        "proj",
    )
    # Directories side by side: only name patterns can apply.
    sibling = with_overrides(settings, exclude=["gen/a.py", "b.py"], cwd=tmp_path / "other")
    assert sibling.exclude == ("b.py",)


def test_cli_options_are_validated() -> None:
    with pytest.raises(ConfigError) as info:
        with_overrides(base(), select=["mpc1"])
    assert str(info.value) == (
        "--select: invalid rule selector 'mpc1' "
        "(expected a code or prefix like 'MPC', 'MPC1', 'MPC101' or 'ALL')"
    )
    with pytest.raises(ConfigError, match=r"^--extend-exclude: invalid exclude pattern '!x'$"):
        with_overrides(base(), extend_exclude=["!x"])


def test_cli_booleans() -> None:
    out = with_overrides(base(), respect_gitignore=False, module_half_capable=False)
    assert (out.respect_gitignore, out.module_half_capable) == (False, False)
    assert with_overrides(out).respect_gitignore is False


def test_folded_overrides_equal_ruff_layering() -> None:
    """Exhaustive-ish: folding the CLI layer into flat fields never changes the result."""
    codes = ["MPC001", "MPC002", "MPC100", "MPC101", "MPC102", "MPC110", "MPC201"]
    selectors = ["ALL", "MPC", "MPC0", "MPC1", "MPC10", "MPC11", "MPC2", "MPC101", "MPC110"]
    rng = random.Random(1234)

    def some() -> tuple[str, ...]:
        return tuple(rng.sample(selectors, rng.randint(0, 2)))

    for _ in range(4000):
        s1 = None if rng.random() < 0.4 else some()
        e1, i1 = some(), some()
        s2 = None if rng.random() < 0.7 else some()
        e2, i2 = some(), some()
        layered = resolve_layers(codes, [RuleSelection(s1, e1, i1), RuleSelection(s2, e2, i2)])
        out = with_overrides(
            base(select=s1, extend_select=e1, ignore=i1),
            select=s2,
            extend_select=e2,
            ignore=i2,
        )
        flat = resolve_codes(
            codes, select=out.select, extend_select=out.extend_select, ignore=out.ignore
        )
        assert flat == layered, (s1, e1, i1, s2, e2, i2)


def test_selector_covers() -> None:
    assert selector_covers("ALL", "MPC101")
    assert selector_covers("MPC", "MPC1")
    assert selector_covers("MPC1", "MPC101")
    assert selector_covers("MPC101", "MPC101")
    assert not selector_covers("MPC101", "MPC1")
    assert not selector_covers("MPC2", "MPC101")
    assert not selector_covers("MP", "MPC101")
    assert not selector_covers("MPC1", "ALL")


# -- Resolver: which config governs which file ---------------------------------------------------


def resolver_for(tmp_path: Path, cwd: Path | None = None, **kwargs: object) -> Resolver:
    return Resolver(cwd or tmp_path, **kwargs)  # type: ignore[arg-type]


def test_each_directory_gets_the_closest_config(tmp_path: Path) -> None:
    outer = write(tmp_path / "pyproject.toml", "[tool.mpcheck]\nignore = ['MPC101']\n")
    inner = write(tmp_path / "a" / "b" / ".mpcheck.toml", "select = ['MPC100']\n")
    write(tmp_path / "a" / "pyproject.toml", "[tool.black]\n")  # no table: skipped
    resolver = resolver_for(tmp_path)
    top = resolver.project_for(tmp_path / "x.py")
    assert top.settings.config_path == outer
    assert resolver.project_for(tmp_path / "a" / "x.py") is top
    nested = resolver.project_for(tmp_path / "a" / "b" / "c" / "x.py")
    assert nested.settings.config_path == inner
    assert nested.settings.root == tmp_path / "a" / "b"  # its patterns are relative to it
    assert nested.selected == {"MPC100"}
    assert "MPC101" not in top.selected and "MPC102" in top.selected
    assert resolver.settings_for(str(tmp_path / "a" / "b")) is nested.settings


def test_nested_per_file_ignores_are_relative_to_their_config(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml", '[tool.mpcheck]\nper-file-ignores = {"tests/*" = ["MPC1"]}\n'
    )
    write(tmp_path / "sub" / "mpcheck.toml", '[per-file-ignores]\n"/gen.py" = ["MPC101"]\n')
    resolver = resolver_for(tmp_path)

    def names(path: Path) -> set[str]:
        return {r.code for r in resolver.project_for(path).rules_for(path)}

    everything = names(tmp_path / "a.py")
    assert "MPC101" in everything and "MPC201" in everything
    assert not any(code.startswith("MPC1") for code in names(tmp_path / "tests" / "t.py"))
    # sub/ has its own config: the outer per-file-ignores do not reach into it.
    assert names(tmp_path / "sub" / "tests" / "t.py") == everything
    assert names(tmp_path / "sub" / "gen.py") == everything - {"MPC101"}
    assert names(tmp_path / "sub" / "deeper" / "gen.py") == everything


def test_without_a_config_above_the_cwds_config_or_the_defaults_apply(tmp_path: Path) -> None:
    cwd_config = write(tmp_path / "work" / "mpcheck.toml", "ignore = ['MPC2']\n")
    elsewhere = tmp_path / "elsewhere" / "x.py"
    project = resolver_for(tmp_path, cwd=tmp_path / "work").project_for(elsewhere)
    assert project.settings.config_path == cwd_config
    defaults = resolver_for(tmp_path, cwd=tmp_path / "elsewhere").project_for(elsewhere)
    assert defaults.settings == Settings(root=tmp_path / "elsewhere")


def test_forced_config_governs_everything(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.mpcheck]\nignore = ['MPC101']\n")
    write(tmp_path / "sub" / "mpcheck.toml", "nonsense = 1\n")  # never read
    forced = write(tmp_path / "ci" / "strict.toml", "select = ['MPC101']\n")
    resolver = resolver_for(tmp_path, config=Path("ci/strict.toml"))
    for path in (tmp_path / "a.py", tmp_path / "sub" / "b.py"):
        project = resolver.project_for(path)
        assert project.settings.config_path == forced
        assert project.selected == {"MPC101"}


def test_overrides_apply_to_every_config(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.mpcheck]\nselect = ['MPC2']\n")
    write(tmp_path / "sub" / "mpcheck.toml", "ignore = ['MPC101']\n")
    resolver = resolver_for(
        tmp_path, overrides=lambda s: with_overrides(s, extend_select=["MPC101"], cwd=tmp_path)
    )
    assert "MPC101" in resolver.project_for(tmp_path / "a.py").selected
    assert "MPC101" in resolver.project_for(tmp_path / "sub" / "a.py").selected
    assert "MPC201" in resolver.project_for(tmp_path / "a.py").selected


def test_broken_nested_config_raises_each_time_naming_the_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.mpcheck]\n")
    write(tmp_path / "sub" / "pyproject.toml", "[tool.mpcheck]\nselect = 'MPC1'\n")
    resolver = resolver_for(tmp_path)
    assert resolver.project_for(tmp_path / "ok.py").settings.root == tmp_path
    for _ in range(2):  # remembered: every file it governs gets the error
        with pytest.raises(ConfigError) as info:
            resolver.project_for(tmp_path / "sub" / "deep" / "x.py")
        assert str(info.value) == (
            "sub/pyproject.toml: 'select' in [tool.mpcheck] must be an array of strings, got string"
        )
    write(tmp_path / "bad" / "pyproject.toml", "[tool.mpcheck\n")
    with pytest.raises(ConfigError, match=r"^bad/pyproject\.toml: invalid TOML: "):
        resolver.project_for(tmp_path / "bad" / "x.py")


def test_configs_are_found_and_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "mpcheck.toml", "")
    looked_in: list[Path] = []
    read: list[Path] = []
    real_config_in, real_read = config.config_in, config._read_toml

    def counting_config_in(directory: Path, **kwargs: object) -> Path | None:
        looked_in.append(directory)
        return real_config_in(directory, **kwargs)  # type: ignore[arg-type]

    def counting_read(path: Path, shown: str) -> dict[str, object]:
        read.append(path)
        return real_read(path, shown)

    monkeypatch.setattr("mpcheck.settings.resolver.config_in", counting_config_in)
    monkeypatch.setattr(config, "_read_toml", counting_read)
    resolver = resolver_for(tmp_path)
    files = [tmp_path / f"d{i}" / "e" / f"m{j}.py" for i in range(3) for j in range(4)]
    for path in files * 2:
        resolver.project_for(path)
    assert len(looked_in) == len(set(looked_in)) == 7  # tmp_path, d0..d2, d0/e..d2/e
    assert read == [tmp_path / "mpcheck.toml"]
