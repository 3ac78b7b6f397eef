"""Whether a name is bound on every path that reaches a node.

A fix may read a name only if it holds a value when the edited code runs. Being in scope is
not enough: a name assigned anywhere in a function is local to all of it, so
``identity = torch.eye(n, dtype=key_value.dtype)`` raises UnboundLocalError when
``key_value`` is assigned further down (in a loop, a branch, or the next line), even if a
global of that name exists. This is a compiler's definite-assignment check, kept on the
safe side: what it cannot prove bound (a loop body that may not run, a name bound in one
branch only, a ``try`` body that may stop early, a ``match``) counts as unbound, and the
fix is not offered.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

import libcst as cst

from mpcheck.project.names import children

__all__ = ["bound_on_every_path", "path_to"]

_BUILTINS = frozenset(dir(builtins))
_SUITES = (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda, *_COMPREHENSIONS)


class _Unreachable:
    """What is bound after a suite that never falls through: anything (nothing runs)."""


_NEVER = _Unreachable()
_Bound = frozenset[str] | _Unreachable


def path_to(root: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The nodes from ``root`` down to ``node`` (both included), or None if not below."""
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    path: list[cst.CSTNode] = []
    while stack:
        current, depth = stack.pop()
        del path[depth:]
        path.append(current)
        if current is node:
            return path
        stack += [(child, depth + 1) for child in children(current)]
    return None


def bound_on_every_path(name: str, path: Sequence[cst.CSTNode]) -> bool:
    """Whether ``name`` holds a value whenever the last node of ``path`` (from the module
    down) is evaluated.

    The innermost scope that binds ``name`` decides: ``name`` must be bound before the node
    on every path through that scope (for an enclosing function's name read in a nested
    function, before the nested ``def`` runs). A module-level name read inside a function
    counts as bound (the function runs after the module body), as does a builtin.
    """
    inside_function = False
    end = len(path) - 1  # the node (or the nested definition) evaluated in the owner
    for index in range(len(path) - 2, -1, -1):
        owner, below = path[index], path[index + 1]
        if isinstance(owner, (cst.FunctionDef, cst.Lambda)):
            if below is not owner.body:
                continue  # a decorator, default or annotation: the enclosing scope's
            if name in _param_names(owner.params):
                return True
            local = isinstance(owner, cst.FunctionDef) and name not in _declared_outer(owner)
            if local and isinstance(owner, cst.FunctionDef) and name in _binds_in(owner.body.body):
                return _before(name, path, index, end)
            inside_function, end = True, index
        elif isinstance(owner, cst.ClassDef):
            if below is not owner.body:
                continue
            if not inside_function and name in _binds_in(owner.body.body):
                return _before(name, path, index, end)
            end = index  # a method does not see the class body's names
        elif isinstance(owner, _COMPREHENSIONS):
            if name in _comprehension_targets(owner):
                return True
        elif isinstance(owner, cst.Module):
            if name in _binds_in(owner.body):
                return inside_function or _before(name, path, index, end)
    return name in _BUILTINS


def _before(name: str, path: Sequence[cst.CSTNode], owner: int, end: int) -> bool:
    """Whether the code of ``path[owner]`` binds ``name`` on every path to ``path[end]``."""
    bound: frozenset[str] = frozenset()
    for index in range(owner + 1, end + 1):
        parent, node = path[index - 1], path[index]
        if isinstance(parent, _SUITES):
            for sibling in parent.body:
                if sibling is node:
                    break
                after = _after(sibling, bound)
                if isinstance(after, _Unreachable):
                    return True  # the node cannot be reached this way: nothing to prove
                bound = after
        else:
            bound |= _entering(parent, node, bound)
    return name in bound


def _entering(parent: cst.CSTNode, node: cst.CSTNode, bound: frozenset[str]) -> frozenset[str]:
    """What is bound on entering ``node``, a part of the compound statement ``parent``."""
    if isinstance(parent, cst.For) and node is parent.body:
        return _targets(parent.target)
    if isinstance(parent, cst.With) and node is parent.body:
        return frozenset(n for i in parent.items if i.asname for n in _targets(i.asname.name))
    if isinstance(parent, (cst.ExceptHandler, cst.ExceptStarHandler)) and node is parent.body:
        return _targets(parent.name.name) if parent.name is not None else frozenset()
    if isinstance(parent, (cst.Try, cst.TryStar)) and node is parent.orelse:
        after = _after_all(parent.body.body, bound)
        return frozenset() if isinstance(after, _Unreachable) else after
    return frozenset()


def _after_all(stmts: Iterable[cst.CSTNode], bound: _Bound) -> _Bound:
    for stmt in stmts:
        if isinstance(bound, _Unreachable):
            break
        bound = _after(stmt, bound)
    return bound


def _meet(a: _Bound, b: _Bound) -> _Bound:
    if isinstance(a, _Unreachable):
        return b
    if isinstance(b, _Unreachable):
        return a
    return a & b


