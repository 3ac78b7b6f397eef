"""Which parameters a function uses as tensors, and so cannot be plain Python numbers.

The walk takes an unannotated input of a model's method for an activation in the model's
dtype: that keeps dtypes flowing through ``forward(self, x)``. But ``gpu_capacity_gb * 1e9``
in the same class multiplies a Python number, which has no float16 range to leave. What tells
the two apart is the code itself: a tensor is indexed, called methods on (``x.view``,
``x.masked_fill_``, ``x.shape``) or multiplied with ``@``; a Python float is none of these.
A rule that needs a half *tensor* asks for that evidence (``Origin.unproven``).
"""

from __future__ import annotations

import dataclasses

import libcst as cst

# What a Python int or float answers too: using them proves nothing.
_NUMBER_ATTRIBUTES = frozenset(
    {"real", "imag", "conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length"}
)


# The fields of each node type that can hold nodes: the walk reads them directly. libcst's
# visitor rebuilds every node it passes (``_visit_and_replace_children``), which made this
# read-only question cost more than the whole dtype walk of the function.
_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


def _fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(
            f.name
            for f in dataclasses.fields(kind)
            if not f.name.startswith(("whitespace", "lpar", "rpar"))
        )
    return names


def tensor_uses(fn: cst.FunctionDef, names: frozenset[str]) -> frozenset[str]:
    """The ``names`` (parameters of ``fn``) that its body uses as tensors: indexed
    (``x[:, None]``), an attribute read or method called (``x.view(...)``, ``x.shape``) or
    multiplied with ``@``."""
    found: set[str] = set()
    stack: list[object] = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(node)
            continue
        if not isinstance(node, cst.CSTNode):
            continue
        if isinstance(node, cst.Attribute):
            value = node.value
            if (
                isinstance(value, cst.Name)
                and value.value in names
                and node.attr.value not in _NUMBER_ATTRIBUTES
            ):
                found.add(value.value)
        elif isinstance(node, cst.Subscript):
            value = node.value
            if isinstance(value, cst.Name) and value.value in names:
                found.add(value.value)
        elif isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, cst.MatrixMultiply
        ):
            for side in (node.left, node.right):
                if isinstance(side, cst.Name) and side.value in names:
                    found.add(side.value)
        for field in _fields(type(node)):
            stack.append(getattr(node, field))
    return frozenset(found)
