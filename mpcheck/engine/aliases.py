"""Functions called through a local name: ``attn_fn = a if cfg.split else b; attn_fn(x, w)``.

Python binds the name to the function object, so the call is a call of that function; when a
conditional chooses between functions, it is a call of one of them on each path, and what it
returns is the join of what each returns. Only a name every binding in the function binds to
a plain function name (or a conditional between such names) is followed: a name bound any
other way, or a parameter, may be any callable.
"""

from __future__ import annotations

import libcst as cst

from mpcheck.project.names import children


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
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
            choices = _choices(node.value)
            if len(targets) == 1 and isinstance(targets[0], cst.Name) and choices:
                found.setdefault(targets[0].value, []).extend(choices)
            else:
                for target in targets:
                    spoiled.update(_names(target))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For)):
            spoiled.update(_names(node.target))
        elif isinstance(node, cst.With):
            for item in node.items:
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
