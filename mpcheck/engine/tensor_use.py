"""Which parameters a function uses as tensors, and so cannot be plain Python numbers.

The walk takes an unannotated input of a model's method for an activation in the model's
dtype: that keeps dtypes flowing through ``forward(self, x)``. But ``gpu_capacity_gb * 1e9``
in the same class multiplies a Python number, which has no float16 range to leave. What tells
the two apart is the code itself: a tensor is indexed, called methods on (``x.view``,
``x.masked_fill_``, ``x.shape``) or multiplied with ``@``; a Python float is none of these.
A rule that needs a half *tensor* asks for that evidence (``Origin.unproven``).
"""

from __future__ import annotations

import libcst as cst

# What a Python int or float answers too: using them proves nothing.
_NUMBER_ATTRIBUTES = frozenset(
    {"real", "imag", "conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length"}
)


class _Uses(cst.CSTVisitor):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.tensors: set[str] = set()

    def _name(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name) and node.value in self.names:
            return node.value
        return None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        name = self._name(node.value)
        if name is not None and node.attr.value not in _NUMBER_ATTRIBUTES:
            self.tensors.add(name)  # ``x.view(...)``, ``x.shape``, ``x.dtype``

    def visit_Subscript(self, node: cst.Subscript) -> None:
        name = self._name(node.value)
        if name is not None:
            self.tensors.add(name)  # ``x[:, None]``

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            for side in (node.left, node.right):
                name = self._name(side)
                if name is not None:
                    self.tensors.add(name)  # ``q @ k``


def tensor_uses(fn: cst.FunctionDef, names: frozenset[str]) -> frozenset[str]:
    """The ``names`` (parameters of ``fn``) that its body uses as tensors."""
    uses = _Uses(names)
    for stmt in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ():
        stmt.visit(uses)
    return frozenset(uses.tensors)
