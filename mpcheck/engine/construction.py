"""Code that runs when the model is built: evidence of float32 (:class:`Construction`).

A module's ``__init__``, and a function only construction calls (found through the
project's call sites, :mod:`mpcheck.project.construction`), run before any cast of the model:
what they compute from tensors made without ``dtype=`` is float32 (the default dtype), and
``model.half()`` casts only the stored result. A finding whose only half premise is "this
module may run in half" does not hold there. It still holds when construction itself may run
in half: the project changes the default dtype, the model is loaded by a library loader that
builds it under the load dtype (``from_pretrained(torch_dtype=...)`` in transformers and
diffusers sets the default dtype while ``__init__`` runs), it is built with ``dtype=``, the
function takes a dtype, or the configuration says every module runs in half.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.evidence import AUTOCAST, CAST, FLOAT32, PREMISE, HalfEvidence
from mpcheck.project.models import ModelUses
from mpcheck.project.records import BUILT_IN_HALF

__all__ = ["Construction", "cast_once_built"]

# How :mod:`mpcheck.project.records` words a build or load in half (``Model(dtype=...)``,
# ``from_pretrained(torch_dtype=...)``), as against a cast of a model already built.


class Construction:
    """The part that turns a function's half premise into float32 evidence at construction."""

    def __init__(self, uses: ModelUses | None, setting: bool = False) -> None:
        self.uses = uses
        self.setting = setting  # ``models-run-in-half``: users may build under a half dtype

    def evidence(self, fn: cst.FunctionDef, owner: str | None, found: HalfEvidence) -> HalfEvidence:
        """``found`` (the evidence of ``fn``'s class ``owner``, or of the function itself),
        or float32 evidence when ``fn`` only runs at construction from float32 inputs."""
        index = self.uses.construction if self.uses is not None else None
        if index is None or self.setting or index.default_dtype or _takes_dtype(fn):
            return found
        name = fn.name.value
        if name == "__init__" and owner is not None:
            if not _built_in_float32(found):
                return found
            where = f"in `{owner}.__init__`"
        else:
            callers = index.callers(name)
            if not callers or not all(self._float32_build(c) for c in callers if c):
                return found
            named = sorted(f"`{c.rpartition('.')[2]}.__init__`" for c in callers if c)
            if "" in callers:
                named.append("import time")
            where = "called only from " + ", ".join(named[:3]) + (", ..." if named[3:] else "")
        text = f"computed at construction ({where}), before any cast"
        return HalfEvidence(FLOAT32, text, None, found.node)

    def before_cast(self, fn: cst.FunctionDef | None) -> bool:
        """Whether ``fn`` runs only while a model is built: a class's ``__init__``, or a method
        only construction calls (``self.extend_pe(n)`` in ``__init__`` alone). What it stores
        on the module is there when a later cast (``model.half()``) casts the module."""
        if fn is None:
            return False
        if fn.name.value == "__init__":
            return True
        index = self.uses.construction if self.uses is not None else None
        return index is not None and bool(index.constructing(fn.name.value))

    def _float32_build(self, qualified: str) -> bool:
        """Whether the class ``qualified`` is built in float32: no library loader, no
        ``dtype=`` at its build (its evidence is a later cast or only the premise)."""
        if self.uses is None:
            return False
        module, _, leaf = qualified.rpartition(".")
        reach = self.uses.at(module).of(leaf)
        if reach is None or reach.kind in (FLOAT32, AUTOCAST):
            return True
        return reach.kind == CAST and BUILT_IN_HALF not in reach.place.text


def cast_once_built(found: HalfEvidence) -> bool:
    """Whether the class's way to half is a cast of the built model (``model.half()``,
    ``.to(torch.bfloat16)``), not a load or ``dtype=`` build under a half dtype: such a cast
    walks every floating parameter and buffer, a part built with a literal
    ``dtype=torch.float32`` included."""
    return found.kind == CAST and BUILT_IN_HALF not in found.text


def _built_in_float32(found: HalfEvidence) -> bool:
    """The class's own evidence leaves its construction in float32: only the premise, or a
    cast after it is built (``model.half()``), not a half load or a ``dtype=`` build."""
    if found.float32:
        return False  # (already silent, with its own reason)
    return found.kind == PREMISE or cast_once_built(found)


def _takes_dtype(fn: cst.FunctionDef) -> bool:
    """A parameter that carries a dtype (``dtype=None``, ``torch_dtype``): what it is handed
    decides the dtype construction computes in."""
    params = (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
    return any("dtype" in p.name.value for p in params)
