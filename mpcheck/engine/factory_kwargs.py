"""Factory kwargs reach only what they are handed.

A module whose ``__init__`` takes a ``dtype`` and hands it on (``factory_kwargs = {"device":
device, "dtype": dtype}``, ``nn.Linear(..., **factory_kwargs)``) is made half by building it
with ``dtype=torch.bfloat16``: only what it hands that dtype is built in it. A tensor it makes
without one (``nn.Parameter(torch.ones(n, device=device))``) is float32 under the default
dtype, and stays so. Only a cast of the built module (``.half()``, ``.to(dtype)``) or a load
that changes the default dtype while ``__init__`` runs (``from_pretrained(torch_dtype=...)``)
makes it half.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.base import Walk
from mpcheck.engine.evidence import CAST, PREMISE, HalfEvidence
from mpcheck.engine.facts import Cause, Fact, Prec
from mpcheck.engine.frames import Frame
from mpcheck.project.records import BUILT_IN_HALF

__all__ = ["built_by_dtype", "hands_dtype", "unhanded"]

# How :mod:`mpcheck.project.records` words a build under a dtype (``Model(..., dtype=...)``).


def unhanded(file: Walk, frame: Frame, value: Fact) -> Fact | None:
    """``value``, a tensor made without ``dtype=`` that ``__init__`` makes a parameter or
    buffer of a module made half by its ``dtype=`` build: float32, said so; None: the
    parameter follows the model."""
    name = frame.scope.class_name
    info = file.classes.get(name or "")
    if (
        info is None
        or name is None
        or value.prec is not Prec.FULL
        or value.origin is None
        or value.origin.cause is not Cause.FACTORY
        or not hands_dtype(frame.scope.function)
        or not file.built_by_dtype(info, name)
    ):
        return None
    text = f"{value.origin.text}, which the `dtype=` building `{name}` does not reach"
    return replace(value, origin=replace(value.origin, text=text))


def hands_dtype(fn: cst.FunctionDef | None) -> bool:
    """``fn`` is an ``__init__`` taking a ``dtype`` parameter that its body hands on."""
    if fn is None or fn.name.value != "__init__":
        return False
    params = (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
    if not any(p.name.value == "dtype" for p in params):
        return False
    return _names(fn.body, "dtype")


def built_by_dtype(evidence: HalfEvidence) -> bool:
    """Whether the class's way to half is its ``dtype=`` build: nothing casts it once built
    (only the premise), or the project builds it with ``dtype=`` (the caller rules out a
    ``from_pretrained`` class, whose load builds it under a half default dtype)."""
    if evidence.kind == PREMISE:
        return True
    return evidence.kind == CAST and BUILT_IN_HALF in evidence.text


def _names(node: cst.CSTNode, name: str) -> bool:
    """``name`` is handed on in ``node``: an argument of a call (``dtype=dtype``) or a value
    of a dict (``{"device": device, "dtype": dtype}``, unpacked into calls), not only kept
    (``self.dtype = dtype``)."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Arg) and _is(current.value, name):
            return True
        if isinstance(current, cst.DictElement) and _is(current.value, name):
            return True
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and current is not node:
            continue
        stack.extend(current.children)
    return False


def _is(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name
