"""target-torch-version: parsing, detection from the project's requirement files, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.settings.config import ConfigError, load_settings
from mpcheck.settings.torch_target import declared_torch, lowest_allowed, parse_version

LEGACY = """\
import torch
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    pass
"""


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MPCHECK_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("requirement", "lowest"),
    [
        ("torch>=2.1,<3", (2, 1)),
        ("torch==2.4.*", (2, 4)),
        ("torch ~= 2.2.1", (2, 2)),
        ("torch>2.1", (2, 1)),  # 2.1.1 is allowed
        ("torch[opt]>=2.3; python_version >= '3.10'", (2, 3)),
        ("Torch<3,>=1.13,!=2.0.0", (1, 13)),
        ("torch", None),
        ("torch<2.5", None),  # no floor: the latest behaviour
        ("torchvision>=0.16", None),
    ],
)
def test_lowest_allowed(requirement: str, lowest: tuple[int, int] | None) -> None:
    assert lowest_allowed(requirement) == lowest


def test_parse_version() -> None:
    assert parse_version("2.1") == (2, 1)
    assert parse_version("2.4.1") == (2, 4)
    assert parse_version("two") is None
    assert parse_version("2") is None


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[project]\nname = "p"\ndependencies = ["numpy", "torch>=2.1,<3"]\n'),
        (
            "pyproject.toml",
            '[project]\nname = "p"\n[project.optional-dependencies]\ngpu = ["torch==2.1.*"]\n',
        ),
        ("setup.cfg", "[options]\ninstall_requires =\n    numpy\n    torch>=2.1\n"),
        ("requirements.txt", "# pinned\nnumpy\ntorch>=2.1  # cuda 12\n-r dev.txt\n"),
        ("requirements-train.txt", "torch==2.1.2\n"),
        ("pyproject.toml", '[dependency-groups]\ndev = ["pytest", "torch>=2.1"]\n'),
        ("pyproject.toml", '[tool.poetry.dependencies]\npython = "^3.10"\ntorch = "^2.1"\n'),
        (
            "pyproject.toml",
            '[tool.poetry.group.gpu.dependencies]\ntorch = { version = "~2.3 || 2.1.*" }\n',
        ),
    ],
)
def test_detected_from_each_requirement_file(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    assert declared_torch(tmp_path) == ((2, 1), name)
    settings = load_settings(None, cwd=tmp_path)
    assert (settings.target_torch_version, settings.target_torch_source) == ((2, 1), name)


def test_without_a_config_the_project_above_the_cwd_counts(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch>=2.2\n")
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    settings = load_settings(None, cwd=deep)
    assert (settings.target_torch_version, settings.target_torch_source) == (
        (2, 2),
        "requirements.txt",
    )
    (deep / "pyproject.toml").write_text('[project]\nname = "pkg"\n')  # a nearer project
    assert load_settings(None, cwd=deep).target_torch_version is None


def test_nothing_declared_is_the_latest(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch\n")
    (tmp_path / "pyproject.toml").write_text("[project\nbroken")  # not ours to validate
    assert load_settings(None, cwd=tmp_path).target_torch_version is None


def test_the_setting_beats_the_requirement(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=2.1\n")
    config = tmp_path / "mpcheck.toml"
    config.write_text('target-torch-version = "2.5"\n')
    settings = load_settings(config, cwd=tmp_path)
    assert settings.target_torch_version == (2, 5)
    assert settings.target_torch_source == "target-torch-version"


@pytest.mark.parametrize("value", ['"latest"', "2.1", '""'])
def test_bad_config_value(tmp_path: Path, value: str) -> None:
    (tmp_path / "mpcheck.toml").write_text(f"target-torch-version = {value}\n")
    with pytest.raises(ConfigError, match="'target-torch-version' must be a version"):
        load_settings(tmp_path / "mpcheck.toml", cwd=tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def messages(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    status, out, err = run(capsys, "check", "--no-cache", "--output-format", "json", *argv)
    assert status == 1, err
    return [d["message"] for d in json.loads(out)]


def test_cli_detects_and_the_flag_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("train.py").write_text(LEGACY)
    Path("requirements.txt").write_text("torch>=2.1,<3\n")
    (autocast,) = messages(capsys)
    assert "the target is 2.1" in autocast
    assert len(messages(capsys, "--target-torch-version", "2.5")) == 2
    status, out, _ = run(capsys, "check", "--show-settings")
    assert status == 0 and "target-torch-version: 2.1 (from requirements.txt)" in out
    status, out, _ = run(capsys, "check", "--show-settings", "--target-torch-version", "2.5")
    assert "target-torch-version: 2.5 (from --target-torch-version)" in out


def test_cli_bad_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("train.py").write_text(LEGACY)
    status, out, err = run(capsys, "check", "--target-torch-version", "new")
    assert (status, out) == (2, "")
    assert err == (
        "mpcheck: error: --target-torch-version: expected a torch version such as 2.1, got 'new'\n"
    )
    Path("pyproject.toml").write_text('[tool.mpcheck]\ntarget-torch-version = "2.x"\n')
    status, out, err = run(capsys, "check")
    assert status == 2 and err.count("\n") == 1
    assert "pyproject.toml: 'target-torch-version' in [tool.mpcheck] must be a version" in err


def test_the_target_is_part_of_the_cache_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("train.py").write_text(LEGACY)
    for _ in range(2):  # the second run of each reads the cache
        assert len(messages_cached(capsys)) == 2
        assert len(messages_cached(capsys, "--target-torch-version", "2.1")) == 1


def messages_cached(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    status, out, err = run(capsys, "check", "--output-format", "json", *argv)
    assert status == 1, err
    return [d["message"] for d in json.loads(out)]
