"""A model's children replaced by parts built in their class's fixed half-precision default.

Loaders that rebuild a model's layers in place (meta-device checkpoint loading, layer
injection, quantisation) replace each child: ``setattr(module, name, new)``. When one branch
builds its replacement from a class whose ``__init__`` defaults ``dtype=torch.half`` (and
builds its weights with it) without passing ``dtype``, that part is float16 whatever the
model is, while the routine's other replacements of the same child are built in the dtype
they read from the model (``Norm(d, dtype=child.weight.dtype)``): in a bfloat16 or float32
model, one part is float16 and the first layer reached with the model's activations refuses
them (MPC104's family: parts of one model in different dtypes).

A fixed default alone says nothing (code written for float16 models builds float16 parts on
purpose); the sibling reading the child's dtype is the routine's own word that the model's
dtype varies. A cast of the new part or of the parent in the routine, or of the model in a
caller of this file, keeps it quiet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from mpcheck.engine.facts import Kind, Prec
from mpcheck.engine.sites import Operand, Replacement
from mpcheck.project.names import children, dotted

__all__ = ["replacement"]

CASTS = frozenset({"to", "half", "float", "bfloat16", "double", "type", "to_empty"})
Built = Callable[[cst.Call, str | None], Operand | None]  # a class's default dtype, if taken


def replacement(
    node: cst.Call,
    args: tuple[Operand, ...],
    fn: cst.FunctionDef | None,
    module: cst.Module,
    default_of: Built,
) -> Replacement | None:
    """``setattr(parent, name, part)`` in ``fn`` whose ``part`` was built in its class's fixed
    half-precision default while the same child is rebuilt elsewhere in ``fn`` with a dtype
    read at run time; None for anything else."""
    if fn is None or len(args) != 3 or len(node.args) != 3 or any(a.star for a in node.args):
        return None
    part = args[2]
    fact = part.fact
    built = fact.origin.node if fact.origin is not None else None
    if fact.kind is not Kind.MODULE or fact.prec is not Prec.HALF or fact.maybe:
        return None
    if not isinstance(built, cst.Call):
        return None
    default = default_of(built, fact.layer)
    if default is None or default.fact.prec is not Prec.HALF:
        return None  # built with an explicit ``dtype=``: chosen there, not defaulted
    code = module.code_for_node
    slot = (code(node.args[0].value), code(node.args[1].value))
    sibling, ours = None, False
    for setter, value in _setattrs(fn):
        if (code(setter.args[0].value), code(setter.args[1].value)) != slot:
            continue
        if setter is node:
            ours = value is built
        elif sibling is None and value is not None and _reads_dtype(value) is not None:
            sibling = value
    if sibling is None or not ours:
        return None
    cast = {slot[0], code(node.args[2].value)}
    if _casts(fn, cast.__contains__, code) or _cast_by_callers(fn, module, code):
        return None
    read = _reads_dtype(sibling)
    assert read is not None
    return Replacement(part, built, sibling, read)


def _setattrs(fn: cst.FunctionDef) -> Iterator[tuple[cst.Call, cst.Call | None]]:
    """Each ``setattr(a, b, value)`` in ``fn`` with the call that built ``value``: the value
    itself, or the call last assigned to its name before it (in source order)."""
    last: dict[str, cst.Call] = {}
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Assign):  # (a name bound to anything else is no part)
            for target in node.targets:
                if isinstance(target.target, cst.Name) and isinstance(node.value, cst.Call):
                    last[target.target.value] = node.value
                elif isinstance(target.target, cst.Name):
                    last.pop(target.target.value, None)
        if isinstance(node, cst.Call) and dotted(node.func) == "setattr" and len(node.args) == 3:
            value = node.args[2].value
            if isinstance(value, cst.Call):
                yield node, value
            elif isinstance(value, cst.Name):
                yield node, last.get(value.value)
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef)) or node is fn:
            stack.extend(reversed(children(node)))


def _reads_dtype(call: cst.Call) -> cst.BaseExpression | None:
    """``dtype=child.weight.dtype``: the dtype a constructor is given read from a value."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            value = arg.value
            if isinstance(value, cst.Attribute) and value.attr.value == "dtype":
                return value
    return None


def _casts(
    root: cst.CSTNode, cast: Callable[[str], bool], code: Callable[[cst.CSTNode], str]
) -> bool:
    """A cast method (``x.to(...)``, ``x.half()``) called somewhere in ``root`` on a
    receiver ``cast`` accepts."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value in CASTS and cast(code(node.func.value)):
                return True
        stack.extend(children(node))
    return False


def _cast_by_callers(
    fn: cst.FunctionDef, module: cst.Module, code: Callable[[cst.CSTNode], str]
) -> bool:
    """``load(model); model.half()``: a function of this file calls ``fn`` with a model that
    it casts as a whole (before or after: either way the parts end in one dtype or none)."""
    name = fn.name.value
    for caller in _functions(module):
        given = {
            code(node.args[0].value)
            for node in _calls(caller)
            if dotted(node.func) == name and node.args and not node.args[0].star
        }
        if given and _casts(caller, given.__contains__, code):
            return True
    return False


def _functions(module: cst.Module) -> Iterator[cst.FunctionDef]:
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.FunctionDef):
            yield node
        stack.extend(children(node))


def _calls(root: cst.CSTNode) -> Iterator[cst.Call]:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            yield node
        stack.extend(children(node))
