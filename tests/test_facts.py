"""torch's promotion and control-flow joins, on the coarse dtype lattice."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import (
    SCALAR,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    element,
    join,
    promote,
    seq_of,
)

NODE = cst.Name("x")


def tensor(prec: Prec, dtype: str | None = None, cause: Cause = Cause.ACTIVATION) -> Fact:
    return Fact(Kind.TENSOR, prec, dtype, Origin(NODE, cause, "here"))


MODEL = tensor(Prec.MODEL)
FULL = tensor(Prec.FULL, "float32", Cause.UPCAST)
HALF = tensor(Prec.HALF, "float16", Cause.CAST)
INT = tensor(Prec.INT, "int64", Cause.FACTORY)


def test_float32_wins_over_half_and_model() -> None:
    assert promote([MODEL, FULL]).prec is Prec.FULL
    assert promote([HALF, FULL]).prec is Prec.FULL
    assert promote([MODEL, HALF]).prec is Prec.HALF


def test_float64_wins_over_float32() -> None:
    double = tensor(Prec.FULL, "float64", Cause.UPCAST)
    assert promote([FULL, double]).dtype == "float64"


def test_python_scalars_and_zero_dim_tensors_do_not_promote() -> None:
    assert promote([MODEL, Fact(Kind.SCALAR, value=0.5)]).prec is Prec.MODEL
    zero_dim = Fact(Kind.TENSOR, Prec.FULL, "float32", zero_dim=True)
    assert promote([MODEL, zero_dim]).prec is Prec.MODEL


def test_int_tensor_times_python_float_is_float32() -> None:
    out = promote([INT, Fact(Kind.SCALAR, value=0.5)], NODE)
    assert (out.prec, out.dtype, out.cause) == (Prec.FULL, "float32", Cause.INT_FLOAT)
    assert promote([INT, Fact(Kind.SCALAR, value=2.0)], NODE).prec is Prec.INT


def test_unknown_operand_keeps_the_known_floating_side() -> None:
    assert promote([MODEL, Fact(Kind.TENSOR)]).prec is Prec.MODEL
    assert promote([Fact(Kind.TENSOR), INT]).prec is Prec.UNKNOWN
    assert promote([SCALAR]) == SCALAR


def test_join_of_different_tensor_precisions_is_unknown() -> None:
    assert join(MODEL, FULL).prec is Prec.UNKNOWN
    assert join(MODEL, MODEL) is MODEL


def test_join_of_dtype_objects_keeps_the_half_side_as_maybe() -> None:
    fp16 = Fact(Kind.DTYPE, Prec.HALF, "float16")
    fp32 = Fact(Kind.DTYPE, Prec.FULL, "float32")
    joined = join(fp32, fp16)
    assert (joined.prec, joined.dtype, joined.maybe) == (Prec.HALF, "float16", True)


def test_sequences() -> None:
    pair = seq_of([MODEL, FULL])
    assert element(pair, 1) is FULL
    assert element(pair).prec is Prec.UNKNOWN  # unknown index: join of the items
    assert join(pair, seq_of([MODEL, FULL])).items == (MODEL, FULL)


def test_float32_on_one_path_and_unknown_on_the_other_keeps_its_origin_as_maybe() -> None:
    node = cst.Name("mask")
    full = Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(node, Cause.FACTORY, "made float32"))
    unknown = Fact(Kind.TENSOR, Prec.UNKNOWN)
    for merged in (join(full, unknown), join(unknown, full)):
        assert (merged.prec, merged.maybe) == (Prec.UNKNOWN, True)
        assert merged.origin is full.origin


def test_float32_joined_with_model_dtype_keeps_its_origin_but_not_its_precision() -> None:
    full = Fact(Kind.TENSOR, Prec.FULL, "float32", Origin(NODE, Cause.UPCAST, "upcast"))
    model = Fact(Kind.TENSOR, Prec.MODEL, None, Origin(NODE, Cause.ACTIVATION, "an input"))
    merged = join(model, full)
    assert (merged.prec, merged.maybe, merged.origin) == (Prec.UNKNOWN, True, full.origin)
    ints = Fact(Kind.TENSOR, Prec.INT, "int64")
    assert join(full, ints).origin is None  # not a float32 value on some path of a float


def test_float32_on_a_path_stays_float32_on_that_path_through_promotion() -> None:
    # ``if upcast: q = q.float()`` joined with the model's ``q``: "float32 or the model's
    # dtype"; ``eye - q`` is float32 on the upcast's path, so it is no evidence of half
    either = join(FULL, MODEL)
    for low in (MODEL, HALF):
        out = promote([low, either], NODE)
        assert (out.prec, out.maybe, out.origin) == (Prec.UNKNOWN, True, FULL.origin)
    assert promote([FULL, either], NODE).prec is Prec.FULL
    # a 0-dim one does not promote a dimensioned tensor on any path
    assert promote([MODEL, replace(either, zero_dim=True)], NODE).prec is Prec.MODEL
