"""Callables handed to functions, and models whose input embeddings are cast apart.

A lambda handed as an argument (``self.make(cfg, lambda t: model.encode_text(t))``) runs
where the callee finally calls that parameter (``fn(text)``), under whatever autocast is
around *that* call or around the call that handed it (the callee runs inside the caller's
``with``); autocast around another caller's call does not count. What the lambda runs is
what it calls, and a method of the project that calls or hands on one of its own modules
(``encode_clip(text_encoder=self.text_encoder_1)``) runs that module.

A module whose input embeddings are cast on their own (``enc.get_input_embeddings().to(
dtype=...)``; transformers' and every model's contract: the input embeddings are the module
whose output the model's first layer takes) is split: called without autocast, its layers
get the embeddings' dtype. Where the two dtypes differ, the first norm or Linear raises
(``expected scalar type Float but found Half``, ``mixed dtype (CPU)``); under CUDA autocast
``layer_norm`` runs in float32 and Linear recasts, and the model runs.

Each file's part comes from the cheap pass over its blanked code
(:func:`mpcheck.project.records.blank`), only in files that write ``lambda`` or
``get_input_embeddings``, and for methods that call or hand on their own attributes.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from mpcheck.files.hashing import hex_digest
from mpcheck.project.patterns import compiled

__all__ = ["NONE", "Callables", "CallablesPass", "SplitRun", "callables_of"]

# (lambdas: (callee leaf, slot, what the body calls, line, under autocast, the attributes the
# call's earlier arguments name: ``model.text_encoder_1`` handed beside the lambda)),
# (splits: (the module's name, line, column, the cast as written)),
# (runs: (method, the own attributes it calls or hands on, space-separated))
Handed = tuple[str, str, tuple[str, ...], int, bool, tuple[str, ...]]
Split = tuple[str, int, int, str]
CallablesPass = tuple[tuple[Handed, ...], tuple[Split, ...], tuple[tuple[str, str], ...]]
NONE: CallablesPass = ((), (), ())

_LAMBDA = re.compile(rb"\blambda\b")
_STORED = re.compile(rb"(?:^|\n)[ \t]*(\w+)[ \t]*=[ \t]*$")
_CALLEE = re.compile(rb"([A-Za-z_][\w.]*)\s*$")
_KEYWORD = re.compile(rb"^\s*(\w+)\s*=(?!=)")
_CALLED = re.compile(rb"(\w+)\s*\(")
_ATTR = re.compile(rb"\.(\w+)")
# The cast after ``.get_input_embeddings()``; the receiver before it is read back (a pattern
# led by ``[A-Za-z_][\w.]*`` was tried at every letter and backtracked over each chain).
_SPLIT = re.compile(rb"\.get_input_embeddings\(\s*\)\s*\.(to|float|half|bfloat16|double|type)\(")
_DTYPE_WORDS = re.compile(rb"dtype|float|half|bfloat|bf16|fp16|fp32")
# (led by the keyword, its word boundary checked behind it: ``\b`` first is tried everywhere)
_METHOD = re.compile(rb"def(?<!\wdef)[ \t]+(\w+)[ \t]*\(\s*self\b")
_OWN = re.compile(rb"self\.(\w+)[ \t]*(?=[(,)])")
_WITH = re.compile(rb"^[ \t]*with\b[^\n]*autocast")
_OPEN, _CLOSE = b"([{", b")]}"
_IDENT = frozenset(
    bytes([c]) for c in b"_.0123456789" + bytes(range(65, 91)) + bytes(range(97, 123))
)
_LEADING = frozenset(bytes([c]) for c in b"_" + bytes(range(65, 91)) + bytes(range(97, 123)))


def callables_of(data: bytes, code: bytes) -> CallablesPass:
    """The file's part (see the module docstring): ``data`` as written, ``code`` blanked."""
    lambdas = _lambdas(code) if b"lambda" in code else ()
    splits = _splits(data, code) if b"get_input_embeddings" in code else ()
    return tuple(lambdas), tuple(splits), tuple(_runs(code))


