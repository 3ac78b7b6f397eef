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

from mpcheck.engine.body_uses import body_uses


def tensor_uses(fn: cst.FunctionDef, names: frozenset[str]) -> frozenset[str]:
    """The ``names`` (parameters of ``fn``) that its body uses as tensors: indexed
    (``x[:, None]``), an attribute read or method called (``x.view(...)``, ``x.shape``) or
    multiplied with ``@``. The walk is shared with :mod:`aliases` (:mod:`body_uses`); a
    walk of the file asks its ``Definitions``."""
    return body_uses(fn).tensors & names
