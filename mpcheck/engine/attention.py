"""Which matmuls compute attention: ``q @ k.transpose(-2, -1)`` and ``probs @ v``.

Attention is written by hand as often as it goes through
``F.scaled_dot_product_attention``. The analysis asks this module, once per
matmul-family site, whether the site is one of attention's two products, so
rules about attention own those sites and rules about plain matmuls skip them:

* ``scores`` (q·kᵀ): the right operand is a key transposed over its last two
  dims (``k.transpose(-2, -1)``, ``k.transpose(2, 3)``, ``k.transpose(1, 2)``
  for 3-D ``bmm``, ``k.mT``, ``k.permute(0, 1, 3, 2)``), or an ``einsum``
  contracting the last index of both operands (``"bhqd,bhkd->bhqk"``);
* ``values`` (probs·v): the left operand is a softmax output, possibly through
  dropout, masking, casts and reshapes, followed back through the assignments
  of the enclosing function (an ``einsum`` must also contract its last index
  with the values' rows: ``"bhqk,bhkd->bhqd"``);
* ``context`` (kᵀ·v of linear attention): the left operand is transposed over
  its last two dims and the right one is not, so the product sums over the
  sequence, and the function divides by what it gives (``out = q @ kv`` then
  ``out[..., :-1] / (out[..., -1:] + eps)``): an unnormalised sum of products
  that the division turns into a mean. Channel attention (``qᵀ @ k`` then a
  softmax) divides by nothing of it and is not one.

Weights are not keys: an operand named like a parameter (``self.weight.mT``,
``proj_weight.transpose(-2, -1)``) does not make a site attention.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from mpcheck.knowledge import torch_api as T
from mpcheck.project.names import children, dotted

SCORES = "scores"
VALUES = "values"
CONTEXT = "context"

# Pairs of dims whose swap turns a key [.., seq, dim] into kᵀ [.., dim, seq].
_KEY_SWAPS = ({-2, -1}, {2, 3}, {1, 2})
# Methods that keep "this is a softmax output" (casts, masking, reshapes).
_KEEP_METHODS = frozenset(
    """to type type_as float half bfloat16 double masked_fill masked_fill_ contiguous view
    reshape detach clone squeeze unsqueeze flatten clamp nan_to_num where""".split()
)
# Methods that keep "this is a transposed key".
_KEY_KEEP_METHODS = frozenset("contiguous to type_as float half bfloat16 double".split())
_PARAMETER_HINTS = ("weight", "bias", "embed", "proj", "kernel")
_DEPTH = 10


class AttentionRoles:
    """Classifies the matmul sites of one module (caches assignments per function)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._defs: dict[int, dict[str, list[cst.BaseExpression]]] = {}
        self._divisors: dict[int, list[cst.BaseExpression]] = {}

    def role(
        self,
        left: cst.BaseExpression | None,
        right: cst.BaseExpression | None,
        scope: cst.FunctionDef | None,
        spec: str | None = None,
        node: cst.CSTNode | None = None,
    ) -> str | None:
        """``"scores"``, ``"values"``, ``"context"`` or None for the matmul ``left @ right``.

        ``spec`` is the equation of an ``einsum`` with two operands; ``node`` the product.
        """
        if left is None or right is None or _parameter_like(left):
            return None
        if spec is not None and _einsum_scores(spec):
            return SCORES
        if spec is None and _key_transpose(right):
            return SCORES
        if spec is None and node is not None and _key_transpose(left):
            return CONTEXT if self._normalised(node, scope) else None
        if spec is not None and not _einsum_values(spec):
            return None  # ``"ikmn,k->imn"``: a softmax-weighted sum over bins, not over keys
        if self._softmax_output(left, self._defs_of(scope), 0, set()):
            return VALUES
        return None

    def site_role(
        self,
        node: cst.CSTNode,
        name: str,
        receiver: cst.BaseExpression | None,
        args: Sequence[cst.BaseExpression],
        scope: cst.FunctionDef | None,
    ) -> str | None:
        """The role of a matmul-family call: ``name`` is its leaf (``matmul``, ``baddbmm``).

        ``receiver`` is ``x`` in ``x.matmul(y)``; ``args`` are the positional arguments.
        """
        if isinstance(node, cst.BinaryOperation):
            return self.role(node.left, node.right, scope, node=node)
        operands = ([receiver] if receiver is not None else []) + list(args)
        if name == "einsum" and args and isinstance(args[-1], cst.SimpleString):
            # einops' ``einsum(q, k, "b h i d, b h j d -> b h i j")``: torch.einsum underneath
            pattern = args[-1].evaluated_value
            equation = T.einops_equation(pattern) if isinstance(pattern, str) else None
            rest = list(args[:-1])
            if equation is not None and len(rest) == 2:
                return self.role(rest[0], rest[1], scope, equation)
            return None
        if name == "einsum" and args and isinstance(args[0], cst.SimpleString):
            spec = args[0].evaluated_value
            rest = list(args[1:])
            if len(rest) == 1 and isinstance(rest[0], (cst.List, cst.Tuple)):
                rest = [e.value for e in rest[0].elements]
            if isinstance(spec, str) and len(rest) == 2:
                return self.role(rest[0], rest[1], scope, spec)
            return None
        if name in ("baddbmm", "addmm", "addbmm") and receiver is None:
            operands = operands[1:]  # torch.baddbmm(bias, q, kᵀ)
        if name in ("matmul", "mm", "bmm") and len(operands) >= 2:
            return self.role(operands[0], operands[1], scope, node=node)
        if name in ("baddbmm", "addmm", "addbmm") and len(operands) >= 2:
            return self.role(operands[0], operands[1], scope)
        return None

    # -- context: a sum over the sequence that the function divides by ------------------
    def _normalised(self, product: cst.CSTNode, scope: cst.FunctionDef | None) -> bool:
        """Whether a division of ``scope`` has ``product`` in its divisor, directly or
        through the names assigned from it (``kv``, then ``out = q @ kv``)."""
        defs = self._defs_of(scope)
        names: set[str] = set()
        grown = True
        while grown:
            grown = False
            for name, values in defs.items():
                if name not in names and any(_derives(v, product, names) for v in values):
                    names.add(name)
                    grown = True
        return any(_derives(d, product, names) for d in self._divisors_of(scope))

    def _divisors_of(self, scope: cst.FunctionDef | None) -> list[cst.BaseExpression]:
        """The right operand of every ``/`` in ``scope`` (the module when None)."""
        key = id(scope) if scope is not None else id(self.module)
        found = self._divisors.get(key)
        if found is None:
            found = []
            stack: list[cst.CSTNode] = [scope.body] if scope is not None else [self.module]
            while stack:
                node = stack.pop()
                if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                    continue
                if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
                    found.append(node.right)
                stack.extend(children(node))
            self._divisors[key] = found
        return found

    # -- probs: a softmax output ------------------------------------------------------
    def _softmax_output(
        self,
        node: cst.BaseExpression,
        defs: dict[str, list[cst.BaseExpression]],
        depth: int,
        seen: set[int],
    ) -> bool:
        if depth > _DEPTH:
            return False
        if isinstance(node, cst.Name):
            for rhs in defs.get(node.value, ()):
                if id(rhs) not in seen:
                    seen.add(id(rhs))
                    if self._softmax_output(rhs, defs, depth + 1, seen):
                        return True
            return False
        if isinstance(node, cst.Call):
            leaf = _leaf(node.func)
            if leaf is None:
                return False
            if leaf.endswith("softmax") and not leaf.endswith("log_softmax"):
                return True
            if isinstance(node.func, cst.Attribute) and leaf in _KEEP_METHODS:
                return self._softmax_output(node.func.value, defs, depth + 1, seen)
            if "drop" in leaf.lower() and node.args:
                return self._softmax_output(node.args[0].value, defs, depth + 1, seen)
            return False
        if isinstance(node, cst.BinaryOperation) and not isinstance(
            node.operator, cst.MatrixMultiply
        ):
            return self._softmax_output(node.left, defs, depth + 1, seen) or self._softmax_output(
                node.right, defs, depth + 1, seen
            )
        if isinstance(node, cst.Subscript):
            return self._softmax_output(node.value, defs, depth + 1, seen)
        if isinstance(node, cst.IfExp):
            return self._softmax_output(node.body, defs, depth + 1, seen) or self._softmax_output(
                node.orelse, defs, depth + 1, seen
            )
        return False

    def _defs_of(self, scope: cst.FunctionDef | None) -> dict[str, list[cst.BaseExpression]]:
        """Name -> every expression assigned to it in ``scope`` (the module when None)."""
        key = id(scope) if scope is not None else id(self.module)
        found = self._defs.get(key)
        if found is None:
            found = {}
            body = scope.body.body if scope is not None else self.module.body
            for target, value in _assignments(body):
                found.setdefault(target, []).append(value)
            self._defs[key] = found
        return found


