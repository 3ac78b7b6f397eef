"""Models as scripts and trainers run them: whole, through ``model(x)`` or ``vae.encode(x)``.

Inside a model's own code its layers are checked one by one; a script only sees the model,
so the model's dtype decides what its input must be.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.facts import Cause, Fact, Kind, Prec
from mpcheck.engine.frames import ClassInfo, Frame
from mpcheck.engine.sites import CallSite, Operand
from mpcheck.knowledge.torch_api import OpKind
from mpcheck.project.summary import ClassSummary


def takes_half_input(
    module: Fact,
    path: str | None,
    own: ClassInfo | None,
    frame: Frame,
    imported: ClassSummary | None = None,
) -> bool:
    """A model a script cast to half, whose input must be half too.

    Not under autocast (its layers recast their input), not when its class casts what it
    is given (the file's own class, or another file's by its summary), and not when a part
    of it was cast apart (MPC104 follows that).
    """
    if module.prec is not Prec.HALF or frame.scope.in_module:
        return False
    region = frame.scope.autocast
    if region is not None and region.active:
        return False
    parts = [f for k, f in frame.env.items() if path is not None and k.startswith(f"{path}.")]
    if any(f.kind is Kind.MODULE and f.prec is not module.prec for f in parts):
        return False
    if imported is not None and imported.casts_input:
        return False
    return own is None or not own.casts_input


def model_of(node: cst.Call, method: str) -> cst.BaseExpression | None:
    """``vae`` of ``vae.encode(x)``: the model whose weights a method runs (not for
    ``self.proj(x)``, where the attribute is the module)."""
    if method in ("forward", "encode", "decode", "sample") and isinstance(node.func, cst.Attribute):
        return node.func.value
    return None


def feeds_its_weights(module: Fact, summary: ClassSummary | None, frame: Frame) -> bool:
    """A module of another project file whose ``forward`` hands its input as it came to its
    own layers (its summary says so): the input must be in the module's dtype, as a whole
    model's is. Not under autocast, which recasts what those layers take."""
    if summary is None or not summary.feeds_weights or module.prec is not Prec.MODEL:
        return False
    region = frame.scope.autocast
    return region is None or not region.active


def fed_arguments(
    module: Fact,
    summary: ClassSummary | None,
    frame: Frame,
    args: tuple[Operand, ...],
    kwargs: dict[str, Operand],
) -> tuple[Operand, ...]:
    """The arguments of a call of a module of another project file that its ``forward``
    hands, as they came or in arithmetic with its other inputs, to its own layers (its
    summary's ``fed_inputs``; the first input beyond): each must be in the module's dtype.
    Not under autocast, which recasts what those layers take."""
    forward = summary.methods.get("forward") if summary is not None else None
    if summary is None or forward is None or module.prec is not Prec.MODEL:
        return ()
    region = frame.scope.autocast
    if region is not None and region.active:
        return ()
    found = []
    for index in summary.fed_inputs:
        if index == 0 or index >= len(forward.params):
            continue
        name = forward.params[index]
        operand = args[index] if index < len(args) else kwargs.get(name)
        if operand is not None:
            found.append(operand)
    return tuple(found)


# the ops whose float32 weights refuse a half input (a norm takes one: measured on torch 2.13)
_REFUSES_HALF_INPUT = frozenset({OpKind.LINEAR, OpKind.CONV, OpKind.RECURRENT})


def half_meets_float32(site: CallSite) -> bool:
    """A Linear, conv or RNN (or their functional forms) whose weights are float32 given a
    half input: torch raises. (A norm takes a half input with float32 parameters.)"""
    if site.op not in _REFUSES_HALF_INPUT:
        return False
    first, params = site.operands()
    if first is None or not first.fact.is_tensor:
        return False
    fact = first.fact
    if fact.prec is not Prec.HALF or fact.maybe or fact.cause is Cause.AUTOCAST:
        return False
    return any(p.fact.prec is Prec.FULL and not p.fact.maybe for p in params)
