"""Which class an attribute of a module class holds: what a cast of one part of a model casts.

``nn.Module.half()``, ``.bfloat16()`` and ``.to(dtype)`` walk their receiver and its
submodules only. A script's ``model.encoder.half()`` therefore casts what the model's class
body binds at ``self.encoder`` (``self.encoder = Encoder(...)``, or ``setattr(self,
"encoder", Encoder(...))``), never the model itself nor its other parts; and
``model.embed.bfloat16()`` of an ``nn.Embedding`` casts no class of the project at all. A
chain of parts (``model.encoder.layers.half()``) is followed part by part.

Each file's record lists, for every class it defines, the parts its body binds
(:func:`parts_in`): the attribute and the callees of the call bound there, resolved through
the file's imports, the bound call's own callee first. A value the record cannot name (a
parameter, a function's value, a container handed a variable) is :data:`UNNAMED`: a cast of
that part may cast anything the model holds, the model included (the conservative answer).
:class:`HeldParts` answers, across the project, which project classes a part holds.

A part is a tensor when its binding says so (``self.pos = nn.Parameter(...)``, a name the
class registers with ``register_buffer``/``register_parameter``, spelled :data:`TENSOR`) or,
with no binding, when torch's own layers register that name (``weight``, ``running_mean``:
:func:`~mpcheck.knowledge.torch_api.tensor_attribute`); so is everything read through a
tensor's ``data`` or ``grad``. A tensor is no module: reading one off a model and handing it
on (an optimizer's parameter group, ``list.append``) or casting it casts no class.

Known imprecisions: a container literal's items are read as built wherever a call writes them
(``nn.ModuleDict({"a": A(), "b": b})`` holds ``A`` only), and a name the project's imports do
not pin to one class resolves to no class.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence

from mpcheck.knowledge.torch_api import CONTAINER_LAYERS, tensor_attribute
from mpcheck.project.brackets import closing, parts
from mpcheck.project.names import lineage_of
from mpcheck.project.setattrs import literal_setattrs

__all__ = ["PART", "TENSOR", "UNNAMED", "HeldParts", "Part", "parts_in"]

# A record's cast of ``pkg.Net@encoder``: of the part ``encoder`` of a ``pkg.Net`` (the owner
# may be spelled as a call's value too, ``pkg.load()#@encoder``; a chain: ``pkg.Net@a@b``).
PART = "@"
# A part bound to something no record names (``self.encoder = encoder``, ``build(cfg)``).
UNNAMED = "?"
# A tensor the class registers by name (``self.register_buffer("pos", ...)``).
TENSOR = "torch.Tensor"

# ``self.<attr> = ...`` at the start of a line of a class body; the value follows the match.
_SELF_PART = re.compile(rb"(?m)^[ \t]+self\.([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*")
# ``self.register_buffer("pos", ...)`` / ``self.register_parameter('scale', ...)``
# (read in the blanked code; its name, in the source: :data:`_NAMED`)
_REGISTERS = re.compile(rb"\bself\.register_(?:buffer|parameter)[ \t]*\(")
_NAMED = re.compile(rb"\s*[\"']([A-Za-z_]\w*)[\"']")
_NONE = re.compile(rb"None\b")
_BARE = re.compile(rb"\*{0,2}[ \t]*[A-Za-z_][\w.]*")

# (attribute, callees): one binding of a part (see the module docstring)
Part = tuple[str, tuple[str, ...]]


def parts_in(
    code: bytes,
    start: int,
    stop: int,
    calls: Sequence[tuple[int, int, str]],
    resolve: Callable[[str], str | None],
    data: bytes,
) -> tuple[Part, ...]:
    """The parts the class body ``code[start:stop]`` binds (blanked code; ``data``, the file
    as written): for each ``self.<attr> = Call(...)`` (or ``setattr(self, "<attr>",
    Call(...))``: :mod:`setattrs`), the qualified callee (:data:`UNNAMED` when it is no
    CapWords call, its name resolves to nothing, or it is a torch container handed a variable)
    and those of the calls inside the value; ``self.<attr> = None`` binds no part. ``calls``:
    each CapWords call of the file (its offset, the end of its ``(``, its callee), in order.
    Then each tensor it registers by a name ``data`` spells."""
    bindings = [(m.end(), m.group(1).decode()) for m in _SELF_PART.finditer(code, start, stop)]
    for target, at in literal_setattrs(data, code, start, stop):
        if target.count(b".") == 1:  # (``self.<attr>``; a part's part is that part's)
            bindings.append((at, target[len(b"self.") :].decode()))
    out: list[Part] = []
    for at, attr in sorted(bindings):
        i = bisect_left(calls, (at,))
        if i == len(calls) or calls[i][0] != at:
            if not _NONE.match(code, at):
                out.append((attr, (UNNAMED,)))
            continue
        _, end, name = calls[i]
        close = closing(code, end)
        line = code.find(b"\n", close)
        extent = len(code) if line < 0 else line
        top = resolve(name)
        if top is not None and _container(top) and _holds_variable(code, end, close):
            top = None  # (``nn.Sequential(block, ...)``: what the variable holds is unknown)
        inner: set[str] = set()
        i += 1
        while i < len(calls) and calls[i][0] < extent:
            inner.update(r for r in (resolve(calls[i][2]),) if r is not None)
            i += 1
        out.append((attr, (top or UNNAMED, *sorted(inner))))
    for found in _REGISTERS.finditer(code, start, stop):
        named = _NAMED.match(data, found.end())
        if named is not None:
            out.append((named.group(1).decode(), (TENSOR,)))
    return tuple(out)


def _container(name: str) -> bool:
    module, _, leaf = name.rpartition(".")
    return (module == "torch.nn" or module.startswith("torch.nn.")) and leaf in CONTAINER_LAYERS


def _holds_variable(code: bytes, begin: int, end: int) -> bool:
    """Whether a container's arguments ``code[begin:end]`` hand it a name (``block``,
    ``*layers``) rather than calls or literals building its items."""
    for first, last in parts(code, begin, end):
        text = code[first:last].strip()
        bare = _BARE.fullmatch(text)
        if bare is not None and text not in (b"None", b"True", b"False"):
            return True
    return False


class HeldParts:
    """The project classes each part of a project class holds, joined from the records'
    classes: ``classes`` maps a qualified class to its bases (as recorded) and parts;
    ``resolve`` names the project class a recorded name stands for; ``unknown`` says whether
    a name that is no project class may still be one (a project function's value, a name
    its imports do not pin)."""

    def __init__(
        self,
        classes: Iterable[tuple[str, Sequence[str], Sequence[Part]]],
        resolve: Callable[[str], str | None],
        unknown: Callable[[str], bool],
    ) -> None:
        self.bases: dict[str, tuple[str, ...]] = {}
        self.parts: dict[str, dict[str, list[tuple[str, ...]]]] = {}
        for name, bases, held in classes:
            self.bases[name] = tuple(bases)
            own = self.parts.setdefault(name, {})
            for attr, callees in held:
                own.setdefault(attr, []).append(tuple(callees))
        self.resolve = resolve
        self.unknown = unknown

    def held(self, owner: str, attr: str) -> frozenset[str] | None:
        """The project classes the part ``attr`` of a ``owner`` may hold (empty: a torch or
        library layer, which casts no project class), or None when some binding of it is
        unnamed or the class and its project bases bind no such part."""
        for cls in self._lineage(owner):
            bindings = self.parts.get(cls, {}).get(attr)
            if bindings:
                return self._classes(bindings)
        return frozenset() if tensor_attribute(attr) else None

    def reached(self, owner: str, attrs: Sequence[str]) -> frozenset[str] | None:
        """The project classes the value at the chain ``attrs`` of a ``owner`` may be or hold
        (``encoder.layers``: the classes held there; ``emb.weight``: none, a tensor), or None
        when some part along it is unnamed. A chain reaching a tensor (a tensor name past an
        unnamed part: ``enc.weight``, ``p.data``) holds no class, whatever holds the tensor;
        a tensor's ``data`` or ``grad`` is a tensor (:meth:`held`)."""
        found: frozenset[str] = frozenset((owner,))
        for i, attr in enumerate(attrs):
            parts = [self.held(c, attr) for c in sorted(found)]
            if any(p is None for p in parts):
                return frozenset() if any(map(tensor_attribute, attrs[i + 1 :])) else None
            found = frozenset(c for p in parts if p for c in p)
        return found

    def _classes(self, bindings: Iterable[tuple[str, ...]]) -> frozenset[str] | None:
        out: set[str] = set()
        for top, *inner in bindings:
            if top == TENSOR:
                continue  # (a tensor it registers)
            found = None if top == UNNAMED else self.resolve(top)
            if found is None and (top == UNNAMED or self.unknown(top)):
                return None
            out.update(c for c in (found, *map(self.resolve, inner)) if c is not None)
        return frozenset(out)

    def _lineage(self, cls: str) -> list[str]:
        """``cls`` and its project bases, nearest first (the class's own binding wins)."""
        return lineage_of(cls, self.bases, self.resolve)
