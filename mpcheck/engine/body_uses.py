"""One walk of a function's body for the three questions the walk asks of a function's code:
which names it uses as tensors (:mod:`tensor_use`), which local names it binds only to
functions (:mod:`aliases`), and which locals it binds only to ``False`` or ``None`` (the
false locals :mod:`reachability`'s ``if name:`` tests read).

Each was a walk of its own over every node of the body (a tenth of a cold run's walking);
every answer depends on the function's code alone, so one walk gives them all. The walk visits
the function's own scope first, in the order the alias walk did (the order of an alias's
choices), then the nested functions, classes and lambdas, whose tensor uses count too but
whose bindings are theirs (but count for the false locals: a nested ``nonlocal`` rebinds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import libcst as cst

from mpcheck.engine.reachability import target_names
from mpcheck.project.names import children

__all__ = ["BodyUses", "body_uses"]

# Node classes looked up by identity (libcst's node classes are ABCs, whose ``isinstance``
# was most of these walks' cost; none of these has a subclass, ``tests/test_aliases.py``
# checks)
OWN_SCOPE: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
TARGETED: frozenset[type[cst.CSTNode]] = frozenset(
    {cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For}
)
# What binds a name, for the false locals (every node under the body, nested scopes too).
_BINDS: frozenset[type[cst.CSTNode]] = frozenset(
    {
        cst.Assign,
        cst.AnnAssign,
        cst.AugAssign,
        cst.For,
        cst.NamedExpr,
        cst.AsName,
        cst.Global,
        cst.Nonlocal,
    }
)
_TENSOR_USES: frozenset[type[cst.CSTNode]] = frozenset(
    {cst.Attribute, cst.Subscript, cst.BinaryOperation}
)
# What a Python int or float answers too: using them proves nothing.
NUMBER_ATTRIBUTES = frozenset(
    {"real", "imag", "conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length"}
)


@dataclass(frozen=True, slots=True)
class BodyUses:
    """``tensors``: every name the body uses as a tensor (indexed, an attribute read or
    method called, multiplied with ``@``); ``aliases``: the local names bound only to
    function names, with those names (see :func:`mpcheck.engine.aliases.function_aliases`);
    ``false_locals``: the locals (no parameter) every binding of which in the body is the
    literal ``False`` or ``None``: ``train_te = False`` then ``if train_te:`` never runs
    its body."""

    tensors: frozenset[str]
    aliases: dict[str, tuple[cst.Name, ...]]
    false_locals: frozenset[str]


def body_uses(function: cst.FunctionDef) -> BodyUses:
    """Both answers for ``function``, from one walk of its body."""
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    found: dict[str, list[cst.Name]] = {}
    spoiled = {p.name.value for p in every}
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            spoiled.add(extra.name.value)
    tensors: set[str] = set()
    falsy: set[str] = set()  # (bound to ``False`` or ``None`` somewhere)
    other: set[str] = set()  # (bound to something else somewhere)
    nested: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        kind = type(node)  # (each class below has no subclass: identity is isinstance)
        if kind in _BINDS:
            _bind(node, kind, falsy, other)
        if kind in OWN_SCOPE:
            nested.append(node)  # (its bindings are its own; its tensor uses count)
            continue
        if kind in _TENSOR_USES:
            _tensor_use(node, kind, tensors)
        elif kind is cst.Assign:
            assign = cast(cst.Assign, node)
            targets = [t.target for t in assign.targets]
            choices = _choices(assign.value)
            if len(targets) == 1 and isinstance(targets[0], cst.Name) and choices:
                found.setdefault(targets[0].value, []).extend(choices)
            else:
                for target in targets:
                    spoiled.update(_names(target))
        elif kind in TARGETED:
            bound = cast(cst.AugAssign | cst.AnnAssign | cst.NamedExpr | cst.For, node).target
            spoiled.update(_names(bound))
        elif kind is cst.With:
            for item in cast(cst.With, node).items:
                if item.asname is not None:
                    spoiled.update(_names(item.asname.name))
        stack.extend(children(node))
    while nested:  # (nested scopes: tensor uses only)
        node = nested.pop()
        kind = type(node)
        if kind in _BINDS:
            _bind(node, kind, falsy, other)
        if kind in _TENSOR_USES:
            _tensor_use(node, kind, tensors)
        nested.extend(children(node))
    aliases = {name: tuple(names) for name, names in found.items() if name not in spoiled}
    named = {p.name.value for p in (*params.params, *params.kwonly_params)}
    return BodyUses(frozenset(tensors), aliases, frozenset(falsy - other - named))


def _bind(node: cst.CSTNode, kind: type[cst.CSTNode], falsy: set[str], other: set[str]) -> None:
    """The names ``node`` binds, into ``falsy`` when it binds them to ``False`` or ``None``,
    else into ``other``."""
    value: cst.BaseExpression | None = None
    if kind is cst.Assign:
        assign = cast(cst.Assign, node)
        names = [n for t in assign.targets for n in target_names(t.target)]
        value = assign.value
    elif kind is cst.AnnAssign:
        annotated = cast(cst.AnnAssign, node)
        names, value = target_names(annotated.target), annotated.value
    elif kind is cst.AsName:
        name = cast(cst.AsName, node).name
        names = target_names(name) if isinstance(name, cst.BaseExpression) else []
    elif kind is cst.Global or kind is cst.Nonlocal:
        names = [n.name.value for n in cast(cst.Global | cst.Nonlocal, node).names]
    else:  # (``+=``, a loop target, ``:=``)
        names = target_names(cast(cst.AugAssign | cst.For | cst.NamedExpr, node).target)
    plain = isinstance(value, cst.Name) and value.value in ("False", "None")
    (falsy if plain else other).update(names)


def _tensor_use(node: cst.CSTNode, kind: type[cst.CSTNode], into: set[str]) -> None:
    """The names ``node`` uses as tensors, into ``into``."""
    if kind is cst.Attribute:
        attribute = cast(cst.Attribute, node)
        if attribute.attr.value not in NUMBER_ATTRIBUTES:
            _add_name(into, attribute.value)  # ``x.view(...)``, ``x.shape``
    elif kind is cst.Subscript:
        _add_name(into, cast(cst.Subscript, node).value)  # ``x[:, None]``
    else:
        binary = cast(cst.BinaryOperation, node)
        if type(binary.operator) is cst.MatrixMultiply:  # ``q @ k``
            _add_name(into, binary.left)
            _add_name(into, binary.right)


def _add_name(into: set[str], node: cst.BaseExpression) -> None:
    if type(node) is cst.Name:
        into.add(node.value)


def _choices(value: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(value, cst.Name):
        return [value]
    if isinstance(value, cst.IfExp):
        body, orelse = _choices(value.body), _choices(value.orelse)
        return [*body, *orelse] if body and orelse else []
    return []


def _names(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _names(e.value)}
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return set()
