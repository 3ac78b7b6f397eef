"""A ``-j`` run hands its workers the largest files first.

The pool deals files out in chunks as workers free up: with the largest first, the last
chunks are short, so neither worker runs on alone at the end, and the largest syntax trees
are built while each worker's store of summaries is still small (peak memory).
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mpcheck.pipeline import pool as runner
from mpcheck.pipeline.one_file import Options
from mpcheck.ruleset.rule import all_rules


class InProcess:
    """A pool that runs its work here, in the order given, and records that order."""

    order: list[str] = []

    def __init__(self, max_workers: int, initializer: Callable[..., None], initargs: Any) -> None:
        initializer(*initargs)

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], chunksize: int = 1
    ) -> Iterator[Any]:
        items = list(items)
        InProcess.order = [Path(item[0]).name for item in items]
        return map(fn, items)


def test_the_pool_gets_the_largest_files_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = {f"m{n:02d}.py": (n * 37) % 70 for n in range(70)}  # lines of padding, shuffled
    for name, lines in sizes.items():
        (tmp_path / name).write_text("import torch\n" + "x = 1\n" * lines)
    (tmp_path / "gone.py").symlink_to(tmp_path / "missing.py")  # unreadable: reported, last
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", InProcess)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    rules = tuple(all_rules())
    jobs = [(path, rules, Options()) for path in sorted(tmp_path.glob("*.py"))]
    found = runner.check_files(jobs, processes=2)
    expected = sorted(sizes, key=lambda name: -sizes[name])
    assert InProcess.order == [*expected, "gone.py"]
    assert [d.filename for d in found if d.code == "MPC001"] == [str(tmp_path / "gone.py")]


def test_workers_inherit_the_projects_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``-j`` run derives each file's model record once, in the main process, before the
    workers fork: on a cold run each worker used to derive every record of the project."""
    import multiprocessing

    if multiprocessing.get_start_method() != "fork":
        pytest.skip("workers inherit the records only under fork")
    from mpcheck.project import models

    log = tmp_path / "derived.log"
    derive = models.record_of

    def logged(data: bytes, path: str) -> Any:
        with log.open("a") as out:
            out.write(f"{os.getpid()} {path}\n")
        return derive(data, path)

    monkeypatch.setattr(models, "record_of", logged)
    models.forget_uses()
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    for n in range(70):
        (project / f"m{n:02d}.py").write_text("import torch\nx = torch.ones(2)\n")
    rules = tuple(all_rules())
    opts = Options(project_root=str(project))
    jobs = [(path, rules, opts) for path in sorted(project.glob("*.py"))]
    try:
        runner.check_files(jobs, processes=2)
    finally:
        models.forget_uses()
    lines = log.read_text().splitlines()
    assert {line.split()[0] for line in lines} == {str(os.getpid())}
    assert len(lines) == 70
