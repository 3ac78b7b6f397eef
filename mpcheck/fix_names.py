"""A fix may only read names that exist where it goes.

A rule builds a fix from facts gathered elsewhere (the write ``scores += bias`` decides the
dtype, but the constant being fixed sits in a helper where no ``scores`` exists), so the
engine checks every replacement before offering it: each name it reads must either be read
by the code it replaces or be bound in the scope of the edit (or an enclosing one, or be a
builtin). Scopes are computed only for files that have a fix to offer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
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


def _parse(code: str) -> cst.CSTNode | None:
    """``code`` as an expression, as call arguments (``dtype=x``: an edit may replace
    arguments), or as a statement, whichever it is."""
    try:
        return cst.parse_expression(code)
    except cst.ParserSyntaxError:
        pass
    try:
        call = cst.parse_expression(f"_({code})")
        assert isinstance(call, cst.Call)
        return cst.Tuple([cst.Element(arg.value) for arg in call.args])
    except cst.ParserSyntaxError:
        pass
    try:
        return cst.parse_statement(code)
    except cst.ParserSyntaxError:
        return None


def unbound(
    code: str, replaced: cst.CSTNode, scope_of: Callable[[cst.CSTNode], Scope | None]
) -> set[str]:
    """Names ``code`` reads that are not visible where it replaces ``replaced``
    (``scope_of`` is asked only when ``code`` reads a name ``replaced`` does not)."""
    new = _parse(code)
    if new is None:
        return set()  # a fragment we cannot read: nothing to judge
    missing = reads(new) - reads(replaced)
    if not missing:
        return missing
    scope = scope_of(replaced)
    if isinstance(replaced, cst.Name) and isinstance(new, cst.Name):
        # ``F.binary_cross_entropy`` -> ``..._with_logits``: renaming an attribute (or a
        # keyword) reads nothing; only a renamed variable reference must be bound.
        if scope is None or not any(a.node is replaced for a in scope.accesses[replaced.value]):
            return set()
    if scope is None:
        return missing
    return {name for name in missing if name not in scope}
