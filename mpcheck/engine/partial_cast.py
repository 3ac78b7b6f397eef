"""A partial half conversion: a module's method that casts some of its parts, not itself.

``self.input_blocks.apply(convert_module_to_f16)`` (or ``self.encoder.half()``) casts that
part only: ``nn.Module.apply`` hands ``fn`` the part and its children, never the module
holding it. A class whose own method converts named parts so (guided-diffusion's
``convert_to_fp16``), and that nothing casts whole, runs in half through that method: its
other parts (``time_embed``, ``out``) stay float32, so float32 values fed to them are right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import cast

import libcst as cst

from mpcheck.project.names import children, dotted

__all__ = ["casts_to_half", "converted_parts"]

HALF_METHODS = frozenset({"half", "bfloat16"})
HALF_DTYPES = frozenset({"float16", "half", "bfloat16"})


def casts_to_half(fn: cst.FunctionDef) -> bool:
    """``fn`` casts its first parameter (a module, or its weights) to half in place:
    ``l.half()``, ``l.to(torch.float16)``, ``l.weight.data = l.weight.data.half()``."""
    params = (*fn.params.posonly_params, *fn.params.params)
    if not params:
        return False
    first = params[0].name.value
    for stmt in _statements(fn.body):
        cast = _half_cast(stmt.value) if isinstance(stmt, cst.Expr) else None
        if cast is not None and _root(cast) == first:
            return True
        if isinstance(stmt, cst.Assign) and _half_cast(stmt.value) is not None:
            for target in stmt.targets:
                key = dotted(target.target)
                if key is not None and key.endswith(".data") and key.split(".")[0] == first:
                    return True
    return False


def converted_parts(
    methods: Mapping[str, cst.FunctionDef], halves: Callable[[cst.BaseExpression], bool]
) -> tuple[str, tuple[str, ...]] | None:
    """The first method (not ``__init__``) that casts some of ``self``'s parts to half, with
    those parts' names, when no method casts ``self`` whole; ``halves``: whether a function
    handed to ``.apply`` casts its argument to half."""
    found: tuple[str, tuple[str, ...]] | None = None
    for name, fn in methods.items():
        if name == "__init__":
            continue
        parts: list[str] = []
        for stmt in _statements(fn.body):
            if not isinstance(stmt, cst.Expr):
                continue
            target = _half_cast(stmt.value) or _applied(stmt.value, halves)
            key = dotted(target) if target is not None else None
            if key == "self":
                return None  # a way to half of the whole module
            if key is not None and key.startswith("self.") and key.count(".") == 1:
                parts.append(key[len("self.") :])
        if parts and found is None:
            found = name, tuple(dict.fromkeys(parts))
    return found


def _applied(
    expr: cst.BaseExpression, halves: Callable[[cst.BaseExpression], bool]
) -> cst.BaseExpression | None:
    """``x`` of ``x.apply(fn)`` when ``fn`` casts its argument to half."""
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "apply"
        and len(expr.args) == 1
        and expr.args[0].keyword is None
        and halves(expr.args[0].value)
    ):
        return expr.func.value
    return None


def _half_cast(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``x.half()``, ``x.bfloat16()``, ``x.to(torch.float16)``, ``x.type(...)``."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return None
    method = expr.func.attr.value
    if method in HALF_METHODS and not expr.args:
        return expr.func.value
    if method in ("to", "type") and any(_half_dtype(a.value) for a in expr.args):
        return expr.func.value
    return None


def _half_dtype(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value in HALF_DTYPES


def _root(expr: cst.BaseExpression) -> str | None:
    key = dotted(expr)
    return key.split(".")[0] if key is not None else None


def _statements(body: cst.BaseSuite) -> Iterator[cst.BaseSmallStatement | cst.BaseStatement]:
    """The simple statements of ``body``, in its blocks too (not in nested functions), in
    source order. Only statements hold statements: an expression (a test, a ``with`` item, a
    loop's target) is not entered, and a node's code fields are read directly (libcst's
    ``children`` runs a visitor over every node, expressions included: most of this walk's
    cost, asked once per class of every file)."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            yield from cast(cst.SimpleStatementLine | cst.SimpleStatementSuite, node).body
        elif kind is cst.IndentedBlock:
            stack.extend(reversed(cast(cst.IndentedBlock, node).body))
        elif kind is cst.FunctionDef or kind is cst.ClassDef or isinstance(node, _NO_STATEMENTS):
            continue
        else:  # (a compound statement's fields are in source order: body, orelse, ...)
            stack.extend(reversed(children(node)))


# What holds no statement: an expression, or the parts of a compound statement's header.
_NO_STATEMENTS = (cst.BaseExpression, cst.WithItem, cst.Decorator, cst.AsName, cst.MatchPattern)
