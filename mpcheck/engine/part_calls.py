"""Methods of a file's classes that only a part's owner calls: walked from their call.

A method's parameter is what its calls hand it. A module that holds a part and calls one of
its methods with an upcast (``self.scorer.pool(x.float(), mask)``) hands that method
float32, so inside it the parameter is float32, not the model's half activation: a constant
beyond float16's range is harmless there, and a half layer that float32 meets there raises
(reported at the layer, with the upcast as its origin). The engine walks a method reached
from a call with what that call passes (:meth:`~mpcheck.engine.functions.Definitions.summary`);
its own class's ``self.helper(...)`` calls are walked so already. A part's method is walked
so only when every call of it is in view: the file has one ``def`` of its name, and every
time it writes the name after a dot it is a call through an attribute of ``self``
(``self.<part>.<name>(...)``), never a bound method handed on (a callback), a call on
another object, or a string (``getattr(part, "name")``). A bare name (a local variable
``pool = Pool(8)``) reaches no method without a dot before it.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["part_called_names"]

_PART_CALL = re.compile(rb"self\.[A-Za-z_]\w*\.([A-Za-z_]\w*)[ \t]*\(")
_DEF = re.compile(rb"\bdef[ \t]+([A-Za-z_]\w*)[ \t]*\(")
_ATTRIBUTE = re.compile(rb"\.[ \t]*([A-Za-z_]\w*)")
_QUOTED = re.compile(rb"[\"']([A-Za-z_]\w*)[\"']")


def part_called_names(source: bytes) -> frozenset[str]:
    """The method names ``source`` (the file's bytes, strings included) defines once and
    writes after a dot only in calls ``self.<part>.<name>(...)``, never quoted: every call
    of such a method is one of those (dunders and ``forward``, which torch calls, excluded)."""
    called = Counter(_PART_CALL.findall(source))
    if not called:
        return frozenset()
    defined = Counter(m for m in _DEF.findall(source) if m in called)
    dotted = Counter(m for m in _ATTRIBUTE.findall(source) if m in defined)
    quoted = {m for m in _QUOTED.findall(source) if m in defined}
    return frozenset(
        name.decode()
        for name, calls in called.items()
        if defined[name] == 1
        and dotted[name] == calls
        and name not in quoted
        and not name.startswith(b"__")
        and name != b"forward"
    )
