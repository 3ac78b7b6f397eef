"""Check many files, in worker processes when there are enough to pay for them."""

from __future__ import annotations

import gc
import itertools
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mpcheck.codes import INTERNAL_ERROR, INVALID_SYNTAX
from mpcheck.diagnostics import Diagnostic, Position, Severity
from mpcheck.files.cst_nodes import want_constructors
from mpcheck.pipeline import claims
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.ruleset.rule import Rule, rules_by_code

if TYPE_CHECKING:
    from mpcheck.pipeline.claims import Board

# Below this many files a pool costs more (interpreter start-up, imports) than it saves.
POOL_THRESHOLD = 64
# From this many files on, libcst's cheaper node constructors (``cst_nodes``) pay for the
# 25 ms they take to install (at the first parse: a warm run parses nothing).
CONSTRUCTORS_PAY_OFF = 8

# A file, its rules and its options: each file has those of the configuration governing it.
Job = tuple[Path, tuple[type[Rule], ...], Options]
_Work = tuple[str, tuple[str, ...], Options]
# What happened to one file: "analysed", "cached" (its findings taken from the persistent
# cache) or "unreadable".
_Outcome = tuple[list[Diagnostic], str]

# How the files of the last ``check_files`` in this process fared, by outcome (``--verbose``
# prints it; ``bench/cache_runs.py`` reads it to count what a warm run re-analysed).
last_run: Counter[str] = Counter()


