"""Where a half default dtype reaches in one file: the extents of ``torch.set_default_dtype``.

``torch.set_default_dtype(torch.float16)`` makes every floating tensor built after it half,
parameters included, until the default changes again. So the call matters only over its
extent: set and restored in one function (``old = torch.get_default_dtype()``; set; build;
``torch.set_default_dtype(old)``), through a helper that sets it and returns the old default
(transformers' ``_set_default_torch_dtype``) whose every caller here restores it, inside a
``with ...set_default_dtype(d):`` body, or inside the ``with`` bodies that enter a project
context manager which sets, yields and restores. A default set to float32 (``torch.float``,
``FloatTensor``, a name only ever bound to those or to the saved default) is no half.
Anything else (no restore, a helper some caller does not restore, a context manager entered
other than by a ``with`` here, or one used only elsewhere) may reach every class built
anywhere after it. :mod:`mpcheck.project.records` asks :func:`half_default_extents` and
marks what each extent builds as built in half.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from mpcheck.project.brackets import closing
from mpcheck.project.construction import body_end

__all__ = ["DEFAULT_SET", "Span", "half_default_extents"]

# One function of the file: (start, end, indent, name).
Span = tuple[int, int, int, bytes]

# A call changing torch's default dtype (led by ``torch.`` or not: a project's own helper of
# that name is read by its body's calls), up to its opening bracket.
DEFAULT_SET = re.compile(rb"\b(?:set_default_dtype|set_default_tensor_type)\s*\(")
_FULL_DEFAULTS = frozenset(
    {
        b"torch.float32", b"torch.float", b"torch.float64", b"torch.double", b"float32",
        b"torch.FloatTensor", b"torch.cuda.FloatTensor", b"torch.DoubleTensor",
        b"torch.cuda.DoubleTensor",
    }
)  # fmt: skip
_GET_DEFAULT = re.compile(rb"(?:torch\.)?get_default_dtype\s*\(\s*\)")
_BINDING = re.compile(rb"(?m)^[ \t]*((?:\w+[ \t]*=[ \t]*)+)(?!=)([^\n]*)$")
_WITH_AT = re.compile(rb"([ \t]*)(?:async[ \t]+)?with\b")
_RETURNED = re.compile(rb"(?m)^[ \t]*return[ \t]+(\w+)[ \t]*$")
_YIELD = re.compile(rb"\byield\b")


def half_default_extents(code: bytes, spans: Sequence[Span]) -> list[tuple[int, int]] | None:
    """The extents (start, end offsets) over which this file's half default dtypes build,
    or None when one may reach every class (see the module docstring). ``code`` is the file
    with strings and comments blanked; ``spans`` are its functions."""
    sets = [(m.start(), m.end()) for m in DEFAULT_SET.finditer(code)]
    bound: dict[bytes, set[bytes]] = {}  # name -> the values assigned to it
    for match in _BINDING.finditer(code):
        value = match.group(2).strip()
        # (``None`` too: ``dtype_orig = None`` before a conditional save; the default is
        # never set to it)
        value = b"<saved>" if value == b"None" or _GET_DEFAULT.fullmatch(value) else value
        for name in match.group(1).split(b"="):
            if name.strip():
                bound.setdefault(name.strip(), set()).add(value)
    saved = {n for n, values in bound.items() if values == {b"<saved>"}}
    full = {n for n, vs in bound.items() if vs <= {b"<saved>", *_FULL_DEFAULTS}}
    helpers: dict[bytes, int] = {}  # sets its argument, returns the old one
    managers: set[bytes] = set()  # sets, yields, restores: a context manager
    for start, end, _, name in spans:
        if not any(start < at < end for at, _ in sets):
            continue
        body = code[start:end]
        if _YIELD.search(body):
            managers.add(name)
        elif {m.group(1) for m in _RETURNED.finditer(body)} & _saved_in(body):
            helpers[name] = start
    if helpers:  # (``dtype_orig = cls._set_default_torch_dtype(d)``: the old default)
        calls = re.compile(rb"[\w.]*\b(?:%s)\s*\(.*" % b"|".join(map(re.escape, helpers)))
        for name, values in bound.items():
            if all(v == b"<saved>" or calls.fullmatch(v) for v in values):
                saved.add(name)
                full.add(name)
    extents: list[tuple[int, int]] = []
    for at, opened in sets:
        arg = code[opened : closing(code, opened)].strip()
        if arg in _FULL_DEFAULTS or arg in full:
            continue  # (float32, or a restore of the default saved before)
        span = _innermost(spans, at)
        if span is not None and span[3] in managers:
            continue  # (its ``with`` bodies, below)
        within = _with_body(code, at)
        if within is not None:
            extents.append(within)
            continue
        if span is None:
            return None
        if helpers.get(span[3]) == span[0]:
            found = _restored_calls(code, span[3], spans)
            if found is None:
                return None
            extents.extend(found)
            continue
        restored = _restore_after(code, opened, span, saved)
        if restored is None:
            return None
        extents.append((at, restored))
    for name in managers:  # (entered elsewhere than a ``with`` here: unseen extents)
        own = [span for span in spans if span[3] == name]
        entered = [
            call.start()
            for call in re.finditer(rb"\b" + re.escape(name) + rb"\s*\(", code)
            if not any(start <= call.start() < end for start, end, _, _ in own)
        ]
        if not entered and not DEFAULT_SET.match(name + b"("):
            return None  # (its callers are elsewhere, under a name they do not show)
        for at in entered:
            within = _with_body(code, at)
            if within is None:
                return None  # (``stack.enter_context(m(d))``, ``contexts.append(m(d))``)
            extents.append(within)
    return extents


def _with_body(code: bytes, at: int) -> tuple[int, int] | None:
    """The body of the ``with`` statement whose item holds the offset ``at``, or None."""
    line = code.rfind(b"\n", 0, at) + 1
    header = _WITH_AT.match(code, line)
    if header is None:
        return None
    return at, body_end(code, at, len(header.group(1)))


def _restore_after(code: bytes, at: int, span: Span, saved: Collection[bytes]) -> int | None:
    """Where the function ``span`` restores the default after ``at`` (a set to float32 or
    to a saved default, no ``yield`` between: a context manager's extent is its callers'),
    or None."""
    for match in DEFAULT_SET.finditer(code, at, span[1]):
        arg = code[match.end() : closing(code, match.end())].strip()
        if arg in _FULL_DEFAULTS or arg in saved:
            return None if _YIELD.search(code, at, match.start()) else match.start()
    return None


def _restored_calls(
    code: bytes, helper: bytes, spans: Sequence[Span]
) -> list[tuple[int, int]] | None:
    """The extents a default-setting helper opens in this file: each call of it binds the
    old default and its function restores it later (None: some call does not)."""
    out = []
    pattern = re.compile(rb"[ \t]*(\w+)\s*=\s*[\w.]*\b" + re.escape(helper) + rb"\s*\(")
    for call in re.finditer(rb"\b" + re.escape(helper) + rb"\s*\(", code):
        if code[max(0, call.start() - 4) : call.start()] == b"def ":
            continue
        bound = pattern.match(code, code.rfind(b"\n", 0, call.start()) + 1)
        span = _innermost(spans, call.start())
        if bound is None or span is None:
            return None
        end = _restore_after(code, call.end(), span, {bound.group(1)})
        if end is None:
            return None
        out.append((call.start(), end))
    return out


def _saved_in(body: bytes) -> set[bytes]:
    """The names ``body`` binds to ``torch.get_default_dtype()``."""
    out: set[bytes] = set()
    for match in _BINDING.finditer(body):
        if _GET_DEFAULT.fullmatch(match.group(2).strip()):
            out.update(n.strip() for n in match.group(1).split(b"=") if n.strip())
    return out


def _innermost(spans: Sequence[Span], at: int) -> Span | None:
    """The innermost function span holding the offset ``at``."""
    inner = None
    for span in spans:
        if span[0] < at < span[1] and (inner is None or span[2] > inner[2]):
            inner = span
    return inner
