"""What ``from module import *`` brings: a module's public names, read from its source.

A star import binds the names of ``__all__`` when the module spells it as a literal list or
tuple of strings, else every module-level name that does not start with ``_``, the names the
module itself imports among them (``import torch`` in ``utils.py`` gives ``torch`` to a
``from utils import *``). A summary keeps both sets and the modules the file star-imports in
turn, so the store can answer a star import (and a name brought by one) without the source.
Module level means outside any ``def`` or ``class``, inside ``if``/``try``/``with``/loops too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst

from mpcheck.project.names import TYPE_CHECKING_TESTS, dotted

__all__ = ["Exported", "exported", "exported_of_source"]

# The module's public names, its literal ``__all__`` (None: none, or not a literal), and
# the modules it star-imports (``(dotted, level)``, in source order).
Exported = tuple[tuple[str, ...], tuple[str, ...] | None, tuple[tuple[str, int], ...]]


def exported(module: cst.Module) -> Exported:
    """:data:`Exported` of a module parsed by libcst."""
    names: set[str] = set()
    declared: list[str] = []
    literal = True
    stars: list[tuple[str, int]] = []
    stack: list[cst.CSTNode] = list(reversed(module.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            names.add(node.name.value)
        elif isinstance(node, cst.SimpleStatementLine):
            stack.extend(reversed(node.body))
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            bound = [n for t in targets for n in _cst_targets(t)]
            names.update(bound)
            if "__all__" in bound:
                strings = _cst_strings(node.value) if not isinstance(node, cst.AnnAssign) else None
                if strings is None or (isinstance(node, cst.AugAssign) and not declared):
                    literal = False
                else:
                    declared.extend(strings)
        elif isinstance(node, cst.Expr):
            call = node.value
            if isinstance(call, cst.Call) and (dotted(call.func) or "").startswith("__all__."):
                literal = False  # ``__all__.extend(...)``: more than the literal says
        elif isinstance(node, cst.Import):
            for alias in node.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    names.add(alias.asname.name.value)
                else:
                    names.add((dotted(alias.name) or "").partition(".")[0])
        elif isinstance(node, cst.ImportFrom):
            if isinstance(node.names, cst.ImportStar):
                module_name = "" if node.module is None else dotted(node.module) or ""
                stars.append((module_name, len(node.relative)))
                continue
            for alias in node.names:
                name = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(name, cst.Name):
                    names.add(name.value)
        elif isinstance(node, (cst.For, cst.With)):
            if isinstance(node, cst.For):
                names.update(_cst_targets(node.target))
            else:
                for item in node.items:
                    if item.asname is not None:
                        names.update(_cst_targets(item.asname.name))
            stack.extend(reversed(_cst_suites(node)))
        elif isinstance(node, cst.If) and dotted(node.test) in TYPE_CHECKING_TESTS:
            if isinstance(node.orelse, cst.If):  # (its body never runs: ``if TYPE_CHECKING:``)
                stack.append(node.orelse)
            elif node.orelse is not None and isinstance(node.orelse.body, cst.IndentedBlock):
                stack.extend(reversed(node.orelse.body.body))
        elif isinstance(node, cst.BaseCompoundStatement):
            stack.extend(reversed(_cst_suites(node)))
    return _result(names, declared if literal and declared else None, stars)


def exported_of_source(tree: ast.Module) -> Exported:
    """:data:`Exported` of a module parsed by CPython's parser (the same answer)."""
    names: set[str] = set()
    declared: list[str] = []
    literal = True
    stars: list[tuple[str, int]] = []
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [n for t in targets for n in _ast_targets(t)]
            names.update(bound)
            if "__all__" in bound:
                strings = _ast_strings(node.value) if not isinstance(node, ast.AnnAssign) else None
                if strings is None or (isinstance(node, ast.AugAssign) and not declared):
                    literal = False
                else:
                    declared.extend(strings)
        elif isinstance(node, ast.Expr):
            call = node.value
            func = call.func if isinstance(call, ast.Call) else None
            if isinstance(func, ast.Attribute) and _ast_targets(func.value) == ["__all__"]:
                literal = False
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                stars.append((node.module or "", node.level))
                continue
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING_TESTS:
            stack.extend(reversed(node.orelse))  # (its body never runs: ``if TYPE_CHECKING:``)
        else:
            if isinstance(node, (ast.For, ast.AsyncFor)):
                names.update(_ast_targets(node.target))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        names.update(_ast_targets(item.optional_vars))
            for field in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(node, field, None) or []))
            for handler in getattr(node, "handlers", ()):
                stack.extend(reversed(handler.body))
    return _result(names, declared if literal and declared else None, stars)


def _result(
    names: Iterable[str], declared: list[str] | None, stars: list[tuple[str, int]]
) -> Exported:
    public = tuple(sorted({n for n in names if n and not n.startswith("_")}))
    return public, None if declared is None else tuple(dict.fromkeys(declared)), tuple(stars)


def _cst_targets(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _cst_targets(el.value)]
    if isinstance(target, cst.StarredElement):
        return _cst_targets(target.value)
    return []


def _cst_strings(value: cst.BaseExpression | None) -> list[str] | None:
    """The strings of a literal list or tuple of string literals; None for anything else."""
    if not isinstance(value, (cst.List, cst.Tuple)):
        return None
    found = []
    for el in value.elements:
        if not isinstance(el.value, cst.SimpleString):
            return None
        text = el.value.evaluated_value
        if not isinstance(text, str):
            return None
        found.append(text)
    return found


def _cst_suites(node: cst.BaseCompoundStatement) -> list[cst.CSTNode]:
    """The statements of a module-level compound statement's blocks (not a def's or a class's;
    a ``match``'s cases are not looked into)."""
    out: list[cst.CSTNode] = []
    blocks: list[object] = [getattr(node, "body", None), getattr(node, "orelse", None)]
    blocks += [getattr(node, "finalbody", None), *getattr(node, "handlers", ())]
    for block in blocks:
        if isinstance(block, cst.If):  # an ``elif``
            out.append(block)
            continue
        if isinstance(block, (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler)):
            block = block.body
        if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            out.extend(block.body)
    return out


def _ast_targets(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for el in target.elts for n in _ast_targets(el)]
    if isinstance(target, ast.Starred):
        return _ast_targets(target.value)
    return []


def _ast_strings(value: ast.expr | None) -> list[str] | None:
    if not isinstance(value, (ast.List, ast.Tuple)):
        return None
    found = []
    for el in value.elts:
        if not (isinstance(el, ast.Constant) and isinstance(el.value, str)):
            return None
        found.append(el.value)
    return found