def check_files(
    jobs: Sequence[Job], *, processes: int = 0, progress: Callable[[], None] | None = None
) -> list[Diagnostic]:
    """Diagnostics for every file; ``processes=0`` picks a count from the CPUs.

    ``progress`` is called once per file checked (in order, as results arrive).
    """
    work = [(str(path), tuple(r.code for r in rules), opts) for path, rules, opts in jobs]
    # More processes than CPUs cannot speed up CPU-bound work; they only cost memory.
    cpus = os.cpu_count() or 1
    workers = min(processes, cpus) if processes else min(cpus, 8)
    last_run.clear()
    # Files checked through the cache are checked when another file first needs them
    # summarised (:mod:`~mpcheck.pipeline.incremental`): each process is told which files the
    # run has.
    planned = {
        os.path.abspath(name): opts
        for name, _, opts in work
        if opts.cache_dir is not None and opts.project_root is not None
    }
    # Without the cache, a file checked while summarised keeps its findings in memory
    # (:mod:`~mpcheck.pipeline.walked_once`), for its own turn in the same process.
    alone = {
        os.path.abspath(name): (name, codes, opts)
        for name, codes, opts in work
        if opts.cache_dir is None
        and opts.project_root is not None
        and opts.follow_imports != "skip"
        and not name.endswith(".ipynb")
    }
    token = os.urandom(8).hex()  # this run's mark on the cache entries it writes
    many = len(work) >= CONSTRUCTORS_PAY_OFF
    if workers <= 1 or len(work) < POOL_THRESHOLD:
        # a file large enough to exhaust a memory limit is parsed in a process of its own:
        # the parser aborts the process it runs in (issue 34), and that must not be this one
        large = {item[0] for item in work if _size(item) > ISOLATE_BYTES}
        here = {name: item for name, item in alone.items() if item[0] not in large}
        _plan(planned, token, many, None, here)  # (a large file is checked elsewhere)
        found = []
        if large:
            isolated = [item for item in work if item[0] in large]
            found = _collect(_isolated(isolated, (planned, token, many, None, {})), progress)
        return found + _collect(map(_check_one, [w for w in work if w[0] not in large]), progress)
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: only when used
    from concurrent.futures.process import BrokenProcessPool

    _plan(planned, token, many, None, alone)
    by_name = {os.path.abspath(item[0]): item for item in work}
    first = [by_name[name] for name in _shared_first(planned) if name in by_name]
    checked = {item[0] for item in first}
    # Largest files first: the last chunks are then short, so no worker runs on long after
    # the other, and the largest syntax trees are built while the store is still small.
    work = sorted((item for item in work if item[0] not in checked), key=_size, reverse=True)
    chunk = max(1, len(work) // (workers * 8))
    board = None
    if planned:  # each file walked by one worker, whichever needs it first (:mod:`.claims`)
        from mpcheck.pipeline.claims import Board

        board = Board(sorted(planned), workers)
    init = (planned, token, many, board, alone)
    _share_records(list(by_name.values()))
    outcomes: list[_Outcome] = []
    ordered = first + work
    try:
        with ProcessPoolExecutor(
            max_workers=workers, initializer=_worker, initargs=(os.getpid(), *init)
        ) as pool:
            dealt = pool.map(_check_one, first)  # one at a time, in their order
            rest = pool.map(_check_one, work, chunksize=chunk)
            for outcome in itertools.chain(dealt, rest):
                outcomes.append(outcome)
                if progress is not None:
                    progress()
    except BrokenProcessPool:  # a worker died (out of memory): the rest, one by one
        outcomes += _collect_progress(
            _isolated(ordered[len(outcomes) :], (planned, token, many, None, {})), progress
        )
    return _collect(outcomes, None)


def _share_records(work: Sequence[_Work]) -> None:
    """Join each project's model records here, before the workers fork: they inherit them
    instead of each deriving every file's record (on a cold run that was a tenth of each
    worker's time, paid once per worker). A spawned worker inherits nothing, so only
    under fork."""
    import multiprocessing

    if multiprocessing.get_start_method(allow_none=False) != "fork":
        return
    from mpcheck.project.models import uses_for

    roots = {
        (opts.project_root, opts.cache_dir)
        for _, _, opts in work
        if opts.project_root is not None and opts.follow_imports != "skip"
    }
    for root, cache_dir in sorted(roots, key=str):
        uses_for(root, cache_dir)


# A file above this size is checked in a process of its own when the main process would
# check it (see ``check_files``): a megabyte of source can take a gigabyte to parse.
ISOLATE_BYTES = 512 * 1024


_Alone = dict[str, tuple[str, tuple[str, ...], Options]]  # (see ``walked_once.plan``)
_Init = tuple[dict[str, Options], str, bool, "Board | None", _Alone]


def _isolated(items: Sequence[_Work], init: _Init) -> list[_Outcome]:
    """Each file in turn in a one-worker pool; a file whose worker dies while it is the
    pool's first task (the parser aborts when memory runs out) gets MPC002, and the files
    after it go on in a new worker. (A file that was not first is retried first: a result
    lost with the worker then never blames the wrong file.)"""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    out: list[_Outcome] = []
    left = list(items)
    while left:
        with ProcessPoolExecutor(1, initializer=_worker, initargs=(os.getpid(), *init)) as pool:
            futures = [pool.submit(_check_one, item) for item in left]
            try:
                for future in futures:
                    out.append(future.result())
                left = []
            except BrokenProcessPool:
                done = len(out) - (len(items) - len(left))
                if done == 0:
                    out.append(([_crashed(left[0][0])], "unreadable"))
                    done = 1
                left = left[done:]
    return out


def _worker(
    parent: int,
    planned: dict[str, Options],
    token: str,
    many: bool,
    board: Board | None,
    alone: _Alone,
) -> None:
    """A worker's start: it dies with the main process (a SIGTERM or SIGHUP to ``mpcheck``
    must not leave workers behind), then prepares as :func:`_plan` says."""
    _die_with(parent)
    _plan(planned, token, many, board, alone)


def _die_with(parent: int) -> None:
    """Linux: the kernel kills this process when its parent ends (``PR_SET_PDEATHSIG``);
    elsewhere a thread watches the parent. Either way, a parent already gone ends it now."""
    if os.getpid() == parent:  # (an executor that runs its tasks in this process)
        return
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        armed = False
    if not armed:
        import threading

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # (it ended before the signal was armed)
        os._exit(1)


def _crashed(filename: str) -> Diagnostic:
    message = (
        "mpcheck's process ended while analysing this file (out of memory?); it was not "
        "analysed, the other files were"
    )
    return Diagnostic(
        INTERNAL_ERROR.code,
        INTERNAL_ERROR.name,
        message,
        Severity.ERROR,
        filename,
        Position(1, 1),
        Position(1, 2),
        noqa_row=1,
    )


# A module imported by at least this many others is dealt to the workers first and walked
# by one of them (the others read its summary from the cache) instead of by each.
SHARED_IMPORTERS = 10


def _shared_first(planned: dict[str, Options]) -> list[str]:
    """The files of the run the workers check first, in order (see
    ``incremental.shared_first``). With the cache only: it hands their summaries over."""
    if not planned:
        return []
    from mpcheck.pipeline.incremental import shared_first

    return shared_first(SHARED_IMPORTERS)


def tune_collector() -> None:
    """Make the garbage collector fit a run that builds millions of syntax-tree nodes.

    The nodes hold no reference cycles (they are freed as soon as a file is done), yet with
    the default thresholds the collector scans the growing heap again and again: a fifth of
    the CPU of a cold run on transformers. What start-up built is frozen out of collections,
    and each generation is collected less often (mypy does the same for the same reason);
    5,000 measured faster than 100,000, whose young generation no longer fits the caches.
    Only for a batch run (the CLI and its workers); a host such as flake8, which checks file
    by file, keeps its own settings.
    """
    gc.freeze()
    gc.set_threshold(5000, 50, 100)


def _plan(
    planned: dict[str, Options],
    token: str,
    many: bool,
    board: Board | None = None,
    alone: _Alone | None = None,
) -> None:
    """Prepare a process (the main one, or a worker) for the run; ``board``, in a worker:
    the claims on the run's files it takes part in (:mod:`mpcheck.pipeline.claims`);
    ``alone``: the files checked without the cache (:mod:`mpcheck.pipeline.walked_once`)."""
    if board is not None:
        from mpcheck.pipeline.claims import join

        join(board)
    tune_collector()  # in the main process and in each worker (a spawned one inherits nothing)
    if many:
        want_constructors()
    if (
        planned or "mpcheck.pipeline.incremental" in sys.modules
    ):  # (a run without the cache: not loaded)
        from mpcheck.pipeline.incremental import plan

        plan(planned, token)
    if alone or "mpcheck.pipeline.walked_once" in sys.modules:  # (a forked worker: reset)
        from mpcheck.pipeline import walked_once

        walked_once.plan(alone or {})


def _size(item: _Work) -> int:
    try:
        return os.path.getsize(item[0])
    except OSError:  # reported when it is checked
        return 0


def _collect_progress(
    outcomes: list[_Outcome], progress: Callable[[], None] | None
) -> list[_Outcome]:
    """``outcomes`` (all arrived at once), each counted on the progress line."""
    if progress is not None:
        for _ in outcomes:
            progress()
    return outcomes


def _collect(results: Iterable[_Outcome], progress: Callable[[], None] | None) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for found, outcome in results:
        out += found
        last_run[outcome] += 1
        if progress is not None:
            progress()
    return out


def _check_one(item: _Work) -> _Outcome:
    filename, codes, options = item
    by_code = rules_by_code()
    rules = tuple(by_code[c] for c in codes if c in by_code)
    try:
        if options.cache_dir is not None and not filename.endswith(".ipynb"):
            from mpcheck.pipeline.incremental import check_cached

            try:
                return check_cached(filename, rules, options)  # reads the file only if it must
            finally:
                claims.release_all()
        if "mpcheck.pipeline.walked_once" in sys.modules:
            from mpcheck.pipeline.walked_once import take

            found = take(os.path.abspath(filename))  # checked while summarised, in this process
            if found is not None:
                return found, "analysed"
        data = Path(filename).read_bytes()
    except OSError as exc:
        return [_unreadable(filename, exc)], "unreadable"
    if filename.endswith(".ipynb"):  # (notebooks are not cached)
        return _check_notebook(data, filename, rules, options), "analysed"
    return check_source(data, filename, rules, options), "analysed"


def _unreadable(filename: str, exc: OSError) -> Diagnostic:
    message = f"cannot read the file: {exc.strerror or exc}"
    pos = Position(1, 1)
    return Diagnostic(
        INVALID_SYNTAX.code,
        INVALID_SYNTAX.name,
        message,
        Severity.ERROR,
        filename,
        pos,
        Position(1, 2),
        noqa_row=1,
    )


def _check_notebook(
    data: bytes, filename: str, rules: tuple[type[Rule], ...], options: Options
) -> list[Diagnostic]:
    from mpcheck.files.notebook import check_notebook_bytes  # a bad notebook is its MPC001

    return check_notebook_bytes(data, filename, rules, options)
