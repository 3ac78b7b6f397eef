"""Value ranges (mpcheck/engine/ranges.py): the bound on |x| each torch call gives its result,
and the join of two paths' bounds."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine.base import CallRecord
from mpcheck.engine.facts import Fact, Kind, Prec, join, seq_of
from mpcheck.engine.ranges import magnitude, ranged
from mpcheck.engine.sites import Operand

NODE = cst.Call(cst.Name("f"))
FREE = Fact(Kind.TENSOR, Prec.HALF, "float16")  # nothing bounds it
UNIT = Fact(Kind.TENSOR, Prec.HALF, "float16", bound=1.0)
INT = Fact(Kind.TENSOR, Prec.INT, "int64")


def number(value: float) -> Operand:
    return Operand(cst.Name("n"), Fact(Kind.SCALAR, value=value))


def tensor(fact: Fact) -> Operand:
    return Operand(cst.Name("t"), fact)


def method(name: str, receiver: Fact, *args: Operand, **kwargs: Operand) -> float | None:
    call = CallRecord(NODE, FREE, args, kwargs, method=name, receiver=tensor(receiver))
    return ranged(call).result.bound


def function(qual: str, *args: Operand, result: Fact = FREE, **kwargs: Operand) -> float | None:
    return ranged(CallRecord(NODE, result, args, kwargs, qual=qual)).result.bound


@pytest.mark.parametrize("name", ["softmax", "sigmoid", "tanh", "sin", "cos"])
def test_squashing_methods_bound_by_one_whatever_the_input(name: str) -> None:
    assert method(name, FREE) == 1.0


def test_squashing_functions_and_layers_bound_by_one() -> None:
    assert function("torch.nn.functional.softmax", tensor(FREE)) == 1.0
    assert function("torch.rand", number(3)) == 1.0
    layer = Fact(Kind.MODULE, Prec.MODEL, layer="Sigmoid")
    assert ranged(CallRecord(NODE, FREE, (tensor(FREE),), receiver=tensor(layer))).result.bound == 1


def test_shape_only_ops_and_means_keep_the_bound() -> None:
    for name in ("view", "permute", "flatten", "to", "half", "abs", "mean", "amax", "detach"):
        assert method(name, UNIT) == 1.0
        assert method(name, FREE) is None
    assert function("torch.cat", tensor(seq_of([UNIT, UNIT]))) == 1.0
    assert function("torch.cat", tensor(seq_of([UNIT, FREE]))) is None


def test_arithmetic_with_numbers_transforms_the_bound() -> None:
    assert function("torch.mul", tensor(UNIT), number(2.0)) == 2.0
    assert function("torch.sub", tensor(UNIT), number(-1.0)) == 2.0  # ``x * 2 - 1``
    assert function("torch.div", tensor(Fact(Kind.TENSOR, Prec.INT, "uint8")), number(255.0)) == 1
    assert function("torch.pow", tensor(Fact(Kind.TENSOR, bound=16.0)), number(2)) == 256.0
    assert function("torch.mul", tensor(UNIT), tensor(UNIT)) == 1.0
    # an unbounded operand, a tensor divisor (maybe tiny), a negative power: unbounded
    assert function("torch.mul", tensor(UNIT), tensor(FREE)) is None
    assert function("torch.div", tensor(UNIT), tensor(UNIT)) is None
    assert function("torch.pow", tensor(UNIT), number(-1)) is None


def test_clamp_bounds_by_its_wider_end_and_never_widens() -> None:
    assert method("clamp", FREE, number(-5.0), number(3.0)) == 5.0
    assert method("clamp", FREE, max=number(3.0), min=number(0.0)) == 3.0
    assert method("clamp", UNIT, number(-5.0), number(5.0)) == 1.0
    assert method("clamp", FREE, number(0.0)) is None  # ``clamp(min=0)``: no upper end


def test_positions_from_arange_are_bounded_by_their_end() -> None:
    made = Fact(Kind.TENSOR, Prec.INT, "int64")
    assert function("torch.arange", number(4096), result=made) == 4096.0
    positions = ranged(CallRecord(NODE, made, (number(2), number(10)), qual="torch.arange"))
    assert positions.result.position_bound() == 10.0
    assert UNIT.position_bound() is None  # not an integer position


def test_a_join_keeps_the_wider_bound_and_loses_a_missing_one() -> None:
    assert join(UNIT, Fact(Kind.TENSOR, Prec.HALF, "float16", bound=4.0)).bound == 4.0
    assert join(UNIT, FREE).bound is None
    assert magnitude(Fact(Kind.SCALAR, value=-3.0)) == 3.0


def test_a_variance_is_bounded_by_twice_the_square_unless_it_is_the_population_one() -> None:
    """torch's default variance is unbiased: two values +-b give 2b² (``[200, -200]`` in float16
    is inf though 200² fits); ``unbiased=False`` / ``correction=0`` keep b²."""
    wide = Fact(Kind.TENSOR, Prec.HALF, "float16", bound=200.0)
    assert method("var", wide, number(-1)) == 80000.0
    assert function("torch.var", tensor(wide)) == 80000.0
    false = Operand(cst.Name("False"), Fact(Kind.OTHER))
    assert method("var", wide, unbiased=false) == 40000.0
    assert function("torch.var", tensor(wide), correction=number(0)) == 40000.0
    assert function("torch.var", tensor(wide), correction=number(1)) == 80000.0
    assert method("var", FREE) is None


def test_stft_is_bounded_by_its_frame_window_and_input() -> None:
    """|X| <= n_fft * max|window| * max|x|: a 64-point STFT of a waveform in [-1, 1] is
    within 64, a 1024-point one within 1024 (its square may pass 65504: no bound hides it)."""
    hann = function("torch.hann_window", number(64))
    assert hann == 1.0
    window = Fact(Kind.TENSOR, Prec.FULL, "float32", bound=hann)
    assert function("torch.stft", tensor(UNIT), number(64), window=tensor(window)) == 64.0
    assert method("stft", UNIT, number(1024)) == 1024.0  # no window: rectangular, ones
    none = Operand(cst.Name("None"), Fact(Kind.OTHER))
    assert function("torch.stft", tensor(UNIT), number(256), window=none) == 256.0
    assert function("torch.stft", tensor(FREE), number(64)) is None  # an unbounded input
    assert function("torch.stft", tensor(UNIT), number(64), window=tensor(FREE)) is None
    assert function("torch.stft", tensor(UNIT), tensor(FREE)) is None  # n_fft not a number
    # |X| is what ``abs``/``view_as_real`` keep, and its square is the bound squared
    spectrum = Fact(Kind.TENSOR, Prec.HALF, "float16", bound=64.0)
    assert function("torch.view_as_real", tensor(spectrum)) == 64.0
    assert function("torch.pow", tensor(spectrum), number(2)) == 4096.0


def test_integer_positions_stay_integral_through_casts_not_division() -> None:
    made = Fact(Kind.TENSOR, Prec.INT, "int64")
    positions = ranged(CallRecord(NODE, made, (number(64),), qual="torch.arange")).result
    assert positions.integral and positions.bound == 64.0
    as_float = Fact(Kind.TENSOR, Prec.FULL, "float32", bound=64.0, integral=True)
    cast = CallRecord(NODE, FREE, (), method="float", receiver=tensor(positions))
    assert ranged(cast).result.integral
    assert ranged(cast).result.position_bound() == 64.0
    halved = ranged(CallRecord(NODE, FREE, (tensor(as_float), number(4.0)), qual="torch.div"))
    assert halved.result.bound == 16.0 and not halved.result.integral  # 64 positions 1/4 apart
    assert halved.result.position_bound() is None
    # fractional steps and linspace: bounded, yet positions closer than 1
    step = CallRecord(NODE, made, (number(0), number(16), number(0.25)), qual="torch.arange")
    assert not ranged(step).result.integral
    grid = ranged(
        CallRecord(NODE, FREE, (number(0), number(1), number(4096)), qual="torch.linspace")
    )
    assert grid.result.bound == 1.0 and grid.result.position_bound() is None


def test_integral_joins_only_when_both_paths_are() -> None:
    a = Fact(Kind.TENSOR, Prec.FULL, "float32", bound=8.0, integral=True)
    b = Fact(Kind.TENSOR, Prec.FULL, "float32", bound=8.0)
    assert join(a, a).integral and not join(a, b).integral


def test_a_variance_read_with_unbiased_false_by_position_is_the_population_one() -> None:
    """``x.var(dim, unbiased, keepdim)`` and ``torch.var(x, unbiased)``: a ``False`` in
    ``unbiased``'s place keeps b²; a ``keepdim`` of ``False`` after it changes nothing."""
    wide = Fact(Kind.TENSOR, Prec.HALF, "float16", bound=200.0)
    false = Operand(cst.Name("False"), Fact(Kind.OTHER))
    true = Operand(cst.Name("True"), Fact(Kind.OTHER))
    assert method("var", wide, number(-1), false) == 40000.0
    assert function("torch.var", tensor(wide), false) == 40000.0
    assert function("torch.var", tensor(wide), number(-1), true, false) == 80000.0


