"""Branches that cannot run: their code gives no finding.

``if False:``, ``if 0:`` and ``if TYPE_CHECKING:`` (false when the program runs) guard code
that never executes, and so does a test comparing a builtin with a literal, as in ``elif
type == "laplacian":`` where ``type`` is the builtin class (a parameter meant to shadow it
was never declared): a class is never equal to a string or a number. What such a branch
would compute is not a hazard of the program, so the walk skips it.

A branch under ``torch.onnx.is_in_onnx_export()``, ``torch.jit.is_tracing()`` or
``torch.jit.is_scripting()`` runs only while torch exports the model (traces it for ONNX or
TorchScript, or compiles it to TorchScript): in every eager run those are false, and a half
cast or a half load is evidence about the eager runs only, never about the inputs an exporter
is handed. Such a branch gives no finding (:func:`export_only`), and the ``else`` of
``if not torch.jit.is_scripting():`` is one; so is that side of a conditional expression.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import libcst as cst

from mpcheck.project.names import descendants

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


# Predicates true only while torch exports or compiles the model to TorchScript or ONNX
# (``torch._C._get_tracing_state()`` is None outside a trace).
_EXPORTING = frozenset(
    {
        "torch.onnx.is_in_onnx_export",
        "torch.onnx.utils.is_in_onnx_export",
        "torch.jit.is_tracing",
        "torch.jit.is_scripting",
        "torch._C._get_tracing_state",
        "torchvision._is_tracing",
    }
)


def export_only(
    test: cst.BaseExpression, resolve: Callable[[cst.BaseExpression], str | None]
) -> bool:
    """Whether ``test`` holds only while torch exports the model (see the module docstring):
    a call of an exporting predicate, alone, joined by ``and`` or by ``or`` with another.
    ``resolve``: the qualified name an expression stands for through the file's imports."""
    if isinstance(test, cst.Call) and not test.args:
        return resolve(test.func) in _EXPORTING
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return export_only(test.left, resolve) or export_only(test.right, resolve)
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return export_only(test.left, resolve) and export_only(test.right, resolve)
    return False


def eager_only(
    test: cst.BaseExpression, resolve: Callable[[cst.BaseExpression], str | None]
) -> bool:
    """Whether ``test`` is ``not`` an :func:`export_only` test: true in every eager run."""
    return (
        isinstance(test, cst.UnaryOperation)
        and isinstance(test.operator, cst.Not)
        and export_only(test.expression, resolve)
    )


def bound_names(module: cst.Module) -> frozenset[str]:
    """Every name the file binds: parameters, assignment and loop targets, imports, defs.
    (One walk of the code nodes: libcst's visitor also visits every token and rebuilds
    each node, several times the cost on a large file.)"""
    found: set[str] = set()
    for node in descendants(module):
        if type(node) is cst.Param:
            found.add(node.name.value)
        elif type(node) is cst.AssignTarget:
            found.update(target_names(node.target))
        elif type(node) is cst.AnnAssign or type(node) is cst.For:
            found.update(target_names(node.target))
        elif type(node) is cst.ImportAlias:
            name = node.asname.name if node.asname else node.name
            found.update(target_names(name) if isinstance(name, cst.Name) else ())
        elif type(node) is cst.FunctionDef or type(node) is cst.ClassDef:
            found.add(node.name.value)
    return frozenset(found)


def target_names(node: cst.BaseExpression) -> list[str]:
    """The names a binding target binds: a name, or those of a tuple or list of them."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in target_names(e.value)]
    return []


def _builtin(node: cst.BaseExpression, bound: Callable[[], Collection[str]]) -> bool:
    return (
        isinstance(node, cst.Name)
        and node.value in _BUILTIN_CALLABLES
        and node.value not in bound()
    )


def _literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString))
