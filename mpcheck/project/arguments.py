"""What a call hands a project function, read off its text: full precision, integer, half,
or unknown.

A helper's tensor inputs are taken for a model's activations (half when the model runs in
half). When every call of it in the project hands a parameter a value that shows full
precision where it is written, that parameter is no activation: loaded data
(``torchaudio.load``, ``librosa.load``), a numpy array or ``torch.from_numpy`` of one, a
tensor factory without ``dtype=`` (float32, the default dtype), or an upcast (``.float()``,
``.to(torch.float32)``). Shape, device and copy methods keep it (``torch.from_numpy(w)
.unsqueeze(0).to(self.device)``); a name is read through its nearest assignment before the
call in the same function (``wav = torch.from_numpy(wav)`` … ``spec(wav, ...)``). A number
literal is no tensor at all (``spec(wav, 1024)``). ``torch.stack``/``torch.cat`` of values
that all show full precision (``torch.stack([o.float() for o in outs])``) is full precision.

An integer or bool tensor carries no floating dtype, and no cast of a model changes it: an
integer cast (``.long()``, ``.bool()``, ``.to(torch.long)``), an op that returns indices or
truth values whatever its input (``argmax``, ``topk(...).indices`` or ``[1]``, ``nonzero``,
``searchsorted``, ``multinomial``, a comparison ``x > 0``), ``torch.arange`` of bounds with
no float literal and no ``dtype=`` (int64), ``randint``/``randperm``, ``torch.tensor`` of
integer literals and ``len(...)``, token ids by their name (``enc.input_ids``,
``batch["input_ids"]``) and a tokenizer's attention mask (an item of a ``return_tensors=``
call's output). Anything else, a half cast or a value whose dtype the text does not show, is
unknown: one such call keeps the parameter an activation.

This reads the blanked code of the record pass (:func:`mpcheck.project.records.blank`), so
it costs one look at each call of a project function, never a walk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mpcheck.knowledge import sources as S
from mpcheck.knowledge import torch_api as T
from mpcheck.project.brackets import closing, opening, parts

__all__ = [
    "FULL",
    "HALF",
    "INT",
    "NUMBER",
    "UNKNOWN",
    "Handed",
    "arguments_of",
    "keyed",
    "value_of",
]

FULL, HALF, NUMBER, INT, UNKNOWN = "f", "h", "n", "i", "?"
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
_INT_DTYPE = re.compile(
    rb"^\s*(?:dtype\s*=\s*)?torch\.(?:u?int(?:8|16|32|64)|long|int|short|bool)\s*$"
)
# Methods and functions whose result is an integer or bool tensor whatever their input
_INT_METHODS = T.INT_METHODS | T.BOOL_METHODS
_INT_CALLS = T.INT_FUNCTIONS | T.BOOL_FUNCTIONS | T.INT_FACTORIES
_INTEGER_TYPES = frozenset({"torch.LongTensor", "torch.IntTensor", "torch.BoolTensor"})
# A comparison outside brackets: a bool tensor (``mask > 0.5``); not ``==`` in a keyword
_COMPARES = re.compile(rb"[<>]=?|[=!]=")
_FLOAT_LITERAL = re.compile(rb"\d\.|\.\d|\d[eE][-+]?\d|\bfloat\b|\bmath\.|\bnp\.")
# ``torch.tensor([len(x), 3])``: integer literals and lengths only
_INT_LITERALS = re.compile(rb"^(?:[\s\[\](),\d-]|len\([\w.]*\))*$")
# What names token ids (``input_ids``, ``ids``, ``token_idx``): its last word
_IDS_WORDS = frozenset({"id", "ids", "idx", "indices"})
# A string key of a subscript in code (``enc["input_ids"]``), restored by :func:`keyed`
_KEY = re.compile(rb"\[[ \t]*(['\"])(\w+)\1[ \t]*\]")


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
    if _compared(text):
        return INT  # (a bool tensor)
    # peel the methods and subscripts that keep the dtype, from the end
    while True:
        if text.endswith(b"]"):
            inner = opening(text, len(text) - 1, len(text))
            if inner <= 0:
                return UNKNOWN
            head, index = text[:inner], text[inner + 1 : -1]
            if _loader_item(head, index, resolve):
                return FULL  # (``torchaudio.load(p)[0]``)
            key = re.fullmatch(rb"\s*(['\"])(\w+)\1\s*", index)
            if key is not None:
                return INT if _ids(code, head, key.group(2), at, start) else UNKNOWN
            if index.strip() == b"1" and _indices(head):
                return INT  # (``x.topk(k)[1]``, ``torch.max(x, -1)[1]``)
            text = head.rstrip()
            continue
        attribute = re.search(rb"\.\s*([A-Za-z_]\w*)$", text)
        if attribute is not None and not text.endswith(b")"):
            head, name = text[: attribute.start()].rstrip(), attribute.group(1)
            if name == b"indices" and head.endswith(b")"):
                return INT  # (``x.topk(k).indices``)
            if _ids(code, head, name, at, start):
                return INT  # (``enc.input_ids``)
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
            if name in _INT_METHODS:
                return INT  # (``.long()``, ``.argmax(-1)``, ``.bool()``)
            if name in ("to", "type"):
                if _FULL_DTYPE.match(args):
                    return FULL
                if _INT_DTYPE.match(args):
                    return INT
                if not _DEVICE.match(args.split(b",")[0]) or b"," in args:
                    return UNKNOWN  # (``.to(dtype)``, ``.to(device, dtype)``)
                text = head[:dot].rstrip()
                continue
            if name in _KEEP:
                text = head[:dot].rstrip()
                continue
        return _call(code, head, args, at, start, resolve, hops)
    if hops and _NAME.fullmatch(text):
        assigned = _assigned(code, text, at, start)
        if assigned is not None:
            rhs, position, where = assigned
            if position is None:
                return value_of(code, rhs, where, start, resolve, hops - 1)
            if _loader_item(rhs, str(position).encode(), resolve):
                return FULL  # (``wav, sr = torchaudio.load(p)``)
    return UNKNOWN


def _call(
    code: bytes,
    head: bytes,
    args: bytes,
    at: int,
    start: int,
    resolve: Mapping[str, str],
    hops: int,
) -> str:
    """A call of ``head`` with ``args``: full precision when it is a data source, numpy, a
    conversion of a numpy array, or a float factory without ``dtype=``; integer when it
    returns indices, truth values or int64 (see the module docstring); a concatenation is
    what all of its tensors are."""
    if not _DOTTED.fullmatch(head):
        return UNKNOWN
    qual = _qualified(head.decode(), resolve)
    if qual in T.CONCAT:
        return _concatenated(code, args, at, start, resolve, hops)
    if qual in _INTEGER_TYPES:
        return INT
    if b"dtype" in args:
        return UNKNOWN
    if qual in _INT_CALLS:
        return INT
    if qual == "torch.arange" and not _FLOAT_LITERAL.search(args):
        return INT  # (int64 bounds make int64)
    if qual in ("torch.tensor", "torch.as_tensor") and _INT_LITERALS.match(args):
        return INT
    source = S.SOURCES.get(qual)
    if source is not None:
        return FULL if source.item is None and source.dtype.startswith("float") else UNKNOWN
    if qual.startswith("numpy.") or qual in S.FROM_NUMPY or qual in T.FLOAT_FACTORIES:
        return FULL
    return UNKNOWN


def _concatenated(
    code: bytes, args: bytes, at: int, start: int, resolve: Mapping[str, str], hops: int
) -> str:
    """``torch.stack([a.float(), b.float()])``, ``torch.cat([o.float() for o in outs])``:
    the class all of its tensors share (float32 promoted with float32 stays float32), else
    unknown."""
    first = parts(args, 0, len(args))[0]
    seq = args[first[0] : first[1]].strip()
    if len(seq) < 2 or seq[:1] not in b"[(" or seq[-1:] not in b"])":
        return UNKNOWN
    inner = seq[1:-1]
    comprehension = re.search(rb"\sfor\s", inner)
    items = [inner[: comprehension.start()]] if comprehension else []
    if not comprehension:
        items = [inner[b:e] for b, e in parts(inner, 0, len(inner)) if inner[b:e].strip()]
    found = {value_of(code, item, at, start, resolve, hops) for item in items}
    return found.pop() if len(found) == 1 and found <= {FULL, INT} else UNKNOWN


def _compared(text: bytes) -> bool:
    """Whether ``text`` is a comparison outside any bracket (``x > 0``): a bool tensor or a
    Python bool, never a floating one. Not a conditional or a lambda, whose value is a
    branch's."""
    if re.search(rb"\bif\b|\blambda\b|\bnot\b|\band\b|\bor\b", text):
        return False
    depth = 0
    for at, ch in enumerate(text):
        if ch in b"([{":
            depth += 1
        elif ch in b")]}":
            depth -= 1
        elif depth == 0 and ch in b"<>=!" and _COMPARES.match(text, at):
            return True
    return False


