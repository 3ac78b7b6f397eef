"""Which half dtype a cast writes when it writes a dtype variable, read off its assignments.

bfloat16 has float32's range (max ~3.4e38); only float16 overflows at 65504 (a square at
256), so whether a cast may write float16 decides the float16-range rules. A cast that writes
a name (``unet.to(weight_dtype)``, ``torch_dtype=dtype``) writes whatever the name may hold
there, and Python says exactly what that is: the values of its bindings in the function that
casts (a name a function assigns is that function's own), or else in the module. Each value
is a dtype written down (``torch.bfloat16``), a conditional expression (one of its two
branches), a display subscripted (``{"bf16": torch.bfloat16, ...}[key]``, ``DTYPES[key]`` or
``DTYPES.get(key, default)`` of a dict no code of the file changes: one of its values),
``getattr(torch, "bfloat16")``, or another such name. When every half value it may hold is
bfloat16, the cast writes bfloat16; when anything it may hold is not read here (a parameter,
a call, an import, a tuple target, a loop, a config string that may say "fp16"), the answer
is unknown: it may be float16. Conservative by construction: a value is added, never assumed
away (every assignment of the name counts, whatever branch it sits in).

Reads the record pass's blanked code (:func:`mpcheck.project.records.blank`); ``getattr``'s
string comes from the unblanked bytes at the same offsets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mpcheck.project.brackets import closing, innermost, opening, parts
from mpcheck.project.construction import body_end
from mpcheck.project.lines import line_matches
from mpcheck.project.patterns import compiled
from mpcheck.project.returns import params_of

__all__ = ["DtypeNames", "written_dtype"]

FLOAT16, BFLOAT16, FULL = "float16", "bfloat16", "full"
_FLOAT16_WRITTEN = re.compile(rb"(?<![\w.])(?:torch\.)?(?:float16|half)\b|\bfp16\b")
_BFLOAT16_WRITTEN = re.compile(rb"\bbfloat16\b|\bbf16\b")
# torch's dtypes by attribute name: half ones, and those that are no half (a cast to one
# makes nothing float16; an unknown ``torch.X`` is not read)
_TORCH_DTYPES = {
    b"float16": FLOAT16,
    b"half": FLOAT16,
    b"bfloat16": BFLOAT16,
    **dict.fromkeys(
        (b"float32", b"float", b"float64", b"double", b"int8", b"uint8", b"int16", b"short")
        + (b"int32", b"int", b"int64", b"long", b"bool", b"complex64", b"complex128"),
        FULL,
    ),
}
_TORCH_ATTRIBUTE = re.compile(rb"torch\s*\.\s*(\w+)")
# ``th.bfloat16`` of ``import torch as th``: a module's attribute named for a width is a dtype
_ALIASED = re.compile(rb"(?!self\b)[A-Za-z_]\w*\s*\.\s*(float16|bfloat16|float32|float64)")
_NAME = re.compile(rb"[A-Za-z_]\w*")
_SELF_ATTRIBUTE = re.compile(rb"self\s*\.\s*[A-Za-z_]\w*")
_STRING = re.compile(rb"""\s*[rbuRBU]?(["'])(\w+)\1\s*""")
_KEYWORDS = re.compile(rb"\b(?:if|else|or|and|not|lambda|for|in|is)\b")
_STAR_IMPORT = re.compile(rb"^[ \t]*from[ \t]+\S+[ \t]+import[ \t]+\*", re.M)
_STAR_WORD = re.compile(rb"import[ \t]+\*")  # (what a star import's line holds: lines.py)
_DEF = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+\w+", re.MULTILINE)
_LOGICAL_END = re.compile(rb"[()\[\]{}]|\\\n|\n|;")
_DEPTH = 8  # (names through names: a chain longer than this is not read)


def written_dtype(text: bytes) -> str:
    """The one half dtype a cast's text writes down (``.half()``, ``.to(torch.bfloat16)``,
    ``torch_dtype=torch.float16``): "float16" or "bfloat16"; "" for a dtype variable
    (``weight_dtype``) or a choice between both, which the text alone does not decide."""
    fp16 = _FLOAT16_WRITTEN.search(text) is not None
    bf16 = _BFLOAT16_WRITTEN.search(text) is not None
    if fp16 == bf16:
        return ""
    return FLOAT16 if fp16 else BFLOAT16


def _half(values: frozenset[str]) -> str:
    halves = sorted(values - {FULL})
    return halves[0] if len(halves) == 1 else ""


class DtypeNames:
    """The dtypes the expressions of one file may evaluate to (see the module docstring).

    ``attributes``: ``self.X`` holds what the file's ``self.X = ...`` assign (an autocast
    region's dtype, as the record pass has always read it); else an attribute is unknown,
    since code elsewhere may assign it."""

    def __init__(self, code: bytes, data: bytes, attributes: bool = False) -> None:
        self.code = code
        self.data = data
        self.attributes = attributes
        self._defs: list[tuple[int, int, int]] | None = None  # (name end, body end, indent)
        # (the file's target lists, read once: every binding asked about scans the same ones)
        self._targets: list[tuple[int, int, bytes]] | None = None

    # -- what a cast writes ------------------------------------------------------------------
    def argument_half(self, start: int, end: int) -> str:
        """The one half dtype the call whose arguments span ``start:end`` writes (``.to(
        device, dtype=weight_dtype)``, ``.to(dtype)``): its ``dtype=`` argument, else its one
        positional argument that may be a dtype. "" when it may write either or is unknown."""
        chosen = self._dtype_argument(start, end)
        if chosen is None:
            return written_dtype(self.code[start:end])
        return self.half_of(*chosen)

    def argument_full(self, start: int, end: int) -> bool:
        """Whether the call whose arguments span ``start:end`` writes no half dtype at all:
        its dtype argument is a name (or expression) every value of which is read here and
        none half (``dtype = torch.float32`` ... ``.to(dtype)`` casts to float32)."""
        chosen = self._dtype_argument(start, end)
        return chosen is not None and self.values(*chosen) == frozenset({FULL})

    def full_only(self, start: int, end: int) -> bool:
        """Whether the expression spanning ``start:end`` may evaluate to no half dtype."""
        return self.values(start, end) == frozenset({FULL})

    def _dtype_argument(self, start: int, end: int) -> tuple[int, int] | None:
        """The span of the dtype argument of a call whose arguments span ``start:end``."""
        code = self.code
        chosen: tuple[int, int] | None = None
        candidates = []
        for begin, stop in parts(code, start, end):
            text = code[begin:stop].strip()
            keyword = re.match(rb"\s*(?:torch_)?dtype\s*=(?!=)", code[begin:stop])
            if keyword is not None:
                chosen = (begin + keyword.end(), stop)
                break
            if text and b"=" not in text and _maybe_dtype(text):
                candidates.append((begin, stop))
        if chosen is None and len(candidates) == 1:
            chosen = candidates[0]
        return chosen

    def half_of(self, start: int, end: int) -> str:
        """The one half dtype the expression spanning ``start:end`` may evaluate to ("" when
        it may be either or is unknown). What is not read keeps float16 possible: the text's
        own float16 stays "float16", a bfloat16 written beside an unknown is ""."""
        values = self.values(start, end)
        if values is not None:
            return _half(values)
        written = written_dtype(self.code[start:end])
        return written if written == FLOAT16 else ""

    # -- values ----------------------------------------------------------------------------
    def values(
        self, start: int, end: int, depth: int = 0, seen: frozenset[bytes] = frozenset()
    ) -> frozenset[str] | None:
        """The dtypes (``float16``, ``bfloat16``, ``full`` for any other) the expression
        spanning ``start:end`` may evaluate to; None: something it may be is not read."""
        code = self.code
        start, end = _stripped(code, start, end)
        if start >= end or depth > _DEPTH:
            return None
        text = code[start:end]
        if code[start] == 0x28 and closing(code, start + 1) == end - 1:  # ``( ... )``
            return self.values(start + 1, end - 1, depth + 1, seen)
        branches = self._conditional(start, end)
        if branches is not None:
            out: set[str] = set()
            for span in branches:
                found = self.values(*span, depth + 1, seen)
                if found is None:
                    return None
                out |= found
            return frozenset(out)
        if _top_keyword(code, start, end):
            return None  # (``a or b``, ``not x``, a comprehension: not read)
        torch_dtype = _TORCH_ATTRIBUTE.fullmatch(text) or _ALIASED.fullmatch(text)
        if torch_dtype is not None:
            found_dtype = _TORCH_DTYPES.get(torch_dtype.group(1))
            return None if found_dtype is None else frozenset({found_dtype})
        if _NAME.fullmatch(text):
            return self._name_values(text, start, depth, seen)
        if _SELF_ATTRIBUTE.fullmatch(text):
            return self._attribute_values(text, start, depth, seen) if self.attributes else None
        if code[end - 1] == 0x5D:  # ``...[key]``: one of a display's values
            return self._subscript(start, end, depth, seen)
        if code[end - 1] == 0x29:
            return self._call(start, end, depth, seen)
        return None

    def _conditional(self, start: int, end: int) -> list[tuple[int, int]] | None:
        """The two branches of ``A if c else B`` spanning ``start:end`` (None: no such)."""
        keywords = _top_level(self.code, start, end, re.compile(rb"\b(?:if|else)\b"))
        first_if = next((at for at, word in keywords if word == b"if"), None)
        if first_if is None:
            return None
        first_else = next((at for at, w in keywords if w == b"else" and at > first_if), None)
        if first_else is None:
            return None
        return [(start, first_if), (first_else + 4, end)]

    def _subscript(
        self, start: int, end: int, depth: int, seen: frozenset[bytes]
    ) -> frozenset[str] | None:
        bracket = opening(self.code, end - 1)
        if bracket <= start:
            return None
        return self._container(start, bracket, depth, seen)

    def _call(
        self, start: int, end: int, depth: int, seen: frozenset[bytes]
    ) -> frozenset[str] | None:
        """``getattr(torch, "bfloat16")`` and ``DTYPES.get(key[, default])``."""
        code = self.code
        bracket = opening(code, end - 1)
        if bracket <= start:
            return None
        data = self.data  # (a string argument is blank in ``code``)
        arguments = [p for p in parts(code, bracket + 1, end - 1) if data[p[0] : p[1]].strip()]
        head = code[start:bracket].rstrip()
        if head == b"getattr" and arguments and code[slice(*arguments[0])].strip() == b"torch":
            if len(arguments) not in (2, 3):
                return None
            named = _STRING.fullmatch(self.data, *arguments[1])
            found = None if named is None else _TORCH_DTYPES.get(named.group(2))
            if found is None:
                return None
            rest: frozenset[str] | None = frozenset()
            if len(arguments) == 3:
                rest = self.values(*arguments[2], depth + 1, seen)
            return None if rest is None else frozenset({found, *rest})
        if not head.endswith(b".get") or len(arguments) not in (1, 2):
            return None
        base_end = start + len(head) - len(b".get")
        default: frozenset[str] | None = frozenset()
        if len(arguments) == 2:
            default = self.values(*arguments[1], depth + 1, seen)
        if default is None:
            return None
        found_values = self._container(start, base_end, depth, seen)
        return None if found_values is None else found_values | default

    def _container(
        self, start: int, end: int, depth: int, seen: frozenset[bytes]
    ) -> frozenset[str] | None:
        """The values of the display (or name bound only to displays) spanning ``start:end``."""
        code = self.code
        start, end = _stripped(code, start, end)
        if start >= end:
            return None
        text = code[start:end]
        if code[start] in b"{[(" and closing(code, start + 1) == end - 1:
            out: set[str] = set()
            for begin, stop in parts(code, start + 1, end - 1):
                if not code[begin:stop].strip():
                    continue
                if code[start] == 0x7B:  # ``{key: value}``: the value
                    colon = _top_level(code, begin, stop, re.compile(rb":"))
                    if not colon or code[begin:stop].lstrip().startswith(b"**"):
                        return None
                    begin = colon[0][0] + 1
                found = self.values(begin, stop, depth + 1, seen)
                if found is None:
                    return None
                out |= found
            return frozenset(out)
        if not _NAME.fullmatch(text) or text in seen or _mutated(code, text):
            return None
        spans = self._bindings(text, start)
        if spans is None:
            return None
        return _all_of(self._container(*span, depth + 1, seen | {text}) for span in spans)

    def _name_values(
        self, name: bytes, at: int, depth: int, seen: frozenset[bytes]
    ) -> frozenset[str] | None:
        if name in seen:
            return None
        spans = self._bindings(name, at)
        if spans is None:
            return None
        return _all_of(self.values(*span, depth + 1, seen | {name}) for span in spans)

    def _attribute_values(
        self, text: bytes, at: int, depth: int, seen: frozenset[bytes]
    ) -> frozenset[str] | None:
        name = re.sub(rb"\s+", b"", text)
        if name in seen:
            return None
        spans = _assignments(self.code, name, 0, len(self.code))
        if not spans:
            return None
        return _all_of(self.values(*span, depth + 1, seen | {name}) for span in spans)

    # -- bindings --------------------------------------------------------------------------
    def _bindings(self, name: bytes, at: int) -> list[tuple[int, int]] | None:
        """The value spans of the plain assignments the name ``name`` used at ``at`` may
        hold, as Python finds it: in the innermost function holding ``at`` that assigns it
        (or takes it as a parameter, which is not read; nor is any other binding there),
        else in the module, whose statements at column 0 must assign it (a star import or
        a name no module statement assigns is not read)."""
        code = self.code
        holding = sorted((d for d in self._def_spans() if d[0] <= at < d[1]), key=lambda d: -d[2])
        for begin, end, _indent in holding:
            params = params_of(code, begin)
            if params is None or name in params or self._other_binding(name, begin, end):
                return None
            spans = _assignments(code, name, begin, end)
            if spans:
                return spans
        spans = _assignments(code, name, 0, len(code))
        if not any(code[code.rfind(b"\n", 0, value) + 1] not in b" \t" for value, _ in spans):
            return None  # (no module statement assigns it: a star import's, a builtin)
        star = next(line_matches(_STAR_IMPORT, _STAR_WORD, code), None) is not None
        if star or self._other_binding(name, 0, len(code)):
            return None
        return spans

    def _other_binding(self, name: bytes, begin: int, end: int) -> bool:
        """Whether ``code[begin:end]`` binds ``name`` otherwise than by a plain assignment
        (a tuple target, a walrus, ``as``, a loop, an import, a ``def``, an augmented
        assignment), or hands it on by ``global``/``nonlocal`` (a binding of another scope)."""
        word = re.escape(name)
        other = compiled(
            rb"(?<![\w.])" + word + rb"[ \t]*(?::=|(?:[-+*/|&%@^]|//|\*\*|>>|<<)=)"
            rb"|\bas[ \t]+" + word + rb"\b"
            rb"|\bfor\b[^\n]*(?<![\w.])" + word + rb"\b[^\n]*\bin\b"
            rb"|^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+" + word + rb"\b"
            rb"|^[ \t]*(?:from[ \t]+\S+[ \t]+)?import\b[^\n]*(?<![\w.])" + word + rb"\b"
            rb"|\b(?:global|nonlocal)\b[^\n]*(?<![\w.])" + word + rb"\b",
            re.M,
        )
        if _on_lines_of(other, self.code, name, begin, end):
            return True
        if self._targets is None:
            found = line_matches(_TARGETS, _TARGET_LINE, self.code)
            self._targets = [(t.start(), t.end(), t.group(1)) for t in found]
        bound = compiled(rb"(?<![\w.])" + word + rb"\b")
        return any(begin <= at and stop <= end and bound.search(t) for at, stop, t in self._targets)

    def _def_spans(self) -> list[tuple[int, int, int]]:
        if self._defs is None:
            self._defs = [
                (m.end(), body_end(self.code, m.end(), len(m.group(1))), len(m.group(1)))
                for m in _DEF.finditer(self.code)
            ]
        return self._defs


def _on_lines_of(
    pattern: re.Pattern[bytes], code: bytes, word: bytes, begin: int, end: int
) -> bool:
    """``pattern.search(code, begin, end)`` for a pattern every match of which lies on one
    line and holds ``word`` as written: searched on the lines where ``word`` occurs only.

    (A pattern led by alternatives and look-behinds is tried at every offset; a line searched
    alone sees the same characters around it, since a search's start and end do not hide
    them from ``^`` or a look-behind, and a match never reaches past its line's newline.)"""
    at = code.find(word, begin, end)
    while at >= 0:
        start = max(begin, code.rfind(b"\n", 0, at) + 1)
        stop = code.find(b"\n", at, end)
        stop = end if stop < 0 else stop + 1
        if pattern.search(code, start, stop) is not None:
            return True
        at = code.find(word, stop, end)
    return False


def _maybe_dtype(text: bytes) -> bool:
    """A positional argument of ``.to(...)`` that may be its dtype (not its device)."""
    return (
        re.search(rb"float16|bfloat16|\bhalf\b|fp16|bf16|dtype$", text) is not None
        or _TORCH_ATTRIBUTE.fullmatch(text) is not None
    )


def _stripped(code: bytes, start: int, end: int) -> tuple[int, int]:
    while start < end and code[start] in b" \t\r\n\\":
        start += 1
    while end > start and code[end - 1] in b" \t\r\n\\":
        end -= 1
    return start, end


def _top_level(
    code: bytes, start: int, end: int, pattern: re.Pattern[bytes]
) -> list[tuple[int, bytes]]:
    """The matches of ``pattern`` in ``code[start:end]`` outside any bracket."""
    out = []
    depth, last = 0, start
    for found in pattern.finditer(code, start, end):
        for ch in code[last : found.start()]:
            if ch in b"([{":
                depth += 1
            elif ch in b")]}":
                depth -= 1
        last = found.start()
        if depth == 0:
            out.append((found.start(), found.group()))
    return out


def _top_keyword(code: bytes, start: int, end: int) -> bool:
    return bool(_top_level(code, start, end, _KEYWORDS))


def _logical_end(code: bytes, at: int) -> int:
    """Where the statement whose text goes on at ``at`` ends (brackets and ``\\`` go on)."""
    depth = 0
    for found in _LOGICAL_END.finditer(code, at):
        token = found.group()
        if token in (b"(", b"[", b"{"):
            depth += 1
        elif token in (b")", b"]", b"}"):
            depth -= 1
        elif token in (b"\n", b";") and depth <= 0:
            return found.start()
    return len(code)


def _assignments(code: bytes, name: bytes, begin: int, end: int) -> list[tuple[int, int]]:
    """The value spans of the plain statements ``name = value`` (``name: T = value``)
    between ``begin`` and ``end``; a ``name=`` line inside brackets is a keyword argument."""
    word = re.escape(name).replace(rb"\.", rb"\s*\.\s*")
    bound = compiled(rb"^[ \t]*" + word + rb"[ \t]*(?::[^=\n]*)?=(?!=)", re.M)
    out = []
    for found in bound.finditer(code, begin, end):
        if innermost(code, found.start()) >= 0:
            continue  # (``f(\n    dtype=torch.float16,\n)``: an argument)
        out.append((found.end(), _logical_end(code, found.end())))
    return out


# A statement's target list (``a, b = ...``, ``(a, *b) = ...``, ``a, = ...``): names it binds.
# Written so that no text matches two ways (one run of blanks before an optional bracket, a
# name that cannot end inside a word): the ambiguous form backtracked over every indented
# line of a file, eight times the cost of this one, with the same matches.
_TARGET = rb"\*?[A-Za-z_][\w.]*(?![\w.])(?:\[[^\]\n]*\])?"
_TARGETS = re.compile(
    rb"^[ \t]*((?:[(\[][ \t]*)?" + _TARGET + rb"(?:[ \t]*,[ \t]*" + _TARGET + rb")*[ \t]*,"
    rb"(?:[ \t]*" + _TARGET + rb")?[ \t]*[)\]]?)[ \t]*=(?!=)",
    re.M,
)
# (what the one line of a ``_TARGETS`` match holds: a comma, then ``=``; see lines.py)
_TARGET_LINE = re.compile(rb",[^\n]*=")


def _mutated(code: bytes, name: bytes) -> bool:
    """Whether the file may change the container ``name`` after building it."""
    word = re.escape(name)
    changed = compiled(
        rb"(?<![\w.])" + word + rb"\s*\[[^\]\n]*\]\s*(?:[-+*/|&%@^]|//)?=(?!=)"
        rb"|(?<![\w.])" + word + rb"\s*\.\s*(?:update|setdefault|__setitem__|append|extend|"
        rb"insert|pop|popitem|clear)\s*\("
        rb"|(?<![\w.])" + word + rb"\s*\|="
    )
    return changed.search(code) is not None


def _all_of(found: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    """The values every binding may hold together, or None as soon as one is unknown (the
    rest are then never read)."""
    out: set[str] = set()
    for values in found:
        if values is None:
            return None
        out |= values
    return frozenset(out)