def _lambdas(code: bytes) -> list[Handed]:
    """Each lambda handed as an argument of a call (see :data:`Handed`), written there or
    stored in a name first (``fn = lambda t: ...``, then ``make(cfg, fn)``)."""
    out: list[Handed] = []
    covered: set[int] | None = None
    uses: list[tuple[int, bytes]] = []  # (where an argument stands, the lambda's body)
    for match in _LAMBDA.finditer(code):
        stored = _STORED.search(code, max(0, match.start() - 100), match.start())
        body = _body(code, match.end(), statement=stored is not None)
        if stored is None:
            uses.append((match.start(), body))
            continue
        name = compiled(rb"(?<![\w.])" + re.escape(stored.group(1)) + rb"(?=\s*[,)])")
        uses.extend((use.start(), body) for use in name.finditer(code, match.end()))
    for at, body in uses:
        found = _argument(code, at)
        if found is None:
            continue
        callee, slot, opening = found
        beside = tuple(sorted({b.decode() for b in _ATTR.findall(code, opening, at)}))
        called = tuple(sorted({c.decode() for c in _CALLED.findall(body)} - {"lambda"}))
        if not called:
            continue
        if covered is None:
            covered = _covered(code)
        line = code.count(b"\n", 0, at) + 1
        out.append((callee, slot, called, line, line in covered, beside))
    return out


