"""Models as scripts and trainers run them: whole, through ``model(x)`` or ``vae.encode(x)``.

Inside a model's own code its layers are checked one by one; a script only sees the model,
so the model's dtype decides what its input must be.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.facts import Fact, Kind, Prec
from mpcheck.infer.frames import ClassInfo, Frame


def takes_half_input(module: Fact, path: str | None, own: ClassInfo | None, frame: Frame) -> bool:
    """A model a script cast to half, whose input must be half too.

    Not under autocast (its layers recast their input), not when the file's own class casts
    what it is given, and not when a part of it was cast apart (MPC104 follows that).
    """
    if module.prec is not Prec.HALF or frame.scope.in_module:
        return False
    region = frame.scope.autocast
    if region is not None and region.active:
        return False
    parts = [f for k, f in frame.env.items() if path is not None and k.startswith(f"{path}.")]
    if any(f.kind is Kind.MODULE and f.prec is not module.prec for f in parts):
        return False
    return own is None or not own.casts_input


def model_of(node: cst.Call, method: str) -> cst.BaseExpression | None:
    """``vae`` of ``vae.encode(x)``: the model whose weights a method runs (not for
    ``self.proj(x)``, where the attribute is the module)."""
    if method in ("forward", "encode", "decode", "sample") and isinstance(node.func, cst.Attribute):
        return node.func.value
    return None
