"""Whether a module's ``forward`` hands its inputs to its own weights as they came in.

Inside a file, a float32 argument is followed into the module's ``forward`` (a walk with the
call's facts); a class of another project file is known by its summary only, so the summary
says this much (``ClassSummary.feeds_weights``): Open-Sora's ``PatchEmbed3D`` runs its input
straight through ``self.proj``, a ``Conv3d``, so ``self.x_embedder(x.float())`` in a half
model raises there, in ``blocks.py``. The other inputs count too: open_clip's ``AFF`` fuses
``x + residual`` and runs that through its convolutions, so a float32 ``residual`` turns
their input float32 (``ClassSummary.fed_inputs``).

The other way round, any public method counts (``ClassSummary.feeds``): a model kept in
float32 whose ``decode`` hands the latents it is given straight to ``self.post_quant_conv``
refuses half latents there (torch never casts a layer's input to its weights), whichever
file builds it and hands it half values.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.engine.binding import parameters
from mpcheck.engine.facts import Prec
from mpcheck.engine.sites import Autocast, Operand
from mpcheck.knowledge.torch_api import OpKind

# the layers whose weights refuse an input of another floating dtype (a norm takes a half
# input with float32 parameters: measured on torch 2.13)
REFUSING_OPS = frozenset({OpKind.LINEAR, OpKind.CONV, OpKind.RECURRENT})

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


def refusing_inputs(
    fn: cst.FunctionDef | None, args: tuple[Operand, ...], autocast: Autocast | None
) -> tuple[int, ...]:
    """The positions of the method ``fn``'s inputs (``self`` excluded) that this call of a
    layer of its own takes as they came in, alone or combined by arithmetic
    (``self.post_quant_conv(z / self.scaling_factor)``); () once cast (``z.to(self.dtype)``,
    ``.float()``: the fact is no longer the parameter's), under an autocast the method
    opens, or when the value is not followed back to its parameters (walked with a
    caller's facts)."""
    if fn is None or not args:
        return ()
    if autocast is not None and autocast.active:
        return ()
    fact = args[0].fact
    origin = fact.origin
    if fact.prec is not Prec.MODEL or fact.maybe or origin is None or not fact.params:
        return ()
    params = parameters(fn, skip_self=True)
    if not any(origin.node is p for p in params) or max(fact.params) >= len(params):
        return ()
    return tuple(sorted(fact.params))
