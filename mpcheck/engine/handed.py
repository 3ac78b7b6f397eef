"""A torch layer built on its own and handed to a function: its dtype is then the callee's.

``proj = nn.Linear(8, 8)`` is float32, and stays so while nothing casts it: MPC102 reports it
when it is fed a half input. Handing it to a function (a quantizer, ``quantize_(proj)``; a
helper that casts or replaces its weights in place) passes the object itself, and the callee
may cast it (``layer.half()``): "built in float32 and never cast" no longer holds, so the
variable's dtype becomes unknown. Torch's own functions (``nn.Sequential(proj)``,
``checkpoint(proj, x)``) and the builtins that only look at it (``print``, ``isinstance``)
keep it.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.facts import Fact, Kind, Prec
from mpcheck.engine.frames import Frame
from mpcheck.engine.sites import Operand
from mpcheck.project.names import dotted

__all__ = ["hand_over"]

_LOOKING = frozenset(
    "print len isinstance issubclass id repr str type hasattr getattr callable vars".split()
)


def hand_over(
    func: cst.BaseExpression,
    qual: str | None,
    args: tuple[Operand, ...],
    kwargs: dict[str, Operand],
    frame: Frame,
) -> None:
    """Forget that a stand-alone float32 layer handed to a call that may cast it is float32."""
    if (qual or dotted(func) or "").startswith("torch.") or (qual or dotted(func)) in _LOOKING:
        return
    for op in (*args, *kwargs.values()):
        fact = op.fact
        if fact.kind is not Kind.MODULE or not fact.default_float32_layer:
            continue
        path = dotted(op.node)
        if path is not None and frame.env.get(path) == fact:
            frame.env[path] = Fact(Kind.MODULE, Prec.UNKNOWN, layer=fact.layer)
