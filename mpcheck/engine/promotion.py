"""Torch's promotion rules beyond :func:`mpcheck.engine.facts.promote`: pure functions of facts.

What a matmul-family op computes in, Python arithmetic on known numbers, what iterating
or indexing a value yields, which shape ops give a 0-dim value dimensions, what
``torch.tensor`` makes of a list of numbers, and ``torch.finfo``'s limits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import (
    SCALAR,
    UNKNOWN,
    UNKNOWN_TENSOR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    element,
    seq_of,
    tensor_of_dtype,
)
from mpcheck.engine.sites import Operand
from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import dotted

FINFO_MIN = {"float32": -3.4028234663852886e38, "float64": -1.7976931348623157e308}
FINFO_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
FINFO_MIN.update({"float16": -65504.0, "bfloat16": -3.3895313892515355e38})
FINFO_MAX.update({"float16": 65504.0, "bfloat16": 3.3895313892515355e38})


def iterate(items: Fact) -> Fact:
    """What ``for x in items`` binds ``x`` to."""
    if items.kind is Kind.SEQ:
        return element(items)
    if items.kind in (Kind.TENSOR, Kind.MODULE):
        return replace(items, zero_dim=True) if one_dim_factory(items) else items
    return UNKNOWN


SEQ_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "frozenset"})


def cast_method(method: str, node: cst.CSTNode, prec: Prec = Prec.UNKNOWN) -> Fact:
    """``x.float()``, ``x.half()``, ``x.long()``: the tensor it makes (``prec``: the
    receiver's, to say that ``t.float()`` of integer timesteps converts rather than upcasts)."""
    dt = T.CAST_METHODS[method]
    cause = Cause.UPCAST if dt in ("float32", "float64") else Cause.CAST
    verb = "upcast" if cause is Cause.UPCAST else "cast"
    if prec in (Prec.INT, Prec.BOOL):
        verb = "converted"
    return tensor_of_dtype(dt, node, cause, f"{verb} to {dt} by `.{method}()`")


def builtin(name: str, args: Sequence[Fact]) -> Fact | None:
    """``list(...)``, ``filter(f, ...)``, ``next(iter(...))``, ``enumerate(...)``, ``zip(...)``:
    keep the elements' facts (``for i, block in enumerate(self.blocks)`` binds a module)."""
    if name in SEQ_BUILTINS and len(args) == 1 and args[0].kind is Kind.SEQ:
        return Fact(Kind.SEQ, elem=element(args[0]))
    if name == "filter" and len(args) == 2 and args[1].kind is Kind.SEQ:
        return Fact(Kind.SEQ, elem=element(args[1]))
    if name == "next" and args and args[0].kind is Kind.SEQ:
        return element(args[0])
    if name == "enumerate" and len(args) == 1 and iterate(args[0]) != UNKNOWN:
        return Fact(Kind.SEQ, elem=seq_of((SCALAR, iterate(args[0]))))
    if name == "zip" and args and any(iterate(a) != UNKNOWN for a in args):
        return Fact(Kind.SEQ, elem=seq_of(iterate(a) for a in args))
    return None


def op_result(*facts: Fact) -> Fact:
    """The dtype a matmul-family op computes in: its operands', or the model's when they clash."""
    floats = [f for f in facts if f.floating]
    if not floats:
        return UNKNOWN_TENSOR
    precs = {f.prec for f in floats}
    if len(precs) == 1:
        return floats[0]
    for f in floats:
        if f.prec is Prec.MODEL or f.prec is Prec.HALF:
            return f
    return floats[0]


def fold(op: cst.BaseBinaryOp, a: Fact, b: Fact) -> Fact:
    if a.value is None or b.value is None:
        return SCALAR
    try:
        if isinstance(op, cst.Multiply):
            return replace(SCALAR, value=a.value * b.value)
        if isinstance(op, cst.Add):
            return replace(SCALAR, value=a.value + b.value)
        if isinstance(op, cst.Subtract):
            return replace(SCALAR, value=a.value - b.value)
        if isinstance(op, cst.Divide) and b.value:
            return replace(SCALAR, value=a.value / b.value)
        if isinstance(op, cst.Power) and abs(b.value) < 64:
            return replace(SCALAR, value=math.pow(a.value, b.value))
    except (OverflowError, ValueError):
        pass
    return SCALAR


def one_dim_factory(fact: Fact) -> bool:
    """Made by a factory that returns a 1-D tensor (``torch.linspace``, ``torch.arange``).

    The fact survives reshapes unchanged, so this is a best guess; it only ever makes a
    value 0-dim (which does not promote), so a wrong guess hides a finding, never adds one.
    """
    origin = fact.origin
    if origin is None or origin.cause is not Cause.FACTORY or not isinstance(origin.node, cst.Call):
        return False
    func = origin.node.func
    leaf = func.attr.value if isinstance(func, cst.Attribute) else dotted(func)
    return leaf in ("linspace", "logspace", "arange")


def is_advanced_index(node: cst.CSTNode, fact: Fact) -> bool:
    """Whether indexing with ``node`` is advanced (``index_put_``) rather than basic (a view).

    A list literal, an int/bool tensor (a mask, ``idx``) or a sequence holding one is
    advanced; ints, slices, ``...``, ``None`` and 0-dim tensors are basic. A float-typed
    "tensor" cannot index: it is a parameter guessed to be an activation, so it is a
    Python int here. Unknown objects are not claimed to be advanced.
    """
    if isinstance(node, cst.List):
        return True
    if isinstance(node, cst.Tuple):
        items = fact.items if fact.kind is Kind.SEQ and fact.items is not None else ()
        if len(items) != len(node.elements):
            return False
        return any(
            is_advanced_index(el.value, f) for el, f in zip(node.elements, items, strict=False)
        )
    if fact.kind is Kind.SEQ:
        inner = fact.items if fact.items is not None else (fact.elem,) if fact.elem else ()
        return any(is_advanced_index(cst.Name("_"), f) for f in inner)
    return (
        fact.kind is Kind.TENSOR
        and not fact.zero_dim
        and fact.prec in (Prec.INT, Prec.BOOL, Prec.UNKNOWN)
    )


def dimensioning(method: str, args: Sequence[Operand]) -> bool:
    """``t.flatten()``, ``t.reshape(-1, 1)``: a result with dimensions, even from 0-dim."""
    if method in T.DIMENSIONING_METHODS:
        return True
    if method not in T.RESHAPE_METHODS or not args or args[0].fact.kind is Kind.DTYPE:
        return False  # (``t.view(torch.int32)`` reinterprets, keeping the shape)
    shape = args[0].node
    return len(args) > 1 or not isinstance(shape, (cst.Tuple, cst.List)) or bool(shape.elements)


def tensor_of_numbers(seq: Fact, node: cst.Call, code: str) -> Fact:
    """``torch.tensor(rks)`` of a list the code built: float32 (the default dtype) when it
    holds float32 numbers (a sampler's 0-dim table values), unknown otherwise."""
    held = seq.items if seq.items is not None else (seq.elem,) if seq.elem else ()
    if not any(f.is_tensor and f.prec is Prec.FULL and f.dtype == "float32" for f in held):
        return UNKNOWN_TENSOR
    text = f"made float32 by `{code}` from float32 numbers"
    return Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.FACTORY, text))


def legacy_type(name: str, node: cst.Call) -> Fact:
    """``x.type(torch.HalfTensor)``: a cast by the legacy tensor type's name."""
    short = name.rsplit(".", 1)[-1]
    table = {
        "HalfTensor": "float16",
        "BFloat16Tensor": "bfloat16",
        "FloatTensor": "float32",
        "DoubleTensor": "float64",
        "LongTensor": "int64",
        "IntTensor": "int32",
        "BoolTensor": "bool",
    }
    dt = table.get(short)
    if dt is None:
        return UNKNOWN_TENSOR
    cause = Cause.UPCAST if dt in ("float32", "float64") else Cause.CAST
    return tensor_of_dtype(dt, node, cause, f"cast to {dt} by `.type({name})`")