def _indices(head: bytes) -> bool:
    """Whether ``head`` calls a method or function that returns (values, indices)."""
    head = head.rstrip()
    if not head.endswith(b")"):
        return False
    inner = opening(head, len(head) - 1, len(head))
    func = head[:inner].rstrip() if inner > 0 else b""
    name = func.rpartition(b".")[2].decode(errors="replace")
    return name in T.VALUES_INDICES_METHODS


def _ids(code: bytes, head: bytes, name: bytes, at: int, start: int) -> bool:
    """Whether the item or attribute ``name`` of ``head`` holds token ids or a tokenizer's
    attention mask: ids by their name's last word (``input_ids``), a mask as an item of the
    output of a call given ``return_tensors=`` (a tokenizer's or processor's, int64)."""
    words = [w for w in re.split(rb"[^a-z0-9]+", name.lower()) if w and not w.isdigit()]
    if words and words[-1].decode() in _IDS_WORDS:
        return True
    if not name.lower().endswith(b"attention_mask"):
        return False
    head = head.strip()
    if _NAME.fullmatch(head):
        assigned = _assigned(code, head, at, start)
        head = assigned[0] if assigned is not None and assigned[1] is None else b""
    return b"return_tensors" in head


def keyed(code: bytes, raw: bytes) -> bytes:
    """``code`` (blanked) with the string keys of its subscripts (``enc["input_ids"]``) put
    back from ``raw``, where the brackets around them are code (not in a comment or string):
    what :func:`value_of` reads a key from. Offsets are kept."""
    if b"[" not in raw or len(raw) != len(code):
        return code
    found = None
    for match in _KEY.finditer(raw):
        begin, end = match.start(), match.end()
        if code[begin] == 0x5B and code[end - 1] == 0x5D:
            if found is None:
                found = bytearray(code)
            found[begin:end] = raw[begin:end]
    return code if found is None else bytes(found)


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
