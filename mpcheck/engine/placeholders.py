"""Size-0 placeholders: an attribute built empty that the class rebuilds before it is used.

A module often stores a table it cannot size yet as an empty tensor (``self.pe =
torch.zeros(0, d)``, ``register_buffer("pe", torch.empty(0), persistent=False)``) and
rebuilds it, often in the input's dtype, whenever a size test finds it too small (``if
self.pe.size(0) < n: self.pe = ...``, or ``if self.pe.size(0) >= n: return`` before the
rebuild). A tensor with a 0 in its shape holds no element, and such a test rebuilds it for
any input with one, so its own dtype never meets the data: a finding resting on it (the
float32 of ``torch.zeros`` without ``dtype=``) is no hazard. A size-1 table is no
placeholder: a length-1 input meets it as built.

Its dtype still reaches the data where the class spells it out (``self.pe.dtype``, other
than in a comparison; ``self.pe.new_zeros(...)``) or hands the tensor to a call
(``torch.cat([self.pe, k])``, ``x.to(self.pe)``): then it is no placeholder here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator

import libcst as cst

from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import children, dotted

Resolve = Callable[[cst.BaseExpression], str | None]

# ``torch.tensor([])`` and ``torch.Tensor()``: float32 and empty, with no shape to read
_LITERALS = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor"})
# what a size test reads of the tensor (``self.pe.size(0)``, ``self.pe.shape[1]``)
_MEASURES = frozenset({"size", "shape", "numel", "nelement"})
# ``too small`` tests (the rebuild runs when true), by operator with the measure on the left
# and an input's size (at least 1) on the right; ``big enough`` tests (an early ``return``
# before the rebuild) are their negations. Against a literal, the test is asked of 0.
_SMALL = (cst.LessThan, cst.LessThanEqual, cst.NotEqual)
_BIG = (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)
_COMPARE: dict[type[cst.BaseCompOp], Callable[[int, int], bool]] = {
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
}
_FLIPPED: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {
    cst.LessThan: cst.GreaterThan,
    cst.LessThanEqual: cst.GreaterThanEqual,
    cst.GreaterThan: cst.LessThan,
    cst.GreaterThanEqual: cst.LessThanEqual,
    cst.Equal: cst.Equal,
    cst.NotEqual: cst.NotEqual,
}


def placeholder(cls: cst.ClassDef, attr: str, value: cst.BaseExpression, resolve: Resolve) -> bool:
    """Whether ``value``, stored as ``self.<attr>`` of ``cls``, is a size-0 placeholder the
    class rebuilds whenever a size test finds it too small, and whose dtype it never reads."""
    return empty(value, resolve) and rebuilt(cls, attr)


def empty(value: cst.BaseExpression, resolve: Resolve) -> bool:
    """A factory call making a tensor with a literal 0 in its shape (``torch.zeros(0, d)``,
    ``torch.empty((0,))``, ``torch.zeros(size=[0])``), or an empty literal
    (``torch.tensor([])``, ``torch.Tensor()``)."""
    if not isinstance(value, cst.Call):
        return False
    qual = resolve(value.func)
    positional = [a.value for a in value.args if a.keyword is None and not a.star]
    if qual in _LITERALS:
        data = positional[0] if positional else None
        return (data is None and not value.args) or (
            isinstance(data, (cst.List, cst.Tuple)) and not data.elements
        )
    if qual not in T.SHAPE_FACTORIES or any(a.star for a in value.args):
        return False
    size = next((a.value for a in value.args if a.keyword and a.keyword.value == "size"), None)
    first = size or (positional[0] if positional else None)
    if isinstance(first, (cst.Tuple, cst.List)):
        dims = [el.value for el in first.elements]
    elif qual == "torch.full" or size is not None:
        dims = [first] if first is not None else []
    else:
        dims = positional
    return any(isinstance(d, cst.Integer) and d.evaluated_value == 0 for d in dims)


def rebuilt(cls: cst.ClassDef, attr: str) -> bool:
    """Some method of ``cls`` rebuilds ``self.<attr>`` when a size test finds it too small,
    and none reads its dtype."""
    methods = {s.name.value: s for s in _statements(cls.body) if isinstance(s, cst.FunctionDef)}
    builders = frozenset(n for n, fn in methods.items() if _assigns(fn, attr, frozenset()))
    if not builders or _dtype_read(cls, attr):
        return False
    return any(_guarded(fn, attr, builders) for fn in methods.values())


def _guarded(fn: cst.FunctionDef, attr: str, builders: frozenset[str]) -> bool:
    """``if <too small>: <rebuild>``, or ``if <big enough>: return`` then the rebuild."""
    body = list(_statements(fn.body))
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.If) and _test(stmt.test, attr, small=True):
            if _assigns(stmt.body, attr, builders):
                return True
        if _returns_when_big(stmt, attr) and any(
            _assigns(later, attr, builders) for later in body[i + 1 :]
        ):
            return True
    return False


def _returns_when_big(stmt: cst.CSTNode, attr: str) -> bool:
    """``if self.pe.size(0) >= n: return``, alone or inside an outer ``if`` (espnet's ``if
    self.pe is not None: if ...: return``): a path that goes on found it too small."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None:
        return False
    inner = list(_statements(stmt.body))
    if _test(stmt.test, attr, small=False) and isinstance(_last(stmt.body), cst.Return):
        return True
    return any(_returns_when_big(s, attr) for s in inner)


