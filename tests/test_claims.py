"""``-j`` workers claim the files they walk: each walked once, and no wait can deadlock.

Two workers are played here by two threads, each with its own view of one board, as two
processes would share it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mpcheck.pipeline import incremental
from mpcheck.pipeline import pool as runner
from mpcheck.pipeline.claims import DONE, FREE, Board, _Worker
from mpcheck.pipeline.one_file import Options
from mpcheck.ruleset.rule import all_rules

FILES = ["/p/a.py", "/p/b.py", "/p/c.py"]


def test_a_file_another_worker_walks_is_waited_for_then_read_from_the_cache() -> None:
    board = Board(FILES, workers=2)
    first, second = _Worker(board), _Worker(board)
    assert first.acquire("/p/a.py") is True  # claimed: first walks it
    answers: list[bool] = []
    waiting = threading.Thread(target=lambda: answers.append(second.acquire("/p/a.py")))
    waiting.start()
    time.sleep(0.05)
    assert answers == []  # still waiting for the first's walk
    first.end("/p/a.py", DONE)
    waiting.join(timeout=5)
    assert answers == [False]  # recorded meanwhile: read it from the cache
    assert board.owner[0] == DONE


def test_a_walk_that_was_not_recorded_frees_the_file_for_the_waiting_worker() -> None:
    board = Board(FILES, workers=2)
    first, second = _Worker(board), _Worker(board)
    assert first.acquire("/p/b.py") is True
    answers: list[bool] = []
    waiting = threading.Thread(target=lambda: answers.append(second.acquire("/p/b.py")))
    waiting.start()
    time.sleep(0.05)
    first.release_all()  # its task ended without recording b.py
    waiting.join(timeout=5)
    assert answers == [True]  # the second claims and walks it
    assert board.owner[1] == second.me


def test_a_worker_does_not_wait_for_a_worker_that_waits_for_it() -> None:
    board = Board(FILES, workers=2)
    first, second = _Worker(board), _Worker(board)
    assert first.acquire("/p/a.py") is True
    assert second.acquire("/p/b.py") is True
    answers: list[bool] = []
    waiting = threading.Thread(target=lambda: answers.append(first.acquire("/p/b.py")))
    waiting.start()
    time.sleep(0.05)
    assert answers == []  # the first waits for the second's b.py
    # the second now needs a.py, which the waiting first holds: it walks a.py itself
    assert second.acquire("/p/a.py") is True
    assert board.owner[0] == first.me  # (without claiming it: the first's claim stands)
    second.end("/p/b.py", DONE)
    waiting.join(timeout=5)
    assert answers == [False]


def test_files_outside_the_run_and_a_process_outside_a_pool_are_walked_at_once() -> None:
    board = Board(FILES, workers=2)
    worker = _Worker(board)
    assert worker.acquire("/elsewhere/x.py") is True
    assert [board.owner[n] for n in range(len(FILES))] == [FREE, FREE, FREE]


def test_outside_a_pool_a_walk_not_kept_as_a_check_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``b.py`` is walked inside ``a.py``'s check and meets ``a.py`` (open) through an import
    inside a function: not kept as a check. With no other worker to read it, its summary is
    not recorded either; its own check records it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "import torch\nfrom pkg.b import g\n\n\ndef f(x):\n    return x\n\n\n"
        "def use(x):\n    return g(x).half()\n"
    )
    (pkg / "b.py").write_text(
        "import torch\n\n\ndef g(x):\n    from pkg.a import f\n\n    return f(x).float()\n"
    )
    recorded: list[tuple[str, bool]] = []
    real = incremental._Run.record

    def logged(self: incremental._Run, path: Path, *args: Any, **kwargs: Any) -> None:
        recorded.append((path.name, kwargs.get("checked", True)))
        real(self, path, *args, **kwargs)

    monkeypatch.setattr(incremental._Run, "record", logged)
    options = Options(project_root=str(tmp_path), cache_dir=str(tmp_path / "cache"))
    jobs = [(p, tuple(all_rules()), options) for p in sorted(pkg.glob("*.py"))]
    incremental.forget()
    try:
        runner.check_files(jobs, processes=1)
    finally:
        incremental.forget()
    assert ("b.py", False) not in recorded
    assert recorded.count(("b.py", True)) == 1
