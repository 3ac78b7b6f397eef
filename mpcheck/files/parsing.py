"""Parse a file with libcst without letting any input take the process down.

libcst's native parser overflows its stack (a segfault: no exception, no output, a broken
``-j`` pool, a dead flake8) on valid but deep code: 200+ nested brackets, or one expression
that chains thousands of operators, unary signs, attribute accesses or adjacent strings.
Such files are measured before libcst sees them, cheaply for the common case (bytes-level
scans at C speed; the tokenizer only for the rare file the scan cannot clear), and the
parse itself runs on a thread with a large stack as a second line of defence. A file that
CPython compiles is never a syntax error, whatever libcst thinks of it.
"""

from __future__ import annotations

import ast
import io
import os
import queue
import re
import threading
import tokenize
from dataclasses import dataclass
from itertools import accumulate

import libcst as cst

from mpcheck.diagnostics import Position
from mpcheck.files import cst_nodes

__all__ = ["MAX_CHAIN", "MAX_NESTING", "Unparsable", "parse", "parseable"]

# CPython refuses more than 200 nested brackets; libcst crashes somewhere above 1,000.
MAX_NESTING = 200
# libcst crashed from about 4,000 chained links on an 8 MiB stack (adjacent strings were the
# weakest case); this leaves a margin, and no file of transformers or diffusers comes close.
MAX_CHAIN = 2000
PARSER_STACK = 256 * 1024 * 1024  # virtual: only the pages a deep parse touches are used

_BRACKETS = b"()[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = [0] * 256
for _open, _close in (b"()", b"[]", b"{}"):
    _STEP[_open], _STEP[_close] = 1, -1
# Bytes that can link two operands of one expression (operators, dots, quotes, calls).
_LINK_BYTES = b".+-*/%@&|^~<>!'\"(["
_NOT_LINK = bytes(b for b in range(256) if b not in _LINK_BYTES)
_SEMICOLON_AS_COMMA = bytes.maketrans(b";", b",")
_LINK_WORDS = re.compile(rb"\b(?:and|or|not|if|else|is|in|await|lambda)\b")
_LINK_KEYWORDS = frozenset("and or not if else is in await lambda".split())
_RESETS = frozenset({",", ";", "="})


@dataclass(frozen=True)
class Unparsable:
    """Why a file was not parsed: ``syntax`` (CPython rejects it too) or not."""

    message: str
    position: Position
    syntax: bool


def parse(data: bytes) -> cst.Module | Unparsable:
    """The module, or why it cannot be parsed (never a crash)."""
    problem = _too_deep(data) or _too_long_chain(data)
    if problem is not None:
        return problem
    try:
        return _parser().parse(data)
    except cst.ParserSyntaxError as exc:
        return _rejected(data, exc.message, Position(exc.editor_line, exc.editor_column))
    except cst.CSTValidationError as exc:  # what the grammar lets through (cst_nodes)
        return _rejected(data, str(exc), Position(1, 1))
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return Unparsable(f"cannot decode the file: {exc}", Position(1, 1), syntax=True)
    except RecursionError:
        return Unparsable("the file is nested too deeply to parse", Position(1, 1), False)


def parseable(data: bytes) -> bool:
    """Whether :func:`parse` would hand the file to libcst (it is not too deep or too long
    a chain for it): a caller that reads the file with CPython's parser instead asks first."""
    return _too_deep(data) is None and _too_long_chain(data) is None


_Result = tuple[int, "cst.Module | None", "BaseException | None"]


