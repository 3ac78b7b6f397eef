"""Value ranges: an upper bound on ``|x|`` carried with each tensor fact.

The domain is one number per tensor, ``Fact.bound`` (None: nothing bounds it), joined at
branches by the larger bound (``facts.join``). It is the coarsest interval domain that still
answers the question rules ask of a half value -- can it leave float16's range (65504), can
its square (above 256)? -- so it costs one float per fact and no fixpoint: a bound a loop's
round changes (``x = x * 2``) is widened to none at the loop head (``exits.widen``), and
arithmetic on an unbounded operand is unbounded. Sources and transfer functions are the rows
of :mod:`mpcheck.knowledge.ranges`; the walk applies them to every call it reports
(:meth:`ranged`), so a bound follows a value through names, branches and attributes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import libcst as cst

from mpcheck.engine.base import CallRecord
from mpcheck.engine.facts import Fact, Kind, Prec
from mpcheck.engine.sites import Operand
from mpcheck.knowledge import ranges as R

# Integer dtypes whose every value is bounded by the dtype itself (pixels as loaded).
_DTYPE_BOUNDS = {"uint8": 255.0, "int8": 128.0, "bool": 1.0}


def magnitude(fact: Fact) -> float | None:
    """An upper bound on ``|x|``: a tensor's bound, a literal number's magnitude."""
    if fact.kind is Kind.SCALAR:
        return abs(fact.value) if fact.value is not None else None
    if fact.kind is not Kind.TENSOR:
        return None
    if fact.bound is not None:
        return fact.bound
    return _DTYPE_BOUNDS.get(fact.dtype or "")


def ranged(call: CallRecord) -> CallRecord:
    """``call`` with the bound of its result set from its operands (unchanged when none)."""
    result = call.result
    if result.kind is Kind.SEQ:
        return _ranged_items(call)
    if result.kind is not Kind.TENSOR:
        return call
    bound = _bound(call)
    integral = bound is not None and _integral(call)
    if bound == result.bound and integral == result.integral:
        return call
    return replace(call, result=replace(result, bound=bound, integral=integral))


def _ranged_items(call: CallRecord) -> CallRecord:
    """``call`` with the bound of each item of its tuple set (``knowledge.ranges.ITEMS``):
    ``torch.var_mean(x)``'s variance as ``x.var()``'s, its mean as ``x``'s."""
    rows = R.ITEMS.get(call.qual or "") if not call.method else None
    items = call.result.items
    if rows is None or items is None or len(items) != len(rows):
        return call
    bounded = tuple(
        replace(item, bound=_item_bound(call, row), integral=False) if item.is_tensor else item
        for item, row in zip(items, rows, strict=True)
    )
    return replace(call, result=replace(call.result, items=bounded))


def _item_bound(call: CallRecord, row: str) -> float | None:
    if row == R.MEAN:
        subject = call.operand(0, "input")
        return magnitude(subject.fact) if subject is not None else None
    variance = _variance(call)
    if row == R.VARIANCE or variance is None:
        return variance
    return math.sqrt(variance)


def _whole(fact: Fact) -> bool:
    """Every element (or the number) is an integer."""
    if fact.kind is Kind.SCALAR:
        return fact.value is not None and float(fact.value).is_integer()
    return fact.kind is Kind.TENSOR and (fact.integral or fact.prec is Prec.INT)


def _integral(call: CallRecord) -> bool:
    """Integers in, integers out: ``arange`` of integers (no fractional step), what casts and
    shape ops make of integers, their sums and products with integers."""
    function = call.qual if not call.method else None
    if function == "torch.arange":
        given = [*call.args[:3], *(call.kwargs[k] for k in R.ARANGE_KEYWORDS if k in call.kwargs)]
        return bool(given) and all(_whole(o.fact) for o in given)
    if call.method in R.INTEGRAL_METHODS or function in R.INTEGRAL_FUNCTIONS:
        subject = call.operand(0, "input")
        return subject is not None and _whole(subject.fact)
    name = (call.method or function or "").rsplit(".", 1)[-1].rstrip("_")
    if name in ("add", "sub", "mul"):
        left, right = call.operand(0, "input"), call.operand(1, "other")
        return left is not None and right is not None and _whole(left.fact) and _whole(right.fact)
    return False


