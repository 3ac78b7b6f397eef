"""Which functions only run when a model is built: before any cast of it.

A module's ``__init__`` runs when the model is built, and so does a function that only
``__init__`` bodies, class bodies or the module's top level call (``sinusoids(n_ctx, d)`` in
``AudioEncoder.__init__``; ``get_1d_sincos_pos_embed`` called only from such a function).
What such code computes from tensors made without ``dtype=`` is made in the default dtype
(float32), and ``model.half()`` later casts the stored result: the arithmetic itself never
ran in half. A function also named anywhere else (called from ``forward``, stored as a
callback, handed a dtype or a half tensor) may run with the model's activations, and keeps
the premise that it runs in half.

Each file's part of the answer comes from one cheap pass over its code (strings and comments
blanked, :func:`mpcheck.project.records.blank`), kept in its :class:`ModelRecord`:
``calls`` (a function's name, and the class whose ``__init__`` calls it, or ``""`` at import
time), ``edges`` (a function called only by another function of the file: name, caller),
and ``runs``, a Bloom filter of every other name the file writes (a false positive only keeps
the premise). :class:`Construction` joins them over the project.
"""

from __future__ import annotations

import builtins
import keyword
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from zlib import crc32

from mpcheck.project import lines
from mpcheck.project.brackets import closing
from mpcheck.project.lines import line_matches

__all__ = ["RUN_BITS", "Construction", "ConstructionPass", "construction_of"]

RUN_BITS = 4096
_NAME = re.compile(rb"[A-Za-z_]\w*")
# Import statements (parenthesised ones over several lines too): they name, not use.
# (Tried only at the start of a line holding the ``import`` keyword: see :func:`line_matches`.)
_IMPORTS = re.compile(rb"[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)")
_IMPORT_WORD = re.compile(rb"import[ \t]")
# A call of a lowercase name (its receiver, ``self.`` or ``torch.nn.``, read back from it).
# (The look-behind after the first letter: a pattern led by a set of letters is tried only
# at those, where a leading look-behind is tried at every offset.)
_CALLED = re.compile(rb"([a-z_](?<!\w[a-z_])\w*)[ \t]*\(")
# A dtype or half tensor handed over: the callee then computes in what it is given.
_DTYPE_WORDS = re.compile(rb"dtype|float16|bfloat16|\bhalf\b|fp16|bf16|autocast")
_SKIP = frozenset(w.encode() for w in (*keyword.kwlist, *dir(builtins), "self", "cls"))
# Receivers that are libraries: their functions are nobody's helper in the project.
_LIBRARIES = frozenset(
    b"torch nn F np numpy math einops functional th scipy random os re sys json logging".split()
)
_INIT, _IMPORT, _TOP, _DEF, _RUN = "init", "import", "top", "def", "run"
# ``PE = make_table(1000, 64)`` at the top level: a table made at import. A bare ``main()``
# or ``model.fit(...)`` there is a script running (after its casts), no construction.
_BOUND = re.compile(rb"[A-Za-z_][\w.]*[ \t]*(?::[^=\n]*)?=[^=]")

# One pass's findings: ((name, caller class), ...), ((name, caller function), ...), Bloom bits.
ConstructionPass = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], int]


def construction_of(
    code: bytes, module: str, headers_read: list[re.Match[bytes]] | None = None
) -> ConstructionPass:
    """The construction calls, helper edges and run-time names of a file's blanked ``code``
    (``module``: its dotted module path, which qualifies the classes named as callers;
    ``headers_read``: its headers, :func:`~mpcheck.project.lines.headers`, when read: the
    import statements blanked below hold none)."""
    calls: set[tuple[str, str]] = set()
    edges: set[tuple[str, str]] = set()
    blanked, spans = _blank_imports(code)  # ``from .tables import sinusoids`` names only
    if headers_read is None or not _headers_kept(code, spans, headers_read):
        headers_read = lines.headers(blanked)
    headers, code = headers_read, blanked
    # a name written more often than it is plainly called or defined is used otherwise
    plain = Counter(m.group(3) for m in headers)
    for start, end, kind, owner in _segments(code, module, headers):
        if kind != _RUN:
            _scan(code, start, end, kind, owner, calls, edges, plain)
    counts = Counter(_NAME.findall(code))
    runs = {w for w, n in counts.items() if n > plain[w] and not w[:1].isupper()} - _SKIP
    kept = tuple(sorted(e for e in edges if e[0].encode() not in runs))
    bits = 0
    for word in runs:
        bits |= _mask(word)
    return tuple(sorted(calls)), kept, bits


