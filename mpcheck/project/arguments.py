"""What a call hands a project function, read off its text: full precision, half, or unknown.

A helper's tensor inputs are taken for a model's activations (half when the model runs in
half). When every call of it in the project hands a parameter a value that shows full
precision where it is written, that parameter is no activation: loaded data
(``torchaudio.load``, ``librosa.load``), a numpy array or ``torch.from_numpy`` of one, a
tensor factory without ``dtype=`` (float32, the default dtype), or an upcast (``.float()``,
``.to(torch.float32)``). Shape, device and copy methods keep it (``torch.from_numpy(w)
.unsqueeze(0).to(self.device)``); a name is read through its nearest assignment before the
call in the same function (``wav = torch.from_numpy(wav)`` … ``spec(wav, ...)``). A number
literal is no tensor at all (``spec(wav, 1024)``). Anything else, a half cast or a value
whose dtype the text does not show, is unknown: one such call keeps the parameter an
activation.

This reads the blanked code of the record pass (:func:`mpcheck.project.records.blank`), so
it costs one look at each call of a project function, never a walk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mpcheck.knowledge import sources as S
from mpcheck.knowledge import torch_api as T
from mpcheck.project.brackets import closing, opening, parts

__all__ = ["FULL", "HALF", "NUMBER", "UNKNOWN", "Handed", "arguments_of", "value_of"]

FULL, HALF, NUMBER, UNKNOWN = "f", "h", "n", "?"
# A call's arguments: positional ones in order, then ``keyword=class`` (sorted), ``*`` for a
# splat (``f(*args)``: which parameter gets what is unknown).
Handed = tuple[str, ...]

# Methods that keep a tensor's dtype (shape, device, copies, sign).
_KEEP = frozenset(
    """unsqueeze squeeze view reshape permute transpose contiguous clone detach cpu cuda
    flatten repeat expand abs to_dense narrow select flip roll t chunk split squeeze_
    unsqueeze_ numpy""".split()
)
_UPCASTS = frozenset({"float", "double"})
_HALVES = frozenset({"half", "bfloat16"})
_DEVICE = re.compile(rb"^\s*(?:[\w.]*device|\"\s*\"|'\s*'|[\w.]*cuda\(\)|)\s*$")
_FULL_DTYPE = re.compile(rb"^\s*(?:dtype\s*=\s*)?torch\.(?:float32|float|float64|double)\s*$")
_NAME = re.compile(rb"[A-Za-z_]\w*")
# A line binding names: ``wav = ...``, ``wav, sr = ...`` (not ``==``, not ``x.y = ...``)
_ASSIGNS = re.compile(rb"[ \t]*([A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*=(?!=)")
_DOTTED = re.compile(rb"[A-Za-z_][\w.]*")
_NUMBER = re.compile(rb"^\s*-?\s*(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$")
_HALFISH = re.compile(rb"float16|bfloat16|\bhalf\b|fp16|bf16")


def arguments_of(
    code: bytes, open_at: int, start: int, resolve: Mapping[str, str]
) -> tuple[Handed, int]:
    """The classes of what the call whose ``(`` is at ``open_at`` hands (see :data:`Handed`)
    and where its arguments close; ``start``: where the calling function begins (names are
    read through their assignments after it); ``resolve``: the file's imports."""
    end = closing(code, open_at + 1)
    positional: list[str] = []
    keywords: list[str] = []
    for part in parts(code, open_at + 1, end):
        text = code[part[0] : part[1]].strip()
        if not text:
            continue
        if text.startswith(b"*"):
            positional.append("*")
            continue
        keyword = re.match(rb"([A-Za-z_]\w*)\s*=(?!=)", text)
        if keyword is not None:
            value = value_of(code, text[keyword.end() :], open_at, start, resolve)
            keywords.append(f"{keyword.group(1).decode()}={value}")
        else:
            positional.append(value_of(code, text, open_at, start, resolve))
    return (*positional, *sorted(keywords)), end


def value_of(
    code: bytes, text: bytes, at: int, start: int, resolve: Mapping[str, str], hops: int = 2
) -> str:
    """The class of the expression ``text`` written at ``at`` (see the module docstring)."""
    text = text.strip()
    if _HALFISH.search(text):
        return HALF
    if _NUMBER.match(text):
        return NUMBER  # (a Python number: no tensor)
    # peel the methods and subscripts that keep the dtype, from the end
    while True:
        if text.endswith(b"]"):
            inner = opening(text, len(text) - 1, len(text))
            if inner <= 0:
                return UNKNOWN
            head = text[:inner]
            if _loader_item(head, text[inner + 1 : -1], resolve):
                return FULL  # (``torchaudio.load(p)[0]``)
            text = head.rstrip()
            continue
        if not text.endswith(b")"):
            break
        inner = opening(text, len(text) - 1, len(text))
        if inner <= 0:
            return UNKNOWN
        head, args = text[:inner].rstrip(), text[inner + 1 : -1]
        dot = head.rfind(b".")
        name = head[dot + 1 :].decode(errors="replace")
        if dot > 0 and _NAME.fullmatch(head[dot + 1 :]) and head[:dot][-1:] in b")]_" + _ALNUM:
            if name in _UPCASTS and not args.strip():
                return FULL
            if name in _HALVES:
                return HALF
            if name in ("to", "type"):
                if _FULL_DTYPE.match(args):
                    return FULL
                if not _DEVICE.match(args.split(b",")[0]) or b"," in args:
                    return UNKNOWN  # (``.to(dtype)``, ``.to(device, dtype)``)
                text = head[:dot].rstrip()
                continue
            if name in _KEEP:
                text = head[:dot].rstrip()
                continue
        return _call(head, args, resolve)
    if hops and _NAME.fullmatch(text):
        assigned = _assigned(code, text, at, start)
        if assigned is not None:
            rhs, position, where = assigned
            if position is None:
                return value_of(code, rhs, where, start, resolve, hops - 1)
            if _loader_item(rhs, str(position).encode(), resolve):
                return FULL  # (``wav, sr = torchaudio.load(p)``)
    return UNKNOWN


def _call(head: bytes, args: bytes, resolve: Mapping[str, str]) -> str:
    """A call of ``head`` with ``args``: full precision when it is a data source, numpy, a
    conversion of a numpy array, or a float factory without ``dtype=``."""
    if not _DOTTED.fullmatch(head):
        return UNKNOWN
    qual = _qualified(head.decode(), resolve)
    if b"dtype" in args:
        return UNKNOWN
    source = S.SOURCES.get(qual)
    if source is not None:
        return FULL if source.item is None and source.dtype.startswith("float") else UNKNOWN
    if qual.startswith("numpy.") or qual in S.FROM_NUMPY or qual in T.FLOAT_FACTORIES:
        return FULL
    return UNKNOWN


def _loader_item(head: bytes, index: bytes, resolve: Mapping[str, str]) -> bool:
    """``torchaudio.load(p)`` indexed at ``index``: the loader's float data item."""
    head = head.strip()
    if not head.endswith(b")"):
        return False
    inner = opening(head, len(head) - 1, len(head))
    func = head[:inner].rstrip() if inner > 0 else b""
    if not _DOTTED.fullmatch(func) or b"dtype" in head[inner:]:
        return False
    source = S.SOURCES.get(_qualified(func.decode(), resolve))
    return (
        source is not None
        and source.item is not None
        and index.strip() == str(source.item).encode()
        and source.dtype.startswith("float")
    )


def _qualified(dotted: str, resolve: Mapping[str, str]) -> str:
    first, _, rest = dotted.partition(".")
    found = resolve.get(first)
    if found is None:
        return dotted
    return f"{found}.{rest}" if rest else found


_ALNUM = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _assigned(
    code: bytes, name: bytes, at: int, start: int
) -> tuple[bytes, int | None, int] | None:
    """The right side of the nearest assignment of ``name`` between ``start`` and ``at``,
    with ``name``'s position in a tuple target (None: a plain target) and where it is."""
    found = None
    here = code.rfind(name, start, at)
    while here >= 0:  # (the nearest line binding ``name``, found backwards at C speed)
        line = code.rfind(b"\n", 0, here) + 1
        match = _ASSIGNS.match(code, max(line, start))
        if match is not None and name in (n.strip() for n in match.group(1).split(b",")):
            found = match
            break
        here = code.rfind(name, start, line) if line > start else -1
    if found is None:
        return None
    names = [n.strip() for n in found.group(1).split(b",")]
    depth, end = 0, found.end()
    limit = min(len(code), end + 2000)
    while end < limit:  # (a right side continued in brackets runs past its first line)
        ch = code[end]
        if ch in b"([{":
            depth += 1
        elif ch in b")]}":
            depth -= 1
        elif ch == 0x0A and depth <= 0:
            break
        end += 1
    rhs = code[found.end() : end]
    position = None if len(names) == 1 else names.index(name)
    return rhs, position, found.start()
