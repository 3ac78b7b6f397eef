"""Settings come from the checked file's project, not the working directory (issue 38, 7).

Run from outside a repository, mpcheck read the cwd's requirements instead of the project's
and rewrote ``torch.cuda.amp.GradScaler()`` into ``torch.amp.GradScaler("cuda")`` (torch 2.3)
in a project pinned to torch 2.1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcheck.cli.app import main

TRAIN = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
DECLARATIONS = {
    "pyproject-table": ("pyproject.toml", '[tool.mpcheck]\ntarget-torch-version = "2.1"\n'),
    "pyproject-deps": (
        "pyproject.toml",
        '[project]\nname = "p"\nversion = "0"\ndependencies = ["torch>=2.1,<3"]\n',
    ),
    "requirements": ("requirements.txt", "torch==2.1.2\n"),
}


@pytest.mark.parametrize("declared", sorted(DECLARATIONS))
def test_the_checked_project_pins_the_torch_of_a_fix(
    declared: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, text = DECLARATIONS[declared]
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "src").mkdir(parents=True)
    elsewhere.mkdir()
    (project / name).write_text(text)
    train = project / "src" / "train.py"
    train.write_text(TRAIN)
    monkeypatch.chdir(elsewhere)
    code = main(["check", "--no-cache", "--fix", str(train)])
    assert train.read_text() == TRAIN  # no torch 2.3 API written into a torch 2.1 project
    assert code == 0


def test_without_a_pin_the_fix_still_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cwd's own pin does not hold a project that has none."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / ".git").mkdir()
    (elsewhere / "requirements.txt").write_text("torch==2.1.2\n")
    train = project / "train.py"
    train.write_text(TRAIN)
    monkeypatch.chdir(elsewhere)
    main(["check", "--no-cache", "--fix", str(train)])
    assert train.read_text() == TRAIN.replace(
        "torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'
    )
