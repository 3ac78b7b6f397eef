"""Which parameters a function uses as tensors, and so cannot be plain Python numbers.

The walk takes an unannotated input of a model's method for an activation in the model's
dtype: that keeps dtypes flowing through ``forward(self, x)``. But ``gpu_capacity_gb * 1e9``
in the same class multiplies a Python number, which has no float16 range to leave. What tells
the two apart is the code itself: a tensor is indexed, called methods on (``x.view``,
``x.masked_fill_``, ``x.shape``) or multiplied with ``@``; a Python float is none of these.
A rule that needs a half *tensor* asks for that evidence (``Origin.unproven``).
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from mpcheck.project.names import descendants

# What a Python int or float answers too: using them proves nothing.
_NUMBER_ATTRIBUTES = frozenset(
    {"real", "imag", "conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length"}
)


def tensor_uses(fn: cst.FunctionDef, names: frozenset[str]) -> frozenset[str]:
    """The ``names`` (parameters of ``fn``) that its body uses as tensors: indexed
    (``x[:, None]``), an attribute read or method called (``x.view(...)``, ``x.shape``) or
    multiplied with ``@``. (A plain walk over the nodes: libcst's visitor rebuilds every node
    it passes, which cost more than the function's whole dtype walk.)"""
    found: set[str] = set()
    for node in descendants(fn.body):
        kind = type(node)  # (identity: libcst's classes are ABCs, isinstance on them is slow)
        if kind is cst.Attribute:
            attribute = cast(cst.Attribute, node)
            if attribute.attr.value not in _NUMBER_ATTRIBUTES:
                found.add(_name(attribute.value, names))  # ``x.view(...)``, ``x.shape``
        elif kind is cst.Subscript:
            found.add(_name(cast(cst.Subscript, node).value, names))  # ``x[:, None]``
        elif kind is cst.BinaryOperation:
            binary = cast(cst.BinaryOperation, node)
            if type(binary.operator) is cst.MatrixMultiply:
                found.update((_name(binary.left, names), _name(binary.right, names)))  # ``q @ k``
    found.discard("")
    return frozenset(found)


def _name(node: cst.BaseExpression, names: frozenset[str]) -> str:
    """``node``'s name when it is one of ``names``, else ""."""
    return node.value if type(node) is cst.Name and node.value in names else ""
