"""``extend = "../pyproject.toml"``: a configuration built on another one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.settings.config import ConfigError, load_settings


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_child_overrides_the_parent_and_paths_stay_with_their_file(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        "[tool.mpcheck]\n"
        'ignore = ["MPC204"]\n'
        'fail-on = "error"\n'
        'baseline = "base.json"\n'
        'extend-exclude = ["/pkg/generated", "vendored"]\n'
        'extend-select = ["MPC1"]\n'
        'per-file-ignores = { "pkg/tests/**" = ["MPC3"] }\n'
        'target-torch-version = "2.1"\n',
    )
    child = write(
        tmp_path / "pkg" / "mpcheck.toml",
        'extend = "../pyproject.toml"\nignore = ["MPC101"]\nextend-select = ["MPC4"]\n',
    )
    settings = load_settings(child, cwd=tmp_path)
    assert settings.root == tmp_path / "pkg" and settings.config_path == child
    assert settings.ignore == ("MPC101",)  # the child's own value wins
    assert settings.fail_on == "error" and settings.target_torch_version == (2, 1)  # inherited
    assert settings.baseline == tmp_path / "base.json"  # relative to the parent that says it
    # the parent's anchored patterns, rewritten relative to the child's directory
    assert settings.extend_exclude == ("/generated", "vendored")
    assert dict(settings.per_file_ignores) == {"/tests/**": ("MPC3",)}
    assert settings.extend_select == ("MPC1", "MPC4")  # extend-* add up


def test_a_chain_of_three(tmp_path: Path) -> None:
    write(tmp_path / "base.toml", 'fail-on = "error"\nmax-file-size = "2MiB"\n')
    write(tmp_path / "a" / "mpcheck.toml", 'extend = "../base.toml"\nfail-on = "warning"\n')
    leaf = write(tmp_path / "a" / "b" / ".mpcheck.toml", 'extend = "../mpcheck.toml"\n')
    settings = load_settings(leaf, cwd=tmp_path)
    assert (settings.fail_on, settings.max_file_size) == ("warning", 2 * 1024 * 1024)
    assert settings.extends == (tmp_path / "a" / "mpcheck.toml", tmp_path / "base.toml")


def test_cycles_and_missing_files_are_errors(tmp_path: Path) -> None:
    a = write(tmp_path / "a.toml", 'extend = "b.toml"\n')
    write(tmp_path / "b.toml", 'extend = "a.toml"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(a, cwd=tmp_path)
    assert str(info.value) == "b.toml: 'extend' makes a cycle: a.toml -> b.toml -> a.toml"
    itself = write(tmp_path / "self.toml", 'extend = "self.toml"\n')
    with pytest.raises(ConfigError, match="makes a cycle: self.toml -> self.toml"):
        load_settings(itself, cwd=tmp_path)
    gone = write(tmp_path / "gone.toml", 'extend = "nowhere.toml"\n')
    with pytest.raises(ConfigError, match="nowhere.toml: No such file or directory"):
        load_settings(gone, cwd=tmp_path)
    bad = write(tmp_path / "bad.toml", 'extend = "parent.toml"\n')
    write(tmp_path / "parent.toml", "colour = true\n")
    with pytest.raises(ConfigError, match="parent.toml: unknown key 'colour'"):
        load_settings(bad, cwd=tmp_path)


def test_cli_uses_the_extended_settings_and_reports_a_cycle_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", '[tool.mpcheck]\nselect = ["MPC404"]\n')
    write(tmp_path / "svc" / "pyproject.toml", '[tool.mpcheck]\nextend = "../pyproject.toml"\n')
    write(
        tmp_path / "svc" / "train.py",
        "import torch\nfrom torch import nn\nscaler = torch.cuda.amp.GradScaler()\n\n\n"
        "class M(nn.Module):\n    def forward(self, x):\n        return self.lin(x.float())\n",
    )
    status = cli.main(["check", "--no-cache", "--output-format", "json", "svc"])
    out, err = capsys.readouterr()
    assert status == 1, err
    assert {d["code"] for d in json.loads(out)} == {"MPC404"}  # the parent's select applies
    assert cli.main(["check", "--show-settings", "svc"]) == 0
    out, _ = capsys.readouterr()
    assert "config: svc/pyproject.toml\n" in out and "extends: ['pyproject.toml']\n" in out
    write(tmp_path / "pyproject.toml", '[tool.mpcheck]\nextend = "svc/pyproject.toml"\n')
    assert cli.main(["check", "--no-cache", "svc"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "makes a cycle" in err
