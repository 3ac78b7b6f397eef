"""Functions called through a local name: ``attn_fn = a if cfg.split else b; attn_fn(x, w)``.

Python binds the name to the function object, so the call is a call of that function; when a
conditional chooses between functions, it is a call of one of them on each path, and what it
returns is the join of what each returns. Only a name every binding in the function binds to
a plain function name (or a conditional between such names) is followed: a name bound any
other way, or a parameter, may be any callable.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from mpcheck.project.names import children

# Node classes looked up by identity (libcst's node classes are ABCs, whose isinstance was
# most of this walk's cost; none of these has a subclass, ``tests/test_aliases.py`` checks)
_OWN_SCOPE: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
_TARGETED: frozenset[type[cst.CSTNode]] = frozenset(
    {cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For}
)


def function_aliases(function: cst.FunctionDef) -> dict[str, tuple[cst.Name, ...]]:
    """The local names of ``function`` bound only to function names, and those names
    (assignments in nested functions and classes are theirs). One walk of the body."""
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    found: dict[str, list[cst.Name]] = {}
    spoiled = {p.name.value for p in every}
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            spoiled.add(extra.name.value)
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        kind = type(node)  # (each class below has no subclass: identity is isinstance)
        if kind in _OWN_SCOPE:
            continue
        if kind is cst.Assign:
            node = cast(cst.Assign, node)
            targets = [t.target for t in node.targets]
            choices = _choices(node.value)
            if len(targets) == 1 and isinstance(targets[0], cst.Name) and choices:
                found.setdefault(targets[0].value, []).extend(choices)
            else:
                for target in targets:
                    spoiled.update(_names(target))
        elif kind in _TARGETED:
            bound = cast(cst.AugAssign | cst.AnnAssign | cst.NamedExpr | cst.For, node).target
            spoiled.update(_names(bound))
        elif kind is cst.With:
            for item in cast(cst.With, node).items:
                if item.asname is not None:
                    spoiled.update(_names(item.asname.name))
        stack.extend(children(node))
    return {name: tuple(names) for name, names in found.items() if name not in spoiled}


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
