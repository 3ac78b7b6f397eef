"""What torch's dtype arithmetic makes of known dtypes: ``torch.promote_types`` and a fold of it.

``torch.promote_types(a, b)`` is the dtype an op on tensors of ``a`` and ``b`` returns: a
floating dtype promoted with float32 or float64 is at least float32 (float16 with bfloat16 is
float32 too). So ``dtype = reduce(torch.promote_types, (x.dtype, scale.dtype, torch.float32))``
is never half whatever ``x`` is -- the idiom of a norm computed in at least float32 -- and a
tensor cast to it (``x.to(dtype)``) is float32, not the working dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from mpcheck.engine.facts import Cause, Fact, Kind, Origin, Prec
from mpcheck.engine.sites import Operand

PROMOTE = "torch.promote_types"
REDUCE = "functools.reduce"


def promoted(
    node: cst.Call,
    qual: str | None,
    args: tuple[Operand, ...],
    resolve: Callable[[cst.BaseExpression], str | None],
) -> Fact | None:
    """The dtype ``torch.promote_types(...)`` (or ``reduce(torch.promote_types, (...))``)
    gives when one of its dtypes is a known float32 or float64; None when it cannot tell."""
    if qual == PROMOTE:
        facts = [a.fact for a in args]
    elif qual == REDUCE and len(args) >= 2 and resolve(args[0].node) == PROMOTE:
        items = args[1].fact.items
        if items is None:
            return None
        facts = list(items)
    else:
        return None
    full = [f for f in facts if f.kind is Kind.DTYPE and f.prec is Prec.FULL and not f.maybe]
    if not full:
        return None
    dtype = "float64" if any(f.dtype == "float64" for f in full) else "float32"
    text = f"at least {dtype}: promoted with {dtype} by `torch.promote_types`"
    return Fact(Kind.DTYPE, Prec.FULL, dtype, Origin(node, Cause.LITERAL, text))