def _derives(node: cst.BaseExpression, product: cst.CSTNode, names: set[str]) -> bool:
    """Whether ``node`` is computed from ``product`` (or one of ``names``) by indexing,
    arithmetic, another matmul, a method that keeps values (``.float()``, ``.clamp``) or
    ``.sum``;
    not through any other call (``x / self.norm(out)`` normalises something else)."""
    if node is product:
        return True
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Subscript):
        return _derives(node.value, product, names)
    if isinstance(node, cst.BinaryOperation):
        return _derives(node.left, product, names) or _derives(node.right, product, names)
    if isinstance(node, cst.Call):
        leaf = _leaf(node.func)
        if isinstance(node.func, cst.Attribute) and (leaf in _KEEP_METHODS or leaf == "sum"):
            return _derives(node.func.value, product, names)
        if leaf in ("matmul", "bmm"):
            return any(_derives(a.value, product, names) for a in node.args)
    return False


def _assignments(body: object) -> Iterator[tuple[str, cst.BaseExpression]]:
    """``(name, value)`` of each plain assignment in ``body``, outside nested defs."""
    stack: list[cst.CSTNode] = list(body) if isinstance(body, (list, tuple)) else []
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        yield from _pairs(target.target, small.value)
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    yield from _pairs(small.target, small.value)
            continue
        for child in node.children:
            if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.BaseCompoundStatement)):
                stack.append(child)
            elif isinstance(child, (cst.Else, cst.Finally, cst.ExceptHandler, cst.If)):
                stack.append(child)


