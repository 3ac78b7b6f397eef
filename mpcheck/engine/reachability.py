"""Branches that cannot run: their code gives no finding.

``if False:``, ``if 0:`` and ``if TYPE_CHECKING:`` (false when the program runs) guard code
that never executes, and so does a test comparing a builtin with a literal, as in ``elif
type == "laplacian":`` where ``type`` is the builtin class (a parameter meant to shadow it
was never declared): a class is never equal to a string or a number. What such a branch
would compute is not a hazard of the program, so the walk skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import libcst as cst

# Builtins that are functions or classes: never equal to a string or number literal.
_BUILTIN_CALLABLES = frozenset(
    """
    type id len str int float bool list dict set tuple max min sum abs input print open
    range map filter zip sorted reversed any all iter next format hash callable isinstance
    """.split()
)


def never_taken(test: cst.BaseExpression, bound: Callable[[], Collection[str]]) -> bool:
    """Whether ``test`` is false whenever the program runs; ``bound()`` gives the names the
    file binds itself (a parameter or assignment named ``type`` is no builtin), asked only
    when a builtin is compared (a pass over the file)."""
    if isinstance(test, cst.Name):
        return test.value in ("False", "None", "TYPE_CHECKING")
    if isinstance(test, cst.Attribute):
        return test.attr.value == "TYPE_CHECKING" and isinstance(test.value, cst.Name)
    if isinstance(test, (cst.Integer, cst.Float)):
        return test.evaluated_value == 0
    if isinstance(test, cst.SimpleString):
        return test.evaluated_value == ""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return never_taken(test.left, bound) or never_taken(test.right, bound)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if not isinstance(target.operator, cst.Equal):
            return False
        sides = (test.left, target.comparator)
        return any(_literal(b) and _builtin(a, bound) for a, b in (sides, sides[::-1]))
    return False


def bound_false(fn: cst.FunctionDef, name: str) -> bool:
    """Whether every binding of ``name`` in ``fn`` (a local, no parameter) is the literal
    ``False`` or ``None``: ``train_te = False`` then ``if train_te:`` never runs its body."""
    if any(p.name.value == name for p in (*fn.params.params, *fn.params.kwonly_params)):
        return False
    values: list[cst.BaseExpression | None] = []

    class _Bindings(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(name in _names(t.target) for t in node.targets):
                values.append(node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if name in _names(node.target):
                values.append(node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if name in _names(node.target):
                values.append(None)

        def visit_For(self, node: cst.For) -> None:
            if name in _names(node.target):
                values.append(None)

        def visit_AsName(self, node: cst.AsName) -> None:
            if isinstance(node.name, cst.BaseExpression) and name in _names(node.name):
                values.append(None)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            if name in _names(node.target):
                values.append(None)

        def visit_Global(self, node: cst.Global) -> None:
            if any(n.name.value == name for n in node.names):
                values.append(None)

        def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
            if any(n.name.value == name for n in node.names):
                values.append(None)

    fn.body.visit(_Bindings())
    return bool(values) and all(
        isinstance(v, cst.Name) and v.value in ("False", "None") for v in values
    )


def bound_names(module: cst.Module) -> frozenset[str]:
    """Every name the file binds: parameters, assignment and loop targets, imports, defs."""
    found: set[str] = set()

    class _Binder(cst.CSTVisitor):
        def visit_Param(self, node: cst.Param) -> None:
            found.add(node.name.value)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            found.update(_names(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            found.update(_names(node.target))

        def visit_For(self, node: cst.For) -> None:
            found.update(_names(node.target))

        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            name = node.asname.name if node.asname else node.name
            found.update(_names(name) if isinstance(name, cst.Name) else ())

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.add(node.name.value)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            found.add(node.name.value)

    module.visit(_Binder())
    return frozenset(found)


def _names(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _names(e.value)]
    return []


def _builtin(node: cst.BaseExpression, bound: Callable[[], Collection[str]]) -> bool:
    return (
        isinstance(node, cst.Name)
        and node.value in _BUILTIN_CALLABLES
        and node.value not in bound()
    )


def _literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString))
