"""A src-layout repository: a root script importing the package from ``src/`` is followed by
default, and ``src`` in the configuration names other source roots (as ruff's ``src``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MODEL = '''from torch import nn


def build_model(dim: int) -> nn.Module:
    """The classifier, in half precision for speed."""
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2)).half()
'''
TRAIN = """import torch

from tiny.model import build_model


def main() -> None:
    model = build_model(8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(torch.randn(4, 8)).float().mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""
RAISES = "train.py:14:9: MPC201"


def project(root: Path, source: str) -> Path:
    (root / source / "tiny").mkdir(parents=True)
    (root / source / "tiny" / "__init__.py").write_text("")
    (root / source / "tiny" / "model.py").write_text(MODEL)
    (root / "train.py").write_text(TRAIN)
    return root


def mpcheck(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--output-format", "concise", *args],
        cwd=root,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("cache", [[], ["--no-cache"]])
def test_a_root_script_follows_the_package_in_src(tmp_path: Path, cache: list[str]) -> None:
    root = project(tmp_path, "src")
    done = mpcheck(root, *cache)
    assert done.returncode == 1 and done.stdout.startswith(RAISES), done.stdout + done.stderr
    assert "(src/tiny/model.py:6)" in done.stdout


def test_the_src_setting_names_other_source_roots(tmp_path: Path) -> None:
    root = project(tmp_path, "lib")
    assert mpcheck(root, "--no-cache").stdout == "All checks passed!\n"  # lib/ is not a root
    (root / "pyproject.toml").write_text('[tool.mpcheck]\nsrc = ["lib"]\n')
    done = mpcheck(root)
    assert done.returncode == 1 and done.stdout.startswith(RAISES), done.stdout + done.stderr
    shown = mpcheck(root, "--show-settings").stdout
    assert "src: ['lib']" in shown.splitlines()


def test_a_bad_src_setting_is_one_line(tmp_path: Path) -> None:
    root = project(tmp_path, "src")
    (root / "pyproject.toml").write_text("[tool.mpcheck]\nsrc = [3]\n")
    done = mpcheck(root)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "'src' in [tool.mpcheck] must be a path" in done.stderr


def test_the_flake8_plugin_follows_src_too(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    root = project(tmp_path, "src")
    done = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "MPC", "train.py"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stdout.startswith("train.py:14:9: MPC201"), done
