"""Facts that cross a file boundary: a summary's plain values to and from the walk's facts.

The project phase stores what a function returns as a :class:`~mpcheck.project.summary.Value`
(no syntax tree, serialisable); a call in another file turns it back into a fact whose
origin is that call, worded with where the dtype was really decided
(``upcast to float32 by `.float()` in `apply_rope` (layers/rope.py:11)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import libcst as cst

from mpcheck.facts import Cause, Fact, Kind, Origin, Prec, promote
from mpcheck.project.summary import Function, Place, Value
from mpcheck.sites import Operand

__all__ = ["call_result", "value_of"]


def value_of(fact: Fact, place: Callable[[cst.CSTNode], tuple[int, int]], path: str) -> Value:
    """``fact`` (a function's return) as plain data; ``place`` gives a node's line and column."""
    origin = None
    if fact.origin is not None:
        line, column = place(fact.origin.node)
        origin = Place(path, line, column, fact.origin.text)
    items = None
    if fact.kind is Kind.SEQ and fact.items is not None:
        items = tuple(value_of(item, place, path) for item in fact.items)
    return Value(
        kind=fact.kind.value,
        prec=fact.prec.value,
        dtype=fact.dtype,
        cause=fact.cause.value if fact.cause else None,
        origin=origin,
        same_as=tuple(sorted(fact.params)),
        zero_dim=fact.zero_dim,
        maybe=fact.maybe,
        layer=fact.layer,
        items=items,
    )


def call_result(
    node: cst.Call,
    name: str,
    function: Function,
    args: tuple[Operand, ...],
    kwargs: Mapping[str, Operand],
) -> Fact:
    """What calling ``function`` (imported as ``name``) with these arguments returns."""

    def argument(index: int) -> Fact | None:
        if index < len(args):
            return args[index].fact
        if index < len(function.params) and function.params[index] in kwargs:
            return kwargs[function.params[index]].fact
        return None

    def convert(value: Value) -> Fact:
        kind = Kind(value.kind)
        if kind is Kind.SEQ:
            items = None if value.items is None else tuple(convert(v) for v in value.items)
            return Fact(Kind.SEQ, items=items)
        if value.same_as and Prec(value.prec) in (Prec.MODEL, Prec.UNKNOWN):
            actual = [f for f in map(argument, value.same_as) if f is not None]
            if actual:
                return promote(actual, node) if kind is Kind.TENSOR else actual[0]
            return Fact(kind)
        origin = None
        if value.origin is not None:
            where = f"{value.origin.path}:{value.origin.line}"
            text = f"{value.origin.text} in `{name}` ({where})"
            origin = Origin(node, Cause(value.cause) if value.cause else Cause.LITERAL, text)
        return Fact(
            kind,
            Prec(value.prec),
            value.dtype,
            origin,
            zero_dim=value.zero_dim,
            maybe=value.maybe,
            layer=value.layer,
        )

    return convert(function.returns)
