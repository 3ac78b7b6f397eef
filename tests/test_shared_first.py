"""A ``-j`` run checks the modules many files import before it forks its workers.

Each worker keeps its own summaries, so without this a module every file needs was walked
once per worker. The findings must be those of a one-process run, the shared module walked
once in the whole run, and a module few files import left to the workers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mpcheck.pipeline import incremental
from mpcheck.pipeline import pool as runner
from mpcheck.pipeline.one_file import Options
from mpcheck.project.summarise import FileSummariser
from mpcheck.ruleset.rule import all_rules

HELPER = """\
import torch


def upcast(x):
    return x.float()
"""

USER = """\
import torch
from torch import nn

from pkg.common import upcast
{extra}

class Block{n}(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(upcast(x))
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``pkg/common.py`` imported by 70 modules (enough for a process pool), and
    ``pkg/rare.py`` by one of them (so one worker walks it, whatever the chunks)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text(HELPER)
    (pkg / "rare.py").write_text(HELPER)
    for n in range(70):
        extra = "from pkg.rare import upcast as _rare\n" if n == 0 else ""
        (pkg / f"block{n}.py").write_text(USER.format(n=n, extra=extra))
    return tmp_path


def jobs(tree: Path, cache: Path) -> list[runner.Job]:
    options = Options(project_root=str(tree), cache_dir=str(cache))
    rules = tuple(all_rules())
    return [(path, rules, options) for path in sorted(tree.rglob("*.py"))]


def test_the_modules_many_files_import_come_first(tree: Path, tmp_path: Path) -> None:
    incremental.forget()
    planned = {str(path): opts for path, _, opts in jobs(tree, tmp_path / "cache")}
    incremental.plan(planned)
    try:
        first = incremental.shared_first(runner.SHARED_IMPORTERS)
    finally:
        incremental.forget()
    assert first == [str(tree / "pkg" / "common.py")]  # rare.py has one importer only


@pytest.mark.skipif(not hasattr(os, "fork"), reason="counts walks through forked workers")
def test_a_pool_run_walks_the_shared_module_once_and_finds_what_one_process_finds(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "walked.log"
    real = incremental.analyse_source

    def logged(data: bytes, filename: str, *args: object, **kwargs: object) -> object:
        with open(log, "a") as out:  # (appended to by the workers too)
            out.write(Path(filename).name + "\n")
        return real(data, filename, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(incremental, "analyse_source", logged)
    incremental.forget()
    pooled = runner.check_files(jobs(tree, tmp_path / "pooled"), processes=2)
    incremental.forget()
    walked = log.read_text().splitlines()
    alone = runner.check_files(jobs(tree, tmp_path / "alone"), processes=1)
    incremental.forget()
    assert walked.count("common.py") == 1
    assert sorted(walked) == sorted(path.name for path in tree.rglob("*.py"))
    assert len([d for d in pooled if d.code == "MPC101"]) == 70
    assert sorted(d.sort_key() for d in pooled) == sorted(d.sort_key() for d in alone)


def test_a_warm_run_reads_no_import_lists_before_forking(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With most files in the cache, few are analysed and those find the shared summaries
    there: reading every file's imports first would be most of a warm run's time."""
    cache = tmp_path / "cache"
    incremental.forget()
    runner.check_files(jobs(tree, cache), processes=1)
    incremental.forget()
    read: list[str] = []
    real = FileSummariser.imports

    def logged(self: FileSummariser, path: Path) -> object:
        read.append(path.name)
        return real(self, path)

    monkeypatch.setattr(FileSummariser, "imports", logged)
    (tree / "pkg" / "block3.py").write_text(USER.format(n=3, extra="# edited"))
    incremental.plan({str(path): opts for path, _, opts in jobs(tree, cache)})
    try:
        assert incremental.shared_first(runner.SHARED_IMPORTERS) == []
    finally:
        incremental.forget()
    assert read == []
    for entry in cache.rglob("*.json"):  # an empty cache: the shared module comes first
        entry.unlink()
    incremental.plan({str(path): opts for path, _, opts in jobs(tree, cache)})
    try:
        assert incremental.shared_first(runner.SHARED_IMPORTERS) == [str(tree / "pkg/common.py")]
    finally:
        incremental.forget()
