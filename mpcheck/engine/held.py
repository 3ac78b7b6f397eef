"""A GradScaler the object holds: made in one method, stepped in another.

A trainer class often splits the loop across methods: ``__init__`` makes ``self.scaler``,
``forward`` returns ``self.scaler.scale(loss)`` for the caller to ``backward()`` (or a
``backward`` method runs it), and ``update`` clips and then ``self.scaler.step(opt)``. The walk
of ``update`` sees no scaled backward before its clip, yet an enabled scaler's ``step`` raises
unless ``scale`` ran in that iteration (measured: "Attempted step but _scale is None"), and it
divides the gradients by the scale: the gradients it steps are scaled ones. A clip before that
step, in a function that neither backwards nor unscales itself, therefore sees scaled
gradients, unless another method unscales them first.

So a STEP site is marked ``held`` (with the method that made the scaler) when the scaler was
made in another method of the stepping method's class (or of a base class in this file), and
no method of those classes calls ``unscale_`` or ``unscale_gradients`` at all: whatever the
order the methods run in, nothing of the class unscales between the scaled backward and the
step. Rules decide what a clip before such a step means (MPC202).
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.frames import ClassInfo, lineage
from mpcheck.engine.training import Action, TrainingSite
from mpcheck.project.names import descendants

UNSCALES = frozenset({"unscale_", "unscale_gradients"})


def held(site: TrainingSite, classes: dict[str, ClassInfo]) -> TrainingSite:
    """``site`` marked with the method that made its scaler, when ``self`` holds it."""
    fn = site.scope.function
    info = classes.get(site.scope.class_name or "")
    if site.action is not Action.STEP or site.scaler is None or fn is None or info is None:
        return site
    owners = list(lineage(classes, info))
    made = site.scaler.node
    maker = next(
        (
            method
            for cls in owners
            for method in cls.methods.values()
            if method is not fn and any(n is made for n in descendants(method))
        ),
        None,
    )
    if maker is None or any(_unscales(cls.node) for cls in owners):
        return site
    return replace(site, held=maker)


def _unscales(cls: cst.ClassDef) -> bool:
    return any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in UNSCALES
        for node in descendants(cls)
    )