class _ParseThread:
    """A daemon thread with a large stack that parses one file at a time for its callers.

    Two queues and a lock rather than a ``ThreadPoolExecutor``: ``concurrent.futures``
    imports ``logging`` and more, which a one-file check would pay for on every run.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one request in flight at a time
        self._sent = 0  # numbers the requests: a result left by an interrupted caller is dropped
        self._requests: queue.SimpleQueue[tuple[int, bytes]] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[_Result] = queue.SimpleQueue()
        previous = threading.stack_size(PARSER_STACK)
        try:
            thread = threading.Thread(target=self._serve, name="mpcheck-parse", daemon=True)
            thread.start()  # the thread starts now, with that stack
        finally:
            threading.stack_size(previous)

    def _serve(self) -> None:
        cst_nodes.parsing_here()  # parsed trees need no validation (see files.cst_nodes)
        while True:
            number, data = self._requests.get()
            try:
                self._results.put((number, cst.parse_module(data), None))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
                self._results.put((number, None, exc))

    def parse(self, data: bytes) -> cst.Module:
        with self._lock:
            self._sent += 1
            self._requests.put((self._sent, data))
            while True:
                number, module, error = self._results.get()
                if number == self._sent:
                    break
        if error is not None:
            raise error
        assert module is not None
        return module


_thread: tuple[int, _ParseThread] | None = None


def _parser() -> _ParseThread:
    """One parsing thread per process. A forked worker (``-j``, flake8's pool) inherits the
    object but not the thread, so it starts its own."""
    global _thread
    if _thread is None or _thread[0] != os.getpid():
        if cst_nodes.wanted():
            cst_nodes.install_constructors()
        _thread = (os.getpid(), _ParseThread())
    return _thread[1]


def _compile_error(data: bytes) -> tuple[str, Position] | None | Exception:
    """CPython's verdict: its SyntaxError, None when it compiles, or the exception it raised."""
    try:
        compile(data, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return f"SyntaxError: {err.msg}", Position(err.lineno or 1, max(err.offset or 1, 1))
    except (ValueError, RecursionError, MemoryError) as exc:
        return exc
    return None


def _rejected(data: bytes, problem: str, where: Position) -> Unparsable:
    """libcst said no (its parser, or its validation of a node the grammar let through): a
    syntax error if CPython agrees (with CPython's message and place, the ones users
    recognise), else a file mpcheck cannot analyse."""
    verdict = _compile_error(data)
    if isinstance(verdict, tuple):
        return Unparsable(verdict[0], verdict[1], syntax=True)
    if verdict is None:
        message = f"libcst cannot parse this valid file ({problem}); it was not analysed"
        return Unparsable(message, where, syntax=False)
    return Unparsable(f"SyntaxError: {problem}", Position(1, 1), syntax=True)


def _too_deep(data: bytes) -> Unparsable | None:
    """A file nested deeper than CPython allows (which would crash libcst).

    Counting brackets inside strings and comments overestimates the depth, so a file over
    the limit by that count is compiled to be sure; almost every file never gets that far.
    """
    brackets = data.translate(None, _NOT_BRACKETS)
    if len(brackets) <= 2 * MAX_NESTING:
        return None
    # clamped at 0, so closing brackets in a string cannot hide the nesting that follows
    depths = accumulate(map(_STEP.__getitem__, brackets), lambda a, b: max(a + b, 0))
    if max(depths) <= MAX_NESTING:
        return None
    verdict = _compile_error(data)
    if isinstance(verdict, tuple):
        return Unparsable(verdict[0], verdict[1], syntax=True)
    if verdict is None:
        return None
    return Unparsable("the file is nested too deeply to parse", Position(1, 1), syntax=False)


def _too_long_chain(data: bytes) -> Unparsable | None:
    """One expression chaining more than ``MAX_CHAIN`` operators, signs, dots or strings.

    A chain that long has that many link bytes or keywords between two commas or
    semicolons, so pieces without that many are cleared at C speed; only a file with such a
    piece (none in transformers or diffusers) is tokenized to measure its real chains.
    """
    for piece in data.translate(_SEMICOLON_AS_COMMA).split(b","):
        if len(piece) < MAX_CHAIN:
            continue
        links = len(piece.translate(None, _NOT_LINK))
        if links >= MAX_CHAIN or links + len(_LINK_WORDS.findall(piece)) >= MAX_CHAIN:
            return _measure_chains(data)
    return None


def _measure_chains(data: bytes) -> Unparsable | None:
    run, start = 0, (1, 0)
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or tok.string in _RESETS:
                run = 0
            elif tok.type == tokenize.STRING or (
                tok.type == tokenize.OP and tok.string not in ")]}:"
            ):
                run += 1
            elif tok.type == tokenize.NAME and tok.string in _LINK_KEYWORDS:
                run += 1
            else:
                continue
            if run == 1:
                start = tok.start
            if run > MAX_CHAIN:
                message = (
                    f"an expression chains more than {MAX_CHAIN} operators or strings, "
                    "more than libcst's parser can take; the file was not analysed"
                )
                return Unparsable(message, Position(start[0], start[1] + 1), syntax=False)
    except (tokenize.TokenError, SyntaxError):
        return None  # libcst and CPython will say what is wrong with it
    return None