def _last(block: cst.BaseSuite) -> cst.CSTNode | None:
    """The last statement of a block (``if ...: return`` on one line too)."""
    last = block.body[-1] if block.body else None
    if isinstance(last, cst.SimpleStatementLine) and last.body:
        return last.body[-1]
    return last


def _test(test: cst.BaseExpression, attr: str, *, small: bool) -> bool:
    """A test true when ``self.<attr>`` is too small (``small``) or big enough, on its own or
    as one side of ``or`` (too small) / ``and`` (big enough)."""
    if isinstance(test, cst.BooleanOperation):
        joins = isinstance(test.operator, cst.Or if small else cst.And)
        return joins and (
            _test(test.left, attr, small=small) or _test(test.right, attr, small=small)
        )
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, target = test.left, test.comparisons[0]
    right, op = target.comparator, type(target.operator)
    if _measured(right, attr) and not _measured(left, attr):
        left, right, op = right, left, _FLIPPED.get(op, cst.Is)
    if not _measured(left, attr) or _measured(right, attr):
        return False
    if isinstance(right, cst.Integer):  # ``if self.pe.numel() == 0:``: asked of an empty one
        compare = _COMPARE.get(op)
        return compare is not None and compare(0, int(right.evaluated_value)) is small
    return op in (_SMALL if small else _BIG)  # against an input's size, at least 1


def _measured(expr: cst.CSTNode, attr: str) -> bool:
    """``expr`` reads a size of ``self.<attr>`` (``.size(0)``, ``.shape[1]``, ``len(...)``)."""
    for node in _walk(expr):
        if isinstance(node, cst.Attribute) and node.attr.value in _MEASURES:
            if _is_self_attr(node.value, attr):
                return True
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "len"
            and node.args
            and _is_self_attr(node.args[0].value, attr)
        ):
            return True
    return False


def _assigns(node: cst.CSTNode, attr: str, builders: frozenset[str]) -> bool:
    """``node`` stores a new ``self.<attr>`` (or calls a method of the class that does)."""
    for child in _walk(node):
        if isinstance(child, cst.Assign) and any(
            _is_self_attr(t.target, attr) for t in child.targets
        ):
            return True
        if isinstance(child, cst.AnnAssign) and _is_self_attr(child.target, attr):
            return True
        if isinstance(child, cst.Call) and isinstance(child.func, cst.Attribute):
            if dotted(child.func.value) == "self" and child.func.attr.value in builders:
                return True
            if child.func.attr.value == "register_buffer" and child.args:
                name = child.args[0].value
                if isinstance(name, cst.SimpleString) and name.evaluated_value == attr:
                    return True
    return False


def _dtype_read(cls: cst.ClassDef, attr: str) -> bool:
    """The class spells out ``self.<attr>``'s dtype (``.dtype``, ``.new_zeros``) or hands
    the tensor to a call (``torch.cat([self.pe, k])``, ``x.to(self.pe)``), so its dtype may
    reach the data."""
    for node in _walk(cls, skip=cst.Comparison):  # (``if self.pe.dtype != x.dtype:``)
        if isinstance(node, cst.Attribute) and _is_self_attr(node.value, attr):
            name = node.attr.value
            if name in ("dtype", "type") or name.startswith("new_"):
                return True
        if isinstance(node, cst.Call):
            leaf = node.func.value if isinstance(node.func, cst.Name) else None
            if leaf in ("len", "isinstance", "hasattr"):
                continue
            if any(_is_self_attr(n, attr) for a in node.args for n in _held(a.value)):
                return True
    return False


def _held(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """``expr`` itself, or the elements of a list/tuple literal (``torch.cat([a, b])``)."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        for el in expr.elements:
            yield from _held(el.value)
    else:
        yield expr


def _is_self_attr(node: cst.CSTNode, attr: str) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and node.attr.value == attr
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def _statements(block: cst.BaseSuite) -> Iterator[cst.BaseStatement]:
    if isinstance(block, cst.IndentedBlock):
        yield from block.body


def _walk(root: cst.CSTNode, skip: type[cst.CSTNode] | None = None) -> Iterator[cst.CSTNode]:
    """Every node under ``root``, less those under a ``skip`` node."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if skip is None or not isinstance(node, skip):
            stack.extend(children(node))
