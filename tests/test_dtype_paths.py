"""Which way a half-precision run goes through a test of a tensor's dtype
(``mpcheck.engine.guards.runs_take``: both half runs, or the float16 run where the two half
dtypes go apart): the decision tables, on facts given directly."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine.facts import UNKNOWN, Fact, Kind, Prec, dtype_object
from mpcheck.engine.guards import bf16_upcast, fp16_run_kept, fp16_upcast, runs_take
from mpcheck.project.names import dotted

# What ``<name>.dtype`` is for each tensor name the tests use.
TENSORS = {
    "x": Fact(Kind.DTYPE, Prec.MODEL),  # in the model's dtype
    "h": Fact(Kind.DTYPE, Prec.HALF, "float16"),  # known float16
    "b": Fact(Kind.DTYPE, Prec.HALF, "bfloat16"),  # known bfloat16
    "m": Fact(Kind.DTYPE, Prec.UNKNOWN),  # an input of unknown dtype
    "f": Fact(Kind.DTYPE, Prec.FULL, "float32"),  # known float32: no half run to speak of
}


def fact_of(node: cst.BaseExpression) -> Fact:
    name = dotted(node) or ""
    if name.endswith(".dtype"):
        return TENSORS.get(name[: -len(".dtype")], UNKNOWN)
    if name.startswith("torch."):
        return dtype_object(name[len("torch.") :], node)
    return UNKNOWN


@pytest.mark.parametrize(
    ("test", "taken"),
    [
        ("x.dtype == torch.float32", False),
        ("x.dtype is torch.float", False),
        ("x.dtype != torch.float32", True),
        ("x.dtype is not torch.float64", True),
        ("x.dtype in (torch.float16, torch.bfloat16)", True),
        ("x.dtype not in [torch.float16, torch.bfloat16]", False),
        ("x.dtype in (torch.float32, torch.float64)", False),
        ("m.dtype == torch.float32", False),
        ("h.dtype == torch.float16", True),
        ("b.dtype == torch.float16", False),
        # undecided: the two half dtypes go different ways, or nothing is known
        ("x.dtype == torch.float16", None),
        ("m.dtype != torch.bfloat16", None),
        ("f.dtype == torch.float32", None),
        ("x.dtype == dtype", None),
        ("x.dtype == torch.float32 == y", None),
        ("x.dtype < torch.float32", None),
        ("x.shape == torch.float32", None),
        ("make().dtype == torch.float32", None),
        ("flag", None),
    ],
)
def test_the_path_a_half_precision_run_takes(test: str, taken: bool | None) -> None:
    assert runs_take(cst.parse_expression(test), fact_of)[0] is taken


@pytest.mark.parametrize(
    ("test", "taken"),
    [
        ("x.dtype == torch.float16", True),
        ("x.dtype is torch.half", True),
        ("x.dtype != torch.float16", False),
        ("m.dtype == torch.bfloat16", False),
        ("x.dtype in (torch.bfloat16,)", False),
        # the runs agree (the first answer decides), or nothing is known
        ("x.dtype == torch.float32", None),
        ("h.dtype == torch.float16", None),
        ("b.dtype == torch.float16", None),
        ("x.dtype == dtype", None),
        ("flag", None),
    ],
)
def test_the_path_the_float16_run_takes_when_the_half_runs_part(
    test: str, taken: bool | None
) -> None:
    assert runs_take(cst.parse_expression(test), fact_of)[1] is taken


FLOAT32 = Fact(Kind.TENSOR, Prec.FULL, "float32")
MODEL = Fact(Kind.TENSOR, Prec.MODEL)


def test_an_upcast_in_the_float16_run_only_is_half_only_as_bfloat16() -> None:
    split = fp16_upcast(FLOAT32, MODEL)
    assert split is not None and (split.prec, split.dtype) == (Prec.HALF, "bfloat16")
    # the float16 run keeps the model's dtype, or the upcast is in the bfloat16 run: no split
    assert fp16_upcast(MODEL, FLOAT32) is None
    assert fp16_upcast(FLOAT32, Fact(Kind.TENSOR, Prec.HALF, "float16")) is None
    assert fp16_upcast(FLOAT32, UNKNOWN) is None


def test_after_an_upcast_only_the_float16_run_takes_the_value_is_never_float16() -> None:
    from tests.test_analysis import probe

    facts = probe(
        """
        class Net(nn.Module):
            def forward(self, x, y, z):
                if x.dtype == torch.float16:
                    x = x.float()
                y = y.float() if y.dtype is torch.half else y
                z = z.float() if z.dtype == torch.bfloat16 else z
                probe.at(x); probe.at(y); probe.at(z)
        """
    )
    assert [(f.prec, f.dtype) for f in facts[:2]] == [(Prec.HALF, "bfloat16")] * 2
    # the float16 run keeps ``z`` as it came: float16 there, said to hold in that run only
    assert (facts[2].prec, facts[2].dtype) == (Prec.HALF, "float16") and fp16_run_kept(facts[2])


def test_an_upcast_in_the_bfloat16_run_only_is_half_only_as_float16() -> None:
    test = cst.parse_expression("x.dtype == torch.bfloat16")
    split = bf16_upcast(FLOAT32, MODEL, test)
    assert split is not None and (split.prec, split.dtype) == (Prec.HALF, "float16")
    assert fp16_run_kept(split) and split.origin is not None and split.origin.node is test
    # the bfloat16 run keeps the model's dtype, or the float16 side is float32 or half: none
    assert bf16_upcast(MODEL, FLOAT32, test) is None
    assert bf16_upcast(FLOAT32, Fact(Kind.TENSOR, Prec.HALF, "bfloat16"), test) is None
    assert bf16_upcast(FLOAT32, FLOAT32, test) is None
    assert not fp16_run_kept(Fact(Kind.TENSOR, Prec.HALF, "float16"))


def test_a_float16_run_kept_value_survives_an_if_not_about_precision() -> None:
    from tests.test_analysis import probe

    facts = probe(
        """
        def fourier_filter(x):
            B, C, H, W = x.shape
            if (W & (W - 1)) != 0:
                x = x.to(dtype=torch.float32)
            elif x.dtype == torch.bfloat16:
                x = x.to(dtype=torch.float32)
            probe.at(x)
            if x.is_cuda:
                y = x.float()
            elif x.dtype == torch.bfloat16:
                y = x.float()
            else:
                y = x
            probe.at(y)
        """
    )
    assert (facts[0].prec, facts[0].dtype) == (Prec.HALF, "float16")
    assert facts[0].origin is not None and "on the path where" in facts[0].origin.text
    assert facts[1].prec is not Prec.HALF  # ``is_cuda`` names a device: the join stays
