"""Which ``-j`` worker walks each file of the run: each file once, whoever needs it first.

Every worker keeps its own summaries, and a file's check walks the project files it looks
names up in (``modeling_utils.py`` from every model). So the main process used to check the
modules many files import alone before forking its workers (15 s of a cold transformers run
with one core idle), and both workers walked a helper either needed before the other had
finished it. A worker now claims a file before it walks it, in memory the workers share; a
worker that needs a file another one is walking waits for it, then reads its summary (and, at
its own turn, its findings) from the cache, which that walk has written. The shared modules
are simply dealt to the workers first.

Waiting cannot deadlock: a worker does not wait for a worker that waits, directly or through
others, for a file it has claimed itself; it walks the file too, as it always could. A claim
ends when its walk is recorded in the cache, or, when the walk is not recorded (its check
declined to walk it), when the worker's task ends. A walk nested in another that met an
import cycle the file's own check would not meet records its summary only, for this run's
lookups (the other workers then see what this one's lookups see), and its check is walked
again at its own turn.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from multiprocessing.synchronize import Lock

__all__ = ["Board", "acquire", "finished", "join", "release", "release_all", "sharing"]

FREE, DONE = 0, -1  # else: the worker number (1, 2, ...) whose claim it is
_POLL_LONGEST = 0.005  # seconds between two looks at a claim, at most


class Cells(Protocol):
    """Integers in memory the workers share (``multiprocessing.RawArray``)."""

    def __getitem__(self, index: int, /) -> int: ...

    def __setitem__(self, index: int, value: int, /) -> None: ...

    def __len__(self) -> int: ...


class Board:
    """What the main process makes before forking: the run's files, who holds each, and
    what each worker waits for (a file's number plus one; 0: nothing)."""

    def __init__(self, names: Sequence[str], workers: int) -> None:
        import multiprocessing
        from multiprocessing.sharedctypes import RawArray

        self.names = list(names)
        self.owner: Cells = RawArray("i", len(self.names))
        self.waiting: Cells = RawArray("i", workers + 1)  # (worker numbers start at 1)
        self.joined: Cells = RawArray("i", 1)
        self.lock: Lock = multiprocessing.Lock()


class _Worker:
    """One worker's part: its number on the board and the claims it holds."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.number = {name: n for n, name in enumerate(board.names)}
        with board.lock:
            board.joined[0] += 1
            self.me = board.joined[0]
        self.held: set[int] = set()

    def acquire(self, name: str) -> bool:
        file = self.number.get(name)
        if file is None:
            return True
        board = self.board
        while True:
            with board.lock:
                holder = board.owner[file]
                if holder == DONE:
                    return False
                if holder in (FREE, self.me):
                    board.owner[file] = self.me
                    self.held.add(file)
                    return True
                if self._waits_for_me(holder):
                    return True  # walked here too, unclaimed: nobody waits for this walk
                board.waiting[self.me] = file + 1
            pause = 0.0002
            while board.owner[file] == holder:
                time.sleep(pause)
                pause = min(2 * pause, _POLL_LONGEST)
            board.waiting[self.me] = 0

    def _waits_for_me(self, worker: int) -> bool:
        """Whether ``worker`` waits, directly or through others, for a claim of this one."""
        board, seen = self.board, set()
        while worker not in seen:
            seen.add(worker)
            file = board.waiting[worker] - 1
            if file < 0:
                return False
            worker = board.owner[file]
            if worker == self.me:
                return True
            if worker <= FREE:
                return False
        return False

    def end(self, name: str, state: int) -> None:
        """This worker's claim on ``name``, if it holds one, ends: ``DONE`` or ``FREE``."""
        file = self.number.get(name)
        if file is not None and file in self.held:
            self.board.owner[file] = state
            self.held.discard(file)

    def release_all(self) -> None:
        with self.board.lock:
            for file in self.held:
                self.board.owner[file] = FREE
        self.held.clear()


_worker: _Worker | None = None


def join(board: Board) -> None:
    """In a worker, as it starts: take part in the run's claims (a worker beyond the number
    the board was made for, which a pool replacing a worker could start, walks on its own)."""
    global _worker
    worker = _Worker(board)
    _worker = worker if worker.me < len(board.waiting) else None


def sharing() -> bool:
    """Whether this process walks files for other workers too (a ``-j`` worker with a board)."""
    return _worker is not None


def acquire(name: str) -> bool:
    """Before walking ``name`` (an absolute path): True when this process is to walk it
    (claimed now, or not a file of the run, or outside a worker); False when another worker
    has recorded it meanwhile (waiting for it, when that cannot deadlock)."""
    return True if _worker is None else _worker.acquire(name)


def finished(name: str) -> None:
    """This process's walk of ``name`` is recorded in the cache."""
    if _worker is not None:
        _worker.end(name, DONE)


def release(name: str) -> None:
    """This process will not walk ``name`` after all (its check declined to)."""
    if _worker is not None:
        _worker.end(name, FREE)


def release_all() -> None:
    """The worker's task is over: a file it walked without recording it is free again."""
    if _worker is not None:
        _worker.release_all()