def _bound(call: CallRecord) -> float | None:
    name = call.method or call.qual or ""
    function = call.qual if not call.method else None
    if name in R.UNIT_METHODS and call.method or function in R.UNIT_FUNCTIONS:
        return 1.0
    if call.receiver is not None and not call.method and call.qual is None:
        layer = call.receiver.fact.layer if call.receiver.fact.kind is Kind.MODULE else None
        return 1.0 if layer in R.UNIT_MODULES else None
    short = name.rsplit(".", 1)[-1] if function and function.startswith("torch.") else name
    if function in R.RANGES:
        return _factory_range(call)
    if function in R.RANDINTS:
        return _randint(call)
    if function in R.CONCATS:
        first = call.args[0].fact if call.args else None
        items = first.items if first is not None and first.kind is Kind.SEQ else None
        bounds = [magnitude(f) for f in items or ()]
        known = [b for b in bounds if b is not None]
        return max(known) if known and len(known) == len(bounds) else None
    if function in R.STFTS or call.method in R.STFTS:
        return _stft(call)
    if call.method in R.KEEPS_METHODS or function in R.KEEPS_FUNCTIONS:
        subject = call.operand(0, "input")
        return magnitude(subject.fact) if subject is not None else None
    if name in R.CLAMPS:
        return _clamped(call)
    if name in R.VARIANCES:
        return _variance(call)
    if short in R.SQUARES:
        subject = call.operand(0, "input")
        bound = magnitude(subject.fact) if subject is not None else None
        return None if bound is None else bound * bound
    if short in ("add", "sub", "mul", "div", "pow", "add_", "sub_", "mul_", "div_", "pow_"):
        return _arithmetic(call, short.rstrip("_"))
    return None


def _arithmetic(call: CallRecord, how: str) -> float | None:
    left, right = call.operand(0, "input"), call.operand(1, "other")
    if left is None or right is None:
        return None
    a, b = magnitude(left.fact), magnitude(right.fact)
    if how == "div":
        # only a division by a number: a tensor divisor may be near zero
        if a is None or right.fact.kind is not Kind.SCALAR or not b:
            return None
        return a / b
    if how == "pow":
        exponent = right.fact.value if right.fact.kind is Kind.SCALAR else None
        if a is None or exponent is None or exponent < 0:
            return None
        return float(a**exponent)
    if a is None or b is None:
        return None
    return a + b if how in ("add", "sub") else a * b


def _variance(call: CallRecord) -> float | None:
    """``x.var()`` of ``|x| <= b``: b² for the population variance, 2b² for torch's default
    unbiased one (``knowledge.ranges.VARIANCES``)."""
    subject = call.operand(0, "input")
    bound = magnitude(subject.fact) if subject is not None else None
    if bound is None:
        return None
    correction = call.kwargs.get("correction")
    population = (
        any(_false(call.operand(i, "unbiased")) for i in (1, 2))
        or correction is not None
        and correction.fact.kind is Kind.SCALAR
        and correction.fact.value == 0
    )
    return bound * bound if population else 2 * bound * bound


def _false(given: Operand | None) -> bool:
    """``False`` written in ``unbiased``'s place: first after the input
    (``var(x, unbiased)``) or after a dim (``var(x, dim, unbiased, keepdim)``); a dim is
    never a bool, and ``keepdim`` comes later."""
    return given is not None and isinstance(given.node, cst.Name) and given.node.value == "False"


def _stft(call: CallRecord) -> float | None:
    """``stft(x, n_fft, hop, win_length, window)``: n_fft * max|window| * max|x| (a window
    of ones when none is given); None when ``x``, ``n_fft`` or the window is not bounded."""
    signal, size = call.operand(0, "input"), call.operand(1, "n_fft")
    window = call.operand(4, "window")
    if signal is None or size is None:
        return None
    x, n = magnitude(signal.fact), magnitude(size.fact)
    if window is None or (isinstance(window.node, cst.Name) and window.node.value == "None"):
        w: float | None = 1.0  # a rectangular window: ones
    else:
        w = magnitude(window.fact)
    if x is None or n is None or w is None:
        return None
    return n * w * x


def _clamped(call: CallRecord) -> float | None:
    """``x.clamp(lo, hi)``: within max(|lo|, |hi|) when both are numbers; else x's bound."""
    first = 0 if call.method else 1
    low = call.operand(first + 1, "min")
    high = call.operand(first + 2, "max")
    subject = call.operand(0, "input")
    own = magnitude(subject.fact) if subject is not None else None
    ends = [magnitude(o.fact) if o is not None else None for o in (low, high)]
    if None in ends:
        return own
    clamp = max(e for e in ends if e is not None)
    return clamp if own is None else min(own, clamp)


def _randint(call: CallRecord) -> float | None:
    """``randint(high, size)``, ``randint(low, high, size)``: integers in [low, high), so
    within max(|low|, |high|); None when an end is not a number the walk knows."""
    given = call.args[:3]
    sized = len(given) >= 2 and given[1].fact.kind in (Kind.SEQ, Kind.OTHER)
    first = given[:1] if sized or len(given) < 3 else given[:2]
    ends = [*first, *(call.kwargs[k] for k in ("low", "high") if k in call.kwargs)]
    bounds = [magnitude(e.fact) for e in ends]
    if not bounds or None in bounds:
        return None
    return max(b for b in bounds if b is not None)


def _factory_range(call: CallRecord) -> float | None:
    """``arange(n)``, ``arange(a, b)``, ``linspace(a, b, n)``: the larger end."""
    ends = [magnitude(a.fact) for a in call.args[:2]]
    for keyword in ("start", "end"):
        if keyword in call.kwargs:
            ends.append(magnitude(call.kwargs[keyword].fact))
    if not ends or None in ends:
        return None
    return max(e for e in ends if e is not None)
