"""A fix may only read names that exist where it goes.

A rule builds a fix from facts gathered elsewhere (the write ``scores += bias`` decides the
dtype, but the constant being fixed sits in a helper where no ``scores`` exists), so the
engine checks every replacement before offering it: each name it reads must either be read
by the code it replaces or be bound in the scope of the edit (or an enclosing one, or be a
builtin). Scopes are computed only for files that have a fix to offer, and only over the
part of the file that can bind what the edit reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from mpcheck.output.bound_before import bound_on_every_path, path_to
from mpcheck.project.names import children

if TYPE_CHECKING:
    from libcst.metadata import Scope

__all__ = ["Scopes", "reads", "unbound"]


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
    code: str,
    replaced: cst.CSTNode,
    scope_of: Callable[[cst.CSTNode], Scope | None],
    path_of: Callable[[cst.CSTNode], Sequence[cst.CSTNode] | None] | None = None,
) -> set[str]:
    """Names ``code`` reads that are not bound where it replaces ``replaced``
    (``scope_of`` is asked only when ``code`` reads a name ``replaced`` does not).

    With ``path_of`` (the nodes from the module down to a node), a name in scope must also
    be bound on every path to the edit: a local assigned further down is not."""
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
    out = {name for name in missing if name not in scope}
    path = None if path_of is None or out == missing else path_of(replaced)
    if path is not None:
        out |= {name for name in missing if not bound_on_every_path(name, path)}
    elif path_of is not None:
        out = missing  # not found in the module: nothing can be proven bound
    return out


class Scopes:
    """The scope of a node, computed the first time a fix reads a name the code it replaces
    does not.

    libcst's scopes cost four times a parse on a model file, and a fix needs them in one
    statement. So they are computed over the top-level statement that holds the node and the
    rest of the module's top level with the bodies of its other functions and classes left
    out: what can bind a name there (a name one of those bodies binds only through ``global``
    is not seen, so such a fix is not offered, which is the safe side).
    """

    def __init__(self, module: cst.Module) -> None:
        self._module = module
        self._by_statement: dict[int, Mapping[cst.CSTNode, Scope | None]] = {}

    def of(self, node: cst.CSTNode) -> Scope | None:
        body = self._module.body
        index = _holder(body, node)  # (None: not found below the code nodes; all of it)
        key = -1 if index is None else index
        if key not in self._by_statement:
            from libcst.metadata import MetadataWrapper, ScopeProvider

            part = self._module
            if index is not None:
                kept = [stmt if n == index else _outline(stmt) for n, stmt in enumerate(body)]
                part = part.with_changes(body=kept)
            wrapper = MetadataWrapper(part, unsafe_skip_copy=True)
            self._by_statement[key] = wrapper.resolve(ScopeProvider)
        return self._by_statement[key].get(node)

    def path(self, node: cst.CSTNode) -> list[cst.CSTNode] | None:
        """The nodes from the module down to ``node``, for the bound-on-every-path check."""
        return path_to(self._module, node)


_EMPTY = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Pass()])])


def _outline(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """A top-level function or class as its name binds it, without its body."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return stmt.with_changes(body=_EMPTY)
    return stmt


def _holder(body: Sequence[cst.BaseStatement], node: cst.CSTNode) -> int | None:
    """The index of the top-level statement that holds ``node``."""
    for index, stmt in enumerate(body):
        stack: list[cst.CSTNode] = [stmt]
        while stack:
            found = stack.pop()
            if found is node:
                return index
            stack += children(found)
    return None