def _after(stmt: cst.CSTNode, bound: frozenset[str]) -> _Bound:
    """What is bound once ``stmt`` falls through to the next statement."""
    if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return _after_all(stmt.body, bound)
    if isinstance(stmt, (cst.Return, cst.Raise, cst.Break, cst.Continue)):
        return _NEVER
    if isinstance(stmt, cst.Assign):
        return bound.union(*(_targets(t.target) for t in stmt.targets))
    if isinstance(stmt, (cst.AnnAssign, cst.AugAssign)):
        has_value = not isinstance(stmt, cst.AnnAssign) or stmt.value is not None
        return bound | _targets(stmt.target) if has_value else bound
    if isinstance(stmt, (cst.Import, cst.ImportFrom)):
        return bound | _imported(stmt)
    if isinstance(stmt, cst.Del):
        return bound - _targets(stmt.target)
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return bound | {stmt.name.value}
    if isinstance(stmt, cst.If):
        other = bound if stmt.orelse is None else _after(stmt.orelse, bound)
        return _meet(_after_all(stmt.body.body, bound), other)
    if isinstance(stmt, cst.Else):
        return _after_all(stmt.body.body, bound)
    if isinstance(stmt, cst.With):
        entry = _entering(stmt, stmt.body, bound)
        return _after_all(stmt.body.body, bound | entry)
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        done = _after_all(stmt.body.body, bound)
        if stmt.orelse is not None:
            done = _after_all(stmt.orelse.body.body, done)
        for handler in stmt.handlers:  # (its ``as`` name is deleted when it ends)
            done = _meet(done, _after_all(handler.body.body, bound))
        if stmt.finalbody is not None:
            done = _after_all(
                stmt.finalbody.body.body, bound if isinstance(done, _Unreachable) else done
            )
        return done
    return bound  # loops (may not run), ``match``, expressions: nothing certain


def _targets(node: cst.CSTNode) -> frozenset[str]:
    """The plain names an assignment target binds (``a``, ``a, (b, *c)``)."""
    if isinstance(node, cst.Name):
        return frozenset((node.value,))
    if isinstance(node, (cst.Tuple, cst.List)):
        return frozenset().union(*(_targets(e.value) for e in node.elements))
    if isinstance(node, cst.StarredElement):
        return _targets(node.value)
    return frozenset()


def _imported(stmt: cst.Import | cst.ImportFrom) -> frozenset[str]:
    if isinstance(stmt.names, cst.ImportStar):
        return frozenset()
    out: set[str] = set()
    for alias in stmt.names:
        if alias.asname is not None:
            out |= _targets(alias.asname.name)
        else:
            head: cst.BaseExpression = alias.name
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name):
                out.add(head.value)
    return frozenset(out)


def _param_names(params: cst.Parameters) -> frozenset[str]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return frozenset(p.name.value for p in every)


def _comprehension_targets(comp: cst.BaseComp | cst.DictComp) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    loop: cst.CompFor | None = comp.for_in
    while loop is not None:
        out |= _targets(loop.target)
        loop = loop.inner_for_in
    return out


def _declared_outer(func: cst.FunctionDef) -> frozenset[str]:
    """The names a function declares ``global`` or ``nonlocal``."""
    out: set[str] = set()
    stack: list[cst.CSTNode] = list(func.body.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            out.update(n.name.value for n in node.names)
        elif not isinstance(node, _NESTED):
            stack += children(node)
    return frozenset(out)


def _binds_in(stmts: Sequence[cst.CSTNode]) -> frozenset[str]:
    """Every name the code binds in its own scope (not in nested functions or classes,
    whose own names it binds; a walrus in a comprehension binds here too)."""
    out: set[str] = set()
    stack: list[cst.CSTNode] = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            out.add(node.name.value)
            stack += node.decorators
            continue
        if isinstance(node, cst.Lambda):
            continue
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)):
            out |= _targets(node.target)
        elif isinstance(node, cst.AsName):
            out |= _targets(node.name)
        elif isinstance(node, cst.NamedExpr):
            out |= _targets(node.target)
        elif isinstance(node, cst.Del):
            out |= _del_targets(node.target)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            out |= _imported(node)
        elif isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
            out.add(node.name.value)
        elif isinstance(node, cst.MatchMapping) and node.rest is not None:
            out.add(node.rest.value)
        if isinstance(node, _COMPREHENSIONS):
            stack += _comprehension_walrus_parts(node)
            continue
        stack += children(node)
    return frozenset(out)


def _del_targets(node: cst.CSTNode) -> frozenset[str]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return frozenset().union(*(_del_targets(e.value) for e in node.elements))
    return _targets(node)


def _comprehension_walrus_parts(comp: cst.CSTNode) -> list[cst.CSTNode]:
    """The parts of a comprehension whose walrus binds in the enclosing scope (all but its
    targets, which are its own)."""
    out: list[cst.CSTNode] = []
    stack = [comp]
    while stack:
        node = stack.pop()
        for child in children(node):
            if isinstance(child, cst.NamedExpr):
                out.append(child)
            elif not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                stack.append(child)
    return out
