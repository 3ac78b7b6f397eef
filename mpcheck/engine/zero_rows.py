"""Exact-zero rows: where the code makes them, and the ops that keep them (``Fact.zeros``).

A guard float16 rounds to 0 (``F.normalize``'s default ``eps=1e-12``) leaves ``0 / 0 = NaN``
only where the value it guards is exactly 0. Whether a row can be is known, without random
luck, where the code builds it so: zero padding (``F.pad``), ``torch.zeros`` rows joined to
data, a masked fill with 0 -- and where an op maps a zero row to a zero row (a reshape, a
cast, a product, a layer built without a bias). The walk applies this to every call it
reports, beside the value ranges (:func:`zeroed`); any other op drops the fact. A function's
inputs hold their own marker (the parameter), so a summary says which input's zero rows
its result keeps and a call substitutes what it hands (``window_partition(padded, 8)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import libcst as cst

from mpcheck.engine.base import CallRecord
from mpcheck.engine.facts import Cause, Fact, Kind, Origin
from mpcheck.engine.sites import Operand
from mpcheck.knowledge import zero_rows as Z
from mpcheck.project.names import dotted

__all__ = ["bias_free", "made", "zeroed"]


def made(origin: Origin | None) -> bool:
    """Zero rows the code makes (not an input's marker: its caller decides)."""
    return origin is not None and not isinstance(origin.node, cst.Param)  # see Fact.zero_rows


def zeroed(call: CallRecord) -> CallRecord:
    """``call`` with its result's zero rows set from its operands (dropped by any other op)."""
    result = call.result
    if result.kind is not Kind.TENSOR or isinstance(call.node, cst.AugAssign):
        return call  # (``d += eps``: the walk keeps ``d``'s own fact, rules follow it)
    if call.method is not None and call.method.endswith("_") and call.method not in Z.FILLS:
        return call  # an in-place op: the same
    zeros = _zeros(call)
    if zeros == result.zeros:
        return call
    return replace(call, result=replace(result, zeros=zeros))


def _of(operand: Operand | None) -> Origin | None:
    return operand.fact.zeros if operand is not None and operand.fact.is_tensor else None


def _zero(operand: Operand | None) -> bool:
    """A literal 0 (``value=0``, ``0.0``)."""
    return operand is not None and operand.fact.kind is Kind.SCALAR and operand.fact.value == 0


def _text(call: CallRecord, what: str) -> Origin:
    return Origin(call.node, Cause.FACTORY, what)


def _zeros(call: CallRecord) -> Origin | None:
    name = call.method or call.qual or ""
    if call.receiver is not None and not call.method and call.qual is None:
        return _layer(call)
    if call.qual in Z.PADS:
        mode, value = call.operand(2, "mode"), call.operand(3, "value")
        constant = mode is None or (
            isinstance(mode.node, cst.SimpleString) and mode.node.evaluated_value == "constant"
        )
        if constant and (value is None or _zero(value)):
            return _text(call, "zero padding")
        return None
    if call.method in Z.FILLS:
        if _zero(call.operand(2, "value")):
            return _text(call, "positions filled with 0")
        return _of(call.receiver)
    if call.qual in Z.CONCATS:
        first = call.args[0] if call.args else None
        if first is not None and isinstance(first.node, (cst.List, cst.Tuple)):
            for element in first.node.elements:  # ``torch.cat([x, torch.zeros(...)])``
                built = element.value
                if isinstance(built, cst.Call) and _zeros_factory(built):
                    return _text(call, "rows of zeros joined to it")
        items = first.fact.items if first is not None and first.fact.kind is Kind.SEQ else None
        found = [f.zeros for f in items or () if f.kind is Kind.TENSOR and f.zeros is not None]
        return next((z for z in found if made(z)), found[0] if found else None)
    if name in Z.PRODUCTS:
        found = [z for z in (_of(call.operand(0, "input")), _of(call.operand(1, "other"))) if z]
        return next((z for z in found if made(z)), found[0] if found else None)
    if name in Z.MATMULS:
        if call.qual == "torch.nn.functional.linear" and call.operand(2, "bias") is not None:
            return None
        return _of(call.operand(0, "input"))
    if (call.method in Z.KEEPS) or (call.method is None and call.qual in Z.KEEPS_FUNCTIONS):
        return _of(call.operand(0, "input"))
    return None


def _zeros_factory(node: cst.Call) -> bool:
    """A tensor of zeros built right in a join: no name to write anything else into it
    (one bound to a name is often filled in place first: ``out.index_add_(...)``)."""
    name = dotted(node.func) or ""
    return name.rsplit(".", 1)[-1] in Z.ZEROS


def _layer(call: CallRecord) -> Origin | None:
    """``self.key(x)``: a layer keeps ``x``'s zero rows when built without a bias."""
    module = call.receiver.fact if call.receiver is not None else None
    if module is None or module.kind is not Kind.MODULE or not call.args:
        return None
    if module.layer in Z.ZERO_LAYERS or module.zeros is not None:
        return _of(call.args[0])
    return None


def bias_free(module: Fact, node: cst.Call, kwargs: Mapping[str, Operand]) -> Fact:
    """A layer built with ``bias=False`` (``nn.Linear(d, d, bias=False)``): it maps a zero
    row to a zero row, so its ``zeros`` says where it was built so."""
    bias = kwargs.get("bias")
    if module.layer not in Z.BIASED_LAYERS or bias is None:
        return module
    if not (isinstance(bias.node, cst.Name) and bias.node.value == "False"):
        return module
    return replace(module, zeros=Origin(node, Cause.LITERAL, "built without a bias"))
