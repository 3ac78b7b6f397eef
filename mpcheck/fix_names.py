"""A fix may only read names that exist where it goes.

A rule builds a fix from facts gathered elsewhere (the write ``scores += bias`` decides the
dtype, but the constant being fixed sits in a helper where no ``scores`` exists), so the
engine checks every replacement before offering it: each name it reads must either be read
by the code it replaces or be bound in the scope of the edit (or an enclosing one, or be a
builtin). Scopes are computed only for files that have a fix to offer.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import Scope

__all__ = ["reads", "unbound"]


class _Reads(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``x.dtype`` reads ``x``, not ``dtype``
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # ``f(dtype=x)`` reads ``x``, not ``dtype``
        return False


def reads(node: cst.CSTNode) -> set[str]:
    """The plain names ``node`` reads."""
    visitor = _Reads()
    node.visit(visitor)
    return visitor.names


def unbound(
    code: str, replaced: cst.CSTNode, scopes: Mapping[cst.CSTNode, Scope | None]
) -> set[str]:
    """Names ``code`` reads that are not visible where it replaces ``replaced``."""
    try:
        new: cst.CSTNode = cst.parse_expression(code)
    except cst.ParserSyntaxError:
        try:
            new = cst.parse_statement(code)
        except cst.ParserSyntaxError:
            return set()  # a fragment (a decorator, an argument): nothing to judge
    scope = scopes.get(replaced)
    missing = reads(new) - reads(replaced)
    if scope is None:
        return missing
    return {name for name in missing if name not in scope}
