"""A module's own parts, returned by its methods: ``base_layer = self.get_base_layer()``.

peft's tuner layers are ``class Linear(nn.Module, IA3Layer)``: the methods that reach the layer
they wrap live in a mixin that is no ``nn.Module`` (``BaseTunerLayer.get_base_layer``, in
another file, or a local base class). Walked on their own, those methods have a ``self`` of
no known dtype, so one that returns a module is summarised as a module of unknown dtype, and
the base layer's weight read through it (``base_layer.weight.data``) has no dtype either.

Called on a module, such a method returns a part of it (what else would a layer's method
hand back as a module of no dtype of its own?): it has the caller's dtype, half when the model
runs in half precision, as ``self.base_layer`` read directly has. A module the method builds
in a dtype it knows (``nn.Linear(...)``: float32) keeps that dtype. Methods of a base in
another file are found through the summaries of the bases the file's classes name (one file
away: a base of that base in a third file is not looked up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mpcheck.engine.facts import Fact, Kind, Prec
from mpcheck.engine.frames import ClassInfo
from mpcheck.project.summary import Function

__all__ = ["inherited_method", "own_part"]


def own_part(returned: Fact, owner: Fact) -> Fact:
    """``returned``, what a method of the module ``owner`` returned, as a part of ``owner``
    when it is a module of unknown dtype (and ``owner``'s dtype is known)."""
    if returned.kind is not Kind.MODULE or returned.prec is not Prec.UNKNOWN or returned.params:
        return returned
    if owner.kind is not Kind.MODULE or owner.prec is Prec.UNKNOWN:
        return returned
    return replace(
        returned, prec=owner.prec, dtype=owner.dtype, origin=owner.origin, maybe=owner.maybe
    )


def inherited_method(
    info: ClassInfo | None, name: str, classes: Mapping[str, ClassInfo], depth: int = 0
) -> Function | None:
    """The summary of method ``name`` that ``info`` inherits from a base in another project
    file (directly, or through a base class of this file); None when none has it."""
    if info is None or depth > 8:
        return None
    for *_, summary in info.elsewhere:
        found = summary.methods.get(name)
        if found is not None:
            return found
    for base in info.bases:
        parent = classes.get(base)
        if parent is not None and parent is not info:
            found = inherited_method(parent, name, classes, depth + 1)
            if found is not None:
                return found
    return None
