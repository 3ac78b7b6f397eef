"""``follow-imports = "site"``: imported installed libraries are summarised too, lazily (only
the modules imported), never torch; the default follows the project's own files only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.project import summarise
from mpcheck.project.index import ModuleIndex, site_roots
from mpcheck.ruleset.rule import all_rules
from tests.support import FP32_NORM_SOURCE

NORMS = FP32_NORM_SOURCE

BLOCK = """
import torch
from torch import nn

from fakelib.norms import RMSNormFp32


class Block(nn.Module):
    def __init__(self, dim, dtype=None):
        super().__init__()
        self.norm = RMSNormFp32(dim)
        self.mlp = nn.Linear(dim, dim, dtype=dtype)

    def forward(self, h):
        return self.mlp(self.norm(h))
"""


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    summarise.forget()
    yield
    summarise.forget()


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A venv-like ``site-packages`` holding ``fakelib`` (on ``sys.path``), and a project."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    lib = site / "fakelib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("from .norms import RMSNormFp32\n")
    (lib / "norms.py").write_text(NORMS)
    (lib / "unused.py").write_text("import torch\n\n\ndef f(x):\n    return x.float()\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "block.py").write_text(BLOCK)
    monkeypatch.syspath_prepend(str(site))
    return site, project


def codes(project: Path, follow: str) -> set[tuple[int, str]]:
    path = project / "block.py"
    options = Options(project_root=str(project), follow_imports=follow)
    found = check_source(path.read_text(), str(path), all_rules(), options)
    return {(d.start.row, d.code) for d in found if not d.suppressed}


def test_default_stays_off_site(layout: tuple[Path, Path]) -> None:
    _, project = layout
    assert codes(project, "normal") == set()


def test_site_summarises_an_installed_library_class(layout: tuple[Path, Path]) -> None:
    _, project = layout
    assert codes(project, "site") == {(15, "MPC101")}


def test_only_the_imported_library_modules_are_summarised(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    site, project = layout
    walked: list[str] = []
    original = summarise.FileSummariser.summarise

    def spy(self: summarise.FileSummariser, path: Path, lookup: summarise.Lookup) -> object:
        walked.append(path.name)
        return original(self, path, lookup)

    monkeypatch.setattr(summarise.FileSummariser, "summarise", spy)
    codes(project, "site")
    assert walked == ["norms.py"]


def test_torch_is_never_followed(layout: tuple[Path, Path]) -> None:
    site, project = layout
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    index = ModuleIndex((project,), (site,))
    assert index.resolve(project / "block.py", "torch") is None
    assert index.resolve(project / "block.py", "fakelib.norms") is not None
    assert site in site_roots()


def test_cli_option_and_config_key(layout: tuple[Path, Path]) -> None:
    site, project = layout
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json"]

    def run(*extra: str) -> list[tuple[int, str]]:
        done = subprocess.run(
            [*cmd, *extra, "."], cwd=project, capture_output=True, text=True, env=env
        )
        return [(d["location"]["row"], d["code"]) for d in json.loads(done.stdout)]

    assert run() == []
    assert run("--follow-imports", "site") == [(15, "MPC101")]
    (project / "mpcheck.toml").write_text('follow-imports = "site"\n')
    assert run() == [(15, "MPC101")]
    assert run("--follow-imports", "normal") == []
    (project / "mpcheck.toml").write_text('follow-imports = "everything"\n')
    done = subprocess.run([*cmd, "."], cwd=project, capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "follow-imports" in done.stderr


def test_the_active_virtual_environment_is_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mpcheck installed apart from the project (pipx) still finds the project's libraries."""
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "venv"))
    assert site in site_roots()


def test_module_level_imports_are_read_without_parsing_the_file(tmp_path: Path) -> None:
    """The edges that order summaries: every import statement at column 0, continued over
    brackets (with comments in them) and backslashes; imports in a function or a string
    are not edges."""
    source = '''\
"""Docs.
from docs import nothing (a string line that only looks like an import)
"""
import os, sys as system
from . import rope
from ..layers import (  # a comment with a bracket (
    Norm,
    Attention,  # another )
)
from pkg.mod import \\
    helper
import torch; import numpy as np


def f():
    import json
'''
    path = tmp_path / "m.py"
    path.write_text(source)
    found = sorted(summarise.FileSummariser(tmp_path).imports(path))
    assert found == sorted(
        [
            ("os", 0),
            ("sys", 0),
            ("rope", 1),
            ("layers.Norm", 2),
            ("layers.Attention", 2),
            ("pkg.mod.helper", 0),
            ("torch", 0),
            ("numpy", 0),
        ]
    )


def test_imports_at_the_first_and_the_last_byte_are_read(tmp_path: Path) -> None:
    """An import on the file's first line, one on its last line without a newline, and
    CRLF line ends."""
    path = tmp_path / "m.py"
    path.write_bytes(b"from . import rope\r\nx = 1\r\nimport torch.nn")
    found = sorted(summarise.FileSummariser(tmp_path).imports(path))
    assert found == [("rope", 1), ("torch.nn", 0)]