def _pairs(
    target: cst.BaseExpression, value: cst.BaseExpression
) -> Iterator[tuple[str, cst.BaseExpression]]:
    if isinstance(target, cst.Name):
        yield target.value, value
    elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        if len(target.elements) == len(value.elements):
            for t, v in zip(target.elements, value.elements, strict=True):
                yield from _pairs(t.value, v.value)


# -- scores: q @ kᵀ --------------------------------------------------------------------
def _key_transpose(node: cst.BaseExpression) -> bool:
    """``k.transpose(-2, -1)``, ``k.mT``, ``k.permute(0, 1, 3, 2)``, and the function form."""
    if isinstance(node, cst.Attribute) and node.attr.value == "mT":
        return not _parameter_like(node.value)
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    name = node.func.attr.value
    args = [a.value for a in node.args if a.keyword is None and not a.star]
    base: cst.BaseExpression = node.func.value
    if name in _KEY_KEEP_METHODS:
        return _key_transpose(base)
    if name in ("transpose", "swapaxes", "swapdims"):
        if len(args) == 3:  # torch.transpose(k, -2, -1)
            base, args = args[0], args[1:]
        swapped = {_int(a) for a in args}
        return len(args) == 2 and swapped in _KEY_SWAPS and not _parameter_like(base)
    if name == "permute":
        if len(args) == 1 and isinstance(args[0], (cst.Tuple, cst.List)):
            args = [e.value for e in args[0].elements]
        dims = [_int(a) for a in args]
        if len(dims) < 3 or any(d is None for d in dims):
            return False
        # the key's last dim (its features) moves to second-to-last: [.., dim, seq]
        return dims[-2] in (len(dims) - 1, -1) and not _parameter_like(base)
    return False


def _einsum_scores(spec: str) -> bool:
    """``"bhqd,bhkd->bhqk"``: both operands contracted over their last index."""
    text = spec.replace(" ", "").replace("...", "")
    if "->" not in text:
        return False
    inputs, out = text.split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2 or any(len(p) < 2 for p in parts) or len(out) < 2:
        return False
    a, b = parts
    return a[-1] == b[-1] and a[-1] not in out and out[-1] == b[-2] and out[-2] == a[-2]


def _einsum_values(spec: str) -> bool:
    """``"bhqk,bhkd->bhqd"``: the probabilities' last index contracted with the values' rows."""
    text = spec.replace(" ", "").replace("...", "")
    if "->" not in text:
        return False
    inputs, out = text.split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2 or any(len(p) < 2 for p in parts):
        return False
    a, b = parts
    return a[-1] == b[-2] and a[-1] not in out


def _parameter_like(node: cst.BaseExpression) -> bool:
    name = dotted(node)
    if name is None:
        return False
    leaf = name.rsplit(".", 1)[-1].lower()
    return any(h in leaf for h in _PARAMETER_HINTS)


def _leaf(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def _int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.value)
    return None
