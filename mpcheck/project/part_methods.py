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

In a project, that holds only when no other file may call it either: another file that
writes the name after a dot (``head.scorer.pool(h)``, a callback ``hook=m.pool``) or in a
string (``getattr``, a configuration) may hand it anything, and the users of an installable
package may call any of its public methods. Each record holds the file's candidates
(``ModelRecord.part_called``) and the Bloom filter of the names it writes after a dot
(``ModelRecord.attributes``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from mpcheck.project.uncalled import may_name

__all__ = ["PartCalls", "part_called_names"]

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


class PartCalls:
    """The part methods of the project whose every call is in their own file.

    ``parts``: each file's module -> (its candidates, its attribute filter); ``strings``:
    every string any file writes; ``package``: users may call its public methods."""

    def __init__(
        self,
        parts: Mapping[str, tuple[tuple[str, ...], int]],
        strings: Iterable[str],
        *,
        package: bool = False,
    ) -> None:
        candidates = {
            (module, name)
            for module, (names, _) in parts.items()
            for name in names
            if not package or name.startswith("_")
        }
        if candidates:
            words = {w for s in strings for w in s.split(".")}
            candidates = {(m, n) for m, n in candidates if n not in words}
        if candidates:
            candidates = {
                (module, name)
                for module, name in candidates
                if not any(
                    may_name(bits, name) for other, (_, bits) in parts.items() if other != module
                )
            }
        self.closed = frozenset(candidates)

    def called_in_file(self, module: str, name: str) -> bool:
        """Whether every call of the method ``name`` of ``module`` is in ``module``."""
        return (module, name) in self.closed

    @property
    def digest(self) -> str:
        return repr(sorted(self.closed))
