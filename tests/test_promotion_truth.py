"""The engine's type promotion, case by case, against what torch itself computes.

Each case builds real tensors (dimensioned or 0-dim, of a given dtype) or Python scalars,
adds them under torch, and compares the result's dtype with :func:`mpcheck.engine.facts.promote`
on the matching facts, with the model running in float16.
"""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine.facts import SCALAR, Fact, Kind, Prec, promote
from tests.test_autocast_ops import _need_torch as require_torch

# (description, operands): an operand is (dtype, zero_dim) for a tensor or a Python number
CASES = [
    ("half and a float32 0-dim tensor", [("float16", False), ("float32", True)]),
    ("half and a float32 tensor", [("float16", False), ("float32", False)]),
    ("half 0-dim and a float32 0-dim tensor", [("float16", True), ("float32", True)]),
    ("int64 and half", [("int64", False), ("float16", False)]),
    ("int64 0-dim and half", [("int64", True), ("float16", False)]),
    ("int64 and a Python float", [("int64", False), 0.5]),
    ("half and a Python float", [("float16", False), 1e-3]),
    ("bool and half", [("bool", False), ("float16", False)]),
    ("float32 0-dim and a Python int", [("float32", True), 3]),
]


def fact(operand: tuple[str, bool] | float) -> Fact:
    if not isinstance(operand, tuple):
        return SCALAR if isinstance(operand, int) else Fact(Kind.SCALAR, value=operand)
    dtype, zero_dim = operand
    prec = {"float16": Prec.MODEL, "float32": Prec.FULL, "int64": Prec.INT, "bool": Prec.BOOL}
    return Fact(Kind.TENSOR, prec[dtype], dtype, zero_dim=zero_dim)


def engine_dtype(result: Fact) -> str:
    if result.prec is Prec.MODEL:
        return "float16"  # the model runs in float16 in this comparison
    assert result.dtype is not None
    return result.dtype


@pytest.mark.parametrize(("name", "operands"), CASES, ids=[c[0] for c in CASES])
def test_promotion_matches_torch(name: str, operands: list[tuple[str, bool] | float]) -> None:
    torch = require_torch()
    values = [
        (
            torch.ones((), dtype=getattr(torch, o[0]))
            if o[1]
            else torch.ones(3, dtype=getattr(torch, o[0]))
        )
        if isinstance(o, tuple)
        else o
        for o in operands
    ]
    total = values[0]
    for value in values[1:]:
        total = total + value
    expected = str(total.dtype).removeprefix("torch.")
    site = cst.parse_expression("a + b")  # where the operands meet
    assert engine_dtype(promote([fact(o) for o in operands], site)) == expected