def _items(qual: str, given: Fact, *args: Operand, **kwargs: Operand) -> list[float | None]:
    pair = seq_of([given, given])
    call = CallRecord(NODE, pair, (tensor(given), *args), kwargs, qual=qual)
    return [item.bound for item in ranged(call).result.items or ()]


def test_var_mean_bounds_its_variance_as_var_and_its_mean_by_the_input() -> None:
    """``torch.var_mean(x)`` is (x.var(), x.mean()): 2b² (b² with ``unbiased=False``) and b."""
    wide = Fact(Kind.TENSOR, Prec.HALF, "float16", bound=200.0, integral=True)
    assert _items("torch.var_mean", wide, number(-1)) == [80000.0, 200.0]
    assert _items("torch.var_mean", wide, correction=number(0)) == [40000.0, 200.0]
    false = Operand(cst.Name("False"), Fact(Kind.OTHER))
    assert _items("torch.var_mean", wide, number(-1), false) == [40000.0, 200.0]
    pair = CallRecord(NODE, seq_of([wide, wide]), (tensor(wide),), qual="torch.var_mean")
    assert not any(item.integral for item in ranged(pair).result.items or ())
    assert _items("torch.var_mean", FREE) == [None, None]


def test_std_mean_bounds_its_deviation_by_the_root_of_the_variance_bound() -> None:
    """``torch.std_mean(x)``: the unbiased deviation of values within b reaches sqrt(2)·b (two
    values ±b; float16 ``[60000, -60000, 60000]`` gives inf on torch 2.13), b without it."""
    wide = Fact(Kind.TENSOR, Prec.HALF, "float16", bound=60000.0)
    deviation, mean = _items("torch.std_mean", wide)
    assert deviation is not None and abs(deviation - 60000.0 * 2**0.5) < 1e-6 and mean == 60000.0
    assert _items("torch.std_mean", wide, correction=number(0)) == [60000.0, 60000.0]


def test_an_unknown_tuple_keeps_its_items_unbounded() -> None:
    pair = seq_of([UNIT, INT])
    call = CallRecord(NODE, pair, (tensor(UNIT),), qual="torch.frexp")
    assert ranged(call) is call
