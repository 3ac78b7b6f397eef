"""Whether a module's ``forward`` hands its inputs to its own weights as they came in.

Inside a file, a float32 argument is followed into the module's ``forward`` (a walk with the
call's facts); a class of another project file is known by its summary only, so the summary
says this much (``ClassSummary.feeds_weights``): Open-Sora's ``PatchEmbed3D`` runs its input
straight through ``self.proj``, a ``Conv3d``, so ``self.x_embedder(x.float())`` in a half
model raises there, in ``blocks.py``. The other inputs count too: open_clip's ``AFF`` fuses
``x + residual`` and runs that through its convolutions, so a float32 ``residual`` turns
their input float32 (``ClassSummary.fed_inputs``).
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.binding import parameters
from mpcheck.engine.facts import Prec
from mpcheck.engine.sites import Operand
from mpcheck.knowledge.torch_api import OpKind

WEIGHT_OPS = frozenset({OpKind.LINEAR, OpKind.CONV, OpKind.NORM, OpKind.RECURRENT, OpKind.MODEL})


def feeds_weights(
    fn: cst.FunctionDef | None, op: OpKind | None, layer: Operand | None, args: tuple[Operand, ...]
) -> bool:
    """Whether this call of a layer of the model's dtype, in ``forward``, takes that
    ``forward``'s first input as it came in (its fact still the parameter's)."""
    if fn is None or fn.name.value != "forward" or op not in WEIGHT_OPS:
        return False
    if layer is None or layer.fact.prec is not Prec.MODEL or not args:
        return False
    origin = args[0].fact.origin
    if args[0].fact.prec is not Prec.MODEL or origin is None:
        return False
    params = parameters(fn, skip_self=True)
    return bool(params) and origin.node is params[0]


def fed_inputs(
    fn: cst.FunctionDef | None, op: OpKind | None, layer: Operand | None, args: tuple[Operand, ...]
) -> frozenset[int]:
    """The positions of ``forward``'s inputs (``self`` excluded) that this call of a layer of
    the model's dtype takes as they came in, alone or combined by arithmetic, which keeps a
    float32 operand's dtype (``self.local_att(x + residual)``: both); none once cast."""
    if fn is None or fn.name.value != "forward" or op not in WEIGHT_OPS:
        return frozenset()
    if layer is None or layer.fact.prec is not Prec.MODEL or not args:
        return frozenset()
    fact = args[0].fact
    params = parameters(fn, skip_self=True)
    origin = fact.origin
    if fact.prec is not Prec.MODEL or origin is None or not any(origin.node is p for p in params):
        return frozenset()
    return frozenset(i for i in fact.params if i < len(params))