def _mask(word: bytes) -> int:
    h = crc32(word)
    return (1 << (h % RUN_BITS)) | (1 << ((h >> 12) % RUN_BITS))


def _segments(
    code: bytes, module: str, found: list[re.Match[bytes]]
) -> list[tuple[int, int, str, str]]:
    """The file cut into (start, end, kind, owner): ``init`` (a class's ``__init__`` body,
    owner the qualified class), ``import`` (class bodies, run when the module is imported),
    ``top`` (an unindented statement of the top level), ``def`` (another function's body,
    owner its name) and ``run`` (the top level's compound statements: a script's loop)."""
    headers = []  # (start of header line, end of body, indent, kind, name)
    for match in found:
        indent = len(match.group(1).expandtabs())
        end = body_end(code, match.end(), indent)
        headers.append((match.start(), end, indent, match.group(2), match.group(3).decode()))
    out: list[tuple[int, int, str, str]] = []
    # (end, kind, owner, class name for its methods) of the open headers, innermost last
    stack: list[tuple[int, str, str, str]] = [(len(code), _IMPORT, "", "")]
    cursor = 0

    def emit(stop: int) -> None:
        nonlocal cursor
        if stop <= cursor:
            return
        _, kind, owner, _ = stack[-1]
        if len(stack) == 1:
            out.extend(_top(code, cursor, stop))
        else:
            out.append((cursor, stop, kind, owner))
        cursor = stop

    for start, end, _, what, name in headers:
        while stack[-1][0] <= start:
            emit(stack[-1][0])
            stack.pop()
        emit(start)
        _, parent_kind, _, parent_class = stack[-1]
        at_import = parent_kind == _IMPORT
        if what == b"class":  # (a class built inside a function: ``-``, no construction's)
            qualified = (f"{module}.{name}" if module else name) if at_import else "-"
            stack.append((end, _IMPORT if at_import else _DEF, "", qualified))
        elif name == "__init__" and parent_class not in ("", "-"):
            stack.append((end, _INIT, parent_class, ""))
        else:  # (the methods of a class built inside a function are no one's helpers)
            stack.append((end, _DEF, "" if parent_class == "-" else name, ""))
    while len(stack) > 1:
        emit(stack[-1][0])
        stack.pop()
    emit(len(code))
    return out


def body_end(code: bytes, at: int, indent: int) -> int:
    """Where the body of a header at ``indent`` ends: the next line at that indent or less
    that starts code (a closing bracket or a blank line continues it). (The callers pass
    reads bodies the same way.)"""
    pattern = _ENDS.get(indent)
    if pattern is None:  # (led by the newline before the line: a literal is searched for)
        pattern = _ENDS[indent] = re.compile(rb"\n[ \t]{0,%d}[^\s#)\]}]" % indent)
    nl = code.find(b"\n", at)
    if nl < 0:
        return len(code)
    found = pattern.search(code, nl)
    return found.start() + 1 if found else len(code)


_ENDS: dict[int, re.Pattern[bytes]] = {}


def _top(code: bytes, start: int, stop: int) -> Iterable[tuple[int, int, str, str]]:
    """The top level between ``start`` and ``stop``: unindented statements run at import,
    indented ones (under ``if __name__ == "__main__":``, ``for``, ``with``) are a script's."""
    at = start
    for line in _LINE_START.finditer(code, start, stop):
        if line.start() > at:
            yield at, line.start(), _RUN, ""
        nl = code.find(b"\n", line.start(), stop)
        end = stop if nl < 0 else nl + 1
        yield line.start(), end, _TOP, ""
        at = end
    if at < stop:
        yield at, stop, _RUN, ""


_LINE_START = re.compile(rb"^[^\s]", re.MULTILINE)  # an unindented line's first character


def _scan(
    code: bytes,
    start: int,
    end: int,
    kind: str,
    owner: str,
    calls: set[tuple[str, str]],
    edges: set[tuple[str, str]],
    plain: Counter[bytes],
) -> None:
    """The plain calls (no dtype handed) of one segment: at construction a call, from
    another function's body (by its bare name or on ``self``/``cls``) an edge."""
    if kind == _DEF and not owner or kind == _TOP and not _BOUND.match(code, start):
        return  # (no call there counts: the tests below, once per segment)
    for match in _CALLED.finditer(code, start, end):
        word = match.group(1)
        if word in _SKIP:
            continue
        at = match.start()
        receiver = _head(code, at)
        if receiver in _LIBRARIES:
            continue
        if kind == _DEF and receiver not in (b"", b"self", b"cls"):
            continue
        if kind == _TOP and receiver:
            continue
        if code[max(0, at - 10) : at].split()[-1:] == [b"def"]:
            continue  # (a header, not a call)
        if _DTYPE_WORDS.search(code, match.end(), closing(code, match.end())):
            continue  # handed a dtype or a half tensor
        plain[word] += 1
        if kind == _DEF:
            edges.add((word.decode(), owner))
        else:
            calls.add((word.decode(), owner))