def _argument(code: bytes, at: int) -> tuple[str, str, int] | None:
    """The call a lambda at ``at`` is an argument of: (its callee's last name, the slot: the
    keyword, or the position among positional arguments; where its ``(`` is)."""
    depth, i, start = 0, at - 1, max(0, at - 4000)
    separators: list[int] = []
    while i >= start:
        ch = code[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            if depth == 0:
                break
            depth -= 1
        elif ch == 0x2C and depth == 0:  # ``,``
            separators.append(i)
        elif ch == 0x3B and depth == 0:  # ``;``: another statement
            return None
        i -= 1
    else:
        return None
    if code[i] != 0x28:  # not a call's ``(``
        return None
    head = _CALLEE.search(code, max(0, i - 200), i)
    if head is None or head.group(1).split(b".")[-1] in (b"lambda", b"if", b"return"):
        return None
    own = code[(separators[0] + 1) if separators else i + 1 : at]
    keyword = _KEYWORD.match(own)
    if keyword is not None:
        return head.group(1).split(b".")[-1].decode(), keyword.group(1).decode(), i
    bounds = [i, *reversed(separators)]
    position = sum(
        1
        for a, b in zip(bounds, bounds[1:], strict=False)
        if not _KEYWORD.match(code[a + 1 : b]) and not code[a + 1 : b].strip().startswith(b"*")
    )
    return head.group(1).split(b".")[-1].decode(), str(position), i


def _body(code: bytes, at: int, *, statement: bool = False) -> bytes:
    """A lambda's body (after its ``:``), up to the end of the argument it is (``statement``:
    of the assignment it is the value of)."""
    depth, i, colon = 0, at, -1
    while i < len(code):
        ch = code[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and ch == 0x3A and colon < 0:  # ``:``
            colon = i
        elif depth == 0 and colon >= 0 and (ch == 0x2C or statement and ch == 0x0A):
            break
        i += 1
    return code[colon + 1 : i] if colon >= 0 else b""


def _covered(code: bytes) -> set[int]:
    """The lines inside a ``with`` whose context names autocast (``with torch.autocast(...)``,
    ``with model.autocast_context:``), found by indentation; ``enabled=False`` opens none."""
    stack: list[int] = []
    out = set()
    for row, line in enumerate(code.split(b"\n"), 1):
        text = line.lstrip()
        if not text:
            continue
        indent = len(line) - len(text)
        while stack and stack[-1] >= indent:
            stack.pop()
        if stack:
            out.add(row)
        if _WITH.match(line) and re.search(rb"enabled\s*=\s*False", line) is None:
            stack.append(indent)
    return out


def _splits(data: bytes, code: bytes) -> list[Split]:
    """Each cast of a module's input embeddings to a dtype: (the module's last name, line,
    column, the statement as written)."""
    out = []
    for match in _SPLIT.finditer(code):
        at = _receiver(code, match.start())
        if at < 0:
            continue
        end = code.find(b")", match.end())
        args = code[match.end() : end if end >= 0 else match.end()]
        if match.group(1) in (b"to", b"type") and not _DTYPE_WORDS.search(args):
            continue  # ``.to(device)``: no cast
        start = code.rfind(b"\n", 0, at) + 1
        stop = code.find(b"\n", at)
        text = data[at : stop if stop >= 0 else len(data)].decode(errors="replace")
        line = code.count(b"\n", 0, at) + 1
        name = code[at : match.start()].split(b".")[-1].decode()
        out.append((name, line, at - start + 1, " ".join(text.split())[:140]))
    return out


def _receiver(code: bytes, dot: int) -> int:
    """Where the dotted receiver ending at ``dot`` starts (its first letter or ``_`` in the
    run of name characters and dots before it; -1: none)."""
    at = dot
    while at > 0 and code[at - 1 : at] in _IDENT:
        at -= 1
    while at < dot and code[at : at + 1] not in _LEADING:
        at += 1
    return at if at < dot else -1


def _runs(code: bytes) -> list[tuple[str, str]]:
    """Each method (not ``__init__``/``forward``) that calls one of its own attributes or hands
    it to a call (``encode(text_encoder=self.text_encoder)``): the attributes it runs. One
    pass: each use belongs to the method whose header last precedes it."""
    heads = [(m.start(), m.group(1).decode()) for m in _METHOD.finditer(code)]
    if not heads:
        return []
    starts = [at for at, _ in heads]
    found: dict[int, set[str]] = {}
    for own in _OWN.finditer(code, starts[0]):
        at = own.start()
        if code[at - 1 : at] in _IDENT:
            continue  # (``myself.x``, ``a.self.x``)
        called = code[own.end() : own.end() + 1] == b"("
        if not called and code[max(0, at - 40) : at].rstrip()[-1:] not in b"(,=":
            continue  # (neither called nor an argument)
        found.setdefault(bisect_right(starts, at) - 1, set()).add(own.group(1).decode())
    return [
        (heads[k][1], " ".join(sorted(attrs)))
        for k, attrs in sorted(found.items())
        if heads[k][1] not in ("__init__", "forward")
    ]


@dataclass(frozen=True, slots=True)
class SplitRun:
    """A handed lambda that runs a module whose input embeddings are cast apart: where it
    was handed (path, line, what it calls) and the cast (path, line, column, as written)."""

    handed: tuple[str, int, str]
    split: tuple[str, int, int, str]
    module: str


class Callables:
    """The project's handed lambdas and input-embedding casts, joined (path -> pass)."""

    def __init__(self, passes: Mapping[str, CallablesPass]) -> None:
        self._splits: dict[str, tuple[str, int, int, str]] = {}
        for path in sorted(passes):
            for name, line, column, text in passes[path][1]:
                self._splits.setdefault(name, (path, line, column, text))
        self._handed: dict[str, list[Handed]] = {}
        self._runs: dict[str, set[str]] = {}
        if not self._splits:
            return  # (nothing is split: no handed lambda can run a split module)
        for path in sorted(passes):
            lambdas, _, runs = passes[path]
            for callee, *rest in lambdas:
                self._handed.setdefault(callee, []).append((path, *rest))  # type: ignore[arg-type]
            for method, attrs in runs:
                self._runs.setdefault(method, set()).update(attrs.split())

    @property
    def digest(self) -> str:
        """Changes when a finding's evidence does: the casts, and the lambdas that run a
        module they split (not every lambda of the project: an edit elsewhere keeps the
        cache)."""
        relevant = sorted(
            (callee, *entry[:2], *entry[3:5])
            for callee, entries in self._handed.items()
            for entry in entries
            if any(
                module in self._splits
                for name in entry[2]
                for module in {name} | self._runs.get(name, set())
            )
        )
        return hex_digest(repr((sorted(self._splits.items()), relevant)).encode())

    def split_run(self, function: str, slots: Collection[str]) -> SplitRun | None:
        """A lambda the project hands to ``function`` (its name) in one of ``slots`` (the
        parameter's position and name) outside autocast, whose body runs a module whose input
        embeddings are cast apart: directly (``lambda t: model.text_encoder(t)``) or through a
        method running its own attribute (``lambda t: model.encode_text(t)``)."""
        found = []
        for path, slot, called, line, covered, beside in self._handed.get(function, ()):
            if covered or slot not in slots:
                continue
            for name in called:
                for module in sorted({name} | self._runs.get(name, set())):
                    split = self._splits.get(module)
                    if split is not None:  # (the module handed beside the lambda first)
                        found.append(
                            (module not in beside, SplitRun((path, line, name), split, module))
                        )
        return min(found, key=lambda f: f[0])[1] if found else None
