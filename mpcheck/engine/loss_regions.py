"""Which autocast blocks a loss was computed in, for a plain ``loss.backward()``.

A backward replays the forward's ops in the dtypes they ran in: the gradient flowing through
every op autocast ran in float16 is float16 too, and flushes to zero below 2**-24 unless the
loss was scaled first. What matters is where the forward ran, not where ``backward()`` is
written (``with autocast(...): loss = model(x)``, then ``loss.backward()`` after the block).
The walk's facts do not carry that: a loss from an op on autocast's float32 list is float32
whatever ran before it. So it is read from the function's own bindings: the names the
backward's receiver reads, followed back through the assignments of the function (or of the
module, for a script), reach a name bound inside a block. Flow-insensitive on purpose: a name
bound once in a block and once outside it may be the block's.

Only what the function binds counts: a loss handed in as a parameter, or computed by a helper
whose block the walk entered, is linked when a name of the receiver's chain is bound in the
block; nothing is guessed past the function's own text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from mpcheck.engine.sites import Autocast
from mpcheck.project.names import children, dotted

_MAX_NAMES = 200  # a bound on the names followed back (a long script's chains stay cheap)


def loss_regions(
    receiver: cst.BaseExpression,
    scope: cst.FunctionDef | cst.Module,
    blocks: Sequence[tuple[Autocast, cst.With]],
    inside: Autocast | None,
) -> tuple[Autocast, ...]:
    """The regions of ``blocks`` whose ``with`` body binds a name ``receiver`` is computed
    from, and ``inside`` (the region the backward itself is written in), if enabled."""
    found: list[Autocast] = []
    if inside is not None and inside.active:
        found.append(inside)
    if not blocks:
        return tuple(found)
    body = scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body
    if not isinstance(body, Sequence):
        return tuple(found)
    bindings: dict[str, list[cst.BaseExpression]] = {}
    for stmt in body:
        for target, value in _assignments(stmt):
            bindings.setdefault(target, []).append(value)
    needed = _closure(set(_reads(receiver)), bindings)
    for region, block in blocks:
        if _without_grad(block):
            continue
        bound = {target for stmt in block.body.children for target, _ in _assignments(stmt)}
        if needed & bound and not any(r is region for r in found):
            found.append(region)
    return tuple(found)


def _without_grad(block: cst.With) -> bool:
    """A block that also turns gradients off (``with torch.no_grad(), autocast(...):``): an
    evaluation, whose values no backward runs through."""
    for item in block.items:
        call = item.item
        func = call.func if isinstance(call, cst.Call) else call
        name = dotted(func) or ""
        if name.rpartition(".")[2] in ("no_grad", "inference_mode"):
            return True
    return False


def _closure(names: set[str], bindings: dict[str, list[cst.BaseExpression]]) -> set[str]:
    """``names`` and every name their bindings read, transitively."""
    seen = set(names)
    todo = list(names)
    while todo and len(seen) < _MAX_NAMES:
        for value in bindings.get(todo.pop(), ()):
            for name in _reads(value):
                if name not in seen:
                    seen.add(name)
                    todo.append(name)
    return seen


def _reads(expr: cst.CSTNode) -> Iterator[str]:
    """The names and attribute chains ``expr`` reads (``loss``, ``self.criterion``); the
    bodies of lambdas and comprehensions included."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = dotted(node)
            if name is not None:
                yield name
                if isinstance(node, cst.Attribute):
                    yield name.split(".", 1)[0]
                continue
        stack.extend(children(node))


def _assignments(node: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression]]:
    """``(target, value)`` for each assignment under ``node`` in its own scope (not in a
    nested function or class): each name of a tuple target takes the whole value."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(current, cst.Assign):
            for target in current.targets:
                for name in _targets(target.target):
                    yield name, current.value
        elif isinstance(current, (cst.AugAssign, cst.AnnAssign)) and current.value is not None:
            for name in _targets(current.target):
                yield name, current.value
                if isinstance(current, cst.AugAssign):  # ``loss += aux``: both
                    yield name, current.target
        elif isinstance(current, cst.For):
            for name in _targets(current.target):
                yield name, current.iter
        elif isinstance(current, cst.NamedExpr):
            for name in _targets(current.target):
                yield name, current.value
        stack.extend(children(current))


def _targets(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _targets(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _targets(target.value)
    elif isinstance(target, cst.Subscript):  # ``losses["total"] = ...``: the container
        yield from _targets(target.value)
    else:
        name = dotted(target)
        if name is not None:
            yield name