def _head(code: bytes, at: int) -> bytes:
    """The first name of the dotted receiver before ``at`` (``self`` of ``self.f``, ``torch``
    of ``torch.nn.functional.f``), ``b""`` for a bare name."""
    if at == 0 or code[at - 1] != 0x2E:
        return b""
    window = code[max(0, at - 120) : at]
    chain = window[len(window.rstrip(_CHAIN)) :]
    return chain.split(b".", 1)[0] or b"?"


_CHAIN = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."


def _blank_imports(code: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """``code`` with its import statements blanked (newlines kept), and their spans. A
    pattern led by the newline before a line was tried at every newline of the file, a tenth
    of the pass."""
    pieces: list[bytes] = []
    spans: list[tuple[int, int]] = []
    done = 0
    for match in line_matches(_IMPORTS, _IMPORT_WORD, code):
        pieces += (code[done : match.start()], match.group().translate(SPACES))
        spans.append(match.span())
        done = match.end()
    if not pieces:
        return code, spans
    pieces.append(code[done:])
    return b"".join(pieces), spans


def _headers_kept(code: bytes, spans: list[tuple[int, int]], found: list[re.Match[bytes]]) -> bool:
    """Whether blanking the import ``spans`` of ``code`` leaves its headers ``found`` as they
    are: no header starts inside one, and no code follows one on its last line (only code
    that is no Python, such as ``from a import (b)def f``, differs)."""
    starts = [header.start() for header in found]
    for start, end in spans:
        i = bisect_left(starts, start)
        if i < len(starts) and starts[i] < end:
            return False
        nl = code.find(b"\n", end)
        if code[end : nl if nl >= 0 else len(code)].strip():
            return False
    return True


# A table for ``bytes.translate``: every byte but a newline becomes a space (one C call).
SPACES = bytes(0x0A if byte == 0x0A else 0x20 for byte in range(256))


class Construction:
    """The project's construction-only functions, joined from each file's pass."""

    def __init__(self, passes: Iterable[ConstructionPass], default_dtype: bool = False) -> None:
        self.calls: dict[str, set[str]] = {}
        self.edges: dict[str, set[str]] = {}
        self.runs: list[int] = []
        for calls, edges, runs in passes:
            for name, caller in calls:
                self.calls.setdefault(name, set()).add(caller)
            for name, caller in edges:
                self.edges.setdefault(name, set()).add(caller)
            self.runs.append(runs)
        # ``torch.set_default_dtype(torch.bfloat16)`` anywhere: construction may run in half
        self.default_dtype = default_dtype
        self._memo: dict[str, frozenset[str] | None] = {}

    def callers(self, name: str) -> frozenset[str] | None:
        """The classes whose ``__init__`` (``""``: import time) runs the function ``name``,
        when nothing else does; None when it may run elsewhere (or is never called)."""
        if self.default_dtype:
            return None
        return self.constructing(name)

    def constructing(self, name: str) -> frozenset[str] | None:
        """:meth:`callers`, whatever the default dtype: the classes whose ``__init__`` runs the
        function ``name`` when nothing else does (what it stores on a module is there before
        any cast of the module, in whatever dtype construction runs)."""
        if name not in self._memo:
            self._memo[name] = None  # (a cycle of helpers proves nothing)
            self._memo[name] = self._decide(name)
        return self._memo[name]

    def _decide(self, name: str) -> frozenset[str] | None:
        direct, via = self.calls.get(name, set()), self.edges.get(name, set())
        if not direct and not via:
            return None
        mask = _mask(name.encode())
        if any(bits & mask == mask for bits in self.runs):
            return None
        found = set(direct)
        for caller in via:
            above = self.constructing(caller)
            if above is None:
                return None
            found.update(above)
        return frozenset(found)

    @property
    def digest(self) -> str:
        """Every construction-only function with its callers (a cache key part)."""
        names = sorted(n for n in (*self.calls, *self.edges) if self.constructing(n) is not None)
        found = [(n, sorted(self.constructing(n) or ())) for n in names]
        return repr((self.default_dtype, found))
