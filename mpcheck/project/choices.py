"""A variable that holds a class: the classes it may hold, read off its assignments.

``cls = Small if name == "small" else Big``, ``if a: cls = A`` / ``elif b: cls = B`` and
``cls = {"a": A, "b": B}[name]`` bind a variable to a class; ``model = cls(8)`` then builds
one of those candidates and nothing else (a conditional expression evaluates to one of its
two branches, a dict display's subscript to one of its values). So a cast of ``model``
reaches exactly the candidates, not every class of the project.

This reads the blanked code of the record pass (:func:`mpcheck.project.records.blank`): one
look at the plain assignments of the variable in the function that calls it.
"""

from __future__ import annotations

import re

from mpcheck.project.brackets import closing, parts
from mpcheck.project.lines import line_matches
from mpcheck.project.patterns import compiled

__all__ = ["CHOICE_CALL", "choices_in", "choosers"]

# A class name as written: CapWords, possibly dotted (``models.Small``).
_CLASS = rb"(?:[A-Za-z_]\w*\.)*[A-Z]\w*"
_CLASS_ONLY = re.compile(_CLASS)
# ``X if c else Y`` (nested to the right: ``X if a else Y if b else Z``)
_CONDITIONAL = re.compile(rb"\s*(" + _CLASS + rb")\s+if\b(.*?)\belse\b\s*(.*)", re.S)
# A right side that may name classes only: a class, a conditional of them, a dict display.
_LEADS = re.compile(
    rb"^[ \t]+([A-Za-z_]\w*)[ \t]*=(?!=)[ \t]*(?:\{|[A-Z]|(?:[a-z_]\w*\.)+[A-Z])", re.M
)
_EQUALS = re.compile(rb"=")  # (what each line of ``_LEADS`` holds: lines.py)
# ``target = var(`` : a call of a variable whose value is bound to a name.
CHOICE_CALL = re.compile(
    rb"^[ \t]+([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*([a-z_]\w*)[ \t]*\(", re.M
)


def choosers(code: bytes) -> frozenset[bytes]:
    """The names ``code`` binds in a function to what may be a class (cheap: most files bind
    none, and a call of any other name is no class variable's)."""
    return frozenset(m.group(1) for m in line_matches(_LEADS, _EQUALS, code))


def choices_in(code: bytes, begin: int, end: int, name: bytes) -> list[bytes] | None:
    """The class names (as written) that ``name`` may hold in the function body spanning
    ``begin`` to ``end``: the union over its plain assignments there. None when one of them
    is anything but a class, a conditional of classes or a dict display of classes
    subscripted, or when it has none."""
    word = re.escape(name)
    bound = compiled(rb"^[ \t]+" + word + rb"[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*", re.M)
    out: list[bytes] = []
    for found in bound.finditer(code, begin, end):
        value = _right_side(code, found.end(), end)
        names = _classes_of(value)
        if names is None:
            return None
        out.extend(n for n in names if n not in out)
    return out or None


def _right_side(code: bytes, at: int, end: int) -> bytes:
    """The text of the right side starting at ``at``: its line, continued in brackets."""
    stop = code.find(b"\n", at, end)
    stop = end if stop < 0 else stop
    opened = code.find(b"{", at, stop)
    if opened >= 0:  # (a dict display spans lines)
        close = closing(code, opened + 1)
        line = code.find(b"\n", close, end)
        stop = end if line < 0 else line
    return code[at:stop].strip()


def _classes_of(value: bytes) -> list[bytes] | None:
    """The class names ``value`` evaluates to one of (see :func:`choices_in`)."""
    value = value.strip()
    if _CLASS_ONLY.fullmatch(value):
        return [value]
    conditional = _CONDITIONAL.fullmatch(value)
    if conditional is not None:
        rest = _classes_of(conditional.group(3))
        return None if rest is None else [conditional.group(1), *rest]
    if value.startswith(b"{"):
        close = closing(value, 1)
        tail = value[close + 1 :].strip()
        if not (tail.startswith(b"[") and tail.endswith(b"]")) or b"[" in tail[1:-1]:
            return None  # (only ``{...}[key]``: one of its values)
        names = []
        for start, stop in parts(value, 1, close):
            item = value[start:stop].strip()
            if not item:
                continue
            key, colon, member = item.partition(b":")
            if not colon or not _CLASS_ONLY.fullmatch(member.strip()):
                return None
            names.append(member.strip())
        return names or None
    return None
