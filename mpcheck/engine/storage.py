"""Assignments that replace a tensor's storage: ``p.data = value``, ``m.weight = nn.Parameter(v)``.

Setting ``.data`` swaps the tensor under a parameter, dtype included: unlike ``p.copy_(v)``,
``p.data *= v`` or ``p.mul_(v)``, nothing casts the value to the parameter's dtype, and a new
``nn.Parameter`` keeps its argument's. A merge that multiplies a half weight by a float32
vector (peft's IA3: ``base_layer.weight.data = torch.mul(base_layer.weight.data, ia3_l)``, PR
#1634) stores what type promotion made of them, float32: that layer is float32 from then on
inside a half model, and its next half input raises (``mat1 and mat2 must have the same
dtype``, measured under torch 2.13).

The fact is narrow on purpose. The value must be float32 *by type promotion* of a value in the
target's dtype with one forced to float32 (``Fact.mixed``), and the target a tensor in the
model's dtype (half when the model runs in half precision) or explicitly half. An explicit cast
says the code means the dtype (``p.data = p.data.float()`` upcasts trainable parameters for a
GradScaler, ``p.data = p.to(dtype)``), a cast back after the product (``.to(orig_dtype)``) is
the fix, and a value of any other provenance (weights loaded from a checkpoint) says nothing of
the dtype the code expects. ``__init__`` builds the model in the default dtype, where nothing
is widened, so stores there are left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from mpcheck.engine.facts import Fact, Origin, Prec
from mpcheck.engine.sites import Scope
from mpcheck.knowledge import torch_api as T

__all__ = ["replaced", "widened"]

PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def replaced(
    target: cst.BaseExpression,
    value: cst.BaseExpression,
    resolve: Callable[[cst.BaseExpression], str | None],
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``(tensor, new storage)`` when assigning ``value`` to ``target`` replaces a tensor's
    storage: ``(p, value)`` for ``p.data = value``, ``(m.weight, v)`` for ``m.weight =
    nn.Parameter(v)``; None for any other assignment."""
    if not isinstance(target, cst.Attribute):
        return None
    if target.attr.value == "data":
        return target.value, value
    if not isinstance(value, cst.Call) or resolve(value.func) not in PARAMETER_CLASSES:
        return None
    for i, arg in enumerate(value.args):
        if arg.star:
            return None
        if (arg.keyword is None and i == 0) or (arg.keyword and arg.keyword.value == "data"):
            return target, arg.value
    return None


def widened(before: Fact, value: Fact, scope: Scope, layer: str | None = None) -> Origin | None:
    """Where ``value`` became float32 by promoting a value of ``before``'s dtype, when it
    replaces the storage of ``before``, a tensor in the model's dtype or explicitly half:
    from then on that tensor is float32. None when the store changes no dtype (or may not).
    ``layer``: the class of the module holding ``before`` (``norm.weight``), when known; a
    torch norm runs a half input with float32 weights, so a norm's are left alone."""
    fn = scope.function
    if fn is not None and fn.name.value == "__init__":
        return None
    if T.LAYERS.get(layer or "", (None, ""))[0] is T.OpKind.NORM:
        return None
    if not before.is_tensor or before.prec not in (Prec.MODEL, Prec.HALF):
        return None
    if before.maybe or before.zero_dim:
        return None
    if not value.is_tensor or value.prec is not Prec.FULL or value.maybe or value.zero_dim:
        return None
    return value.mixed
