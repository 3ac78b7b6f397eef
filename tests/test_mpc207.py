"""MPC207 half-moving-average: where it reports, what it says, where it stays quiet."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from tests.support import check, span

HEADER = "import copy\nimport torch\nfrom torch import nn\n"  # lines 1-3


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC207"]


def test_a_deep_copy_of_a_bfloat16_model_stepped_by_lerp_is_reported() -> None:
    (d,) = findings(
        """
        model = nn.Linear(8, 8).to(torch.bfloat16)
        ema = copy.deepcopy(model)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 1 - 0.999)
        """
    )
    assert span(d) == (9, 9, 9, 30)
    assert d.severity.value == "warning"
    assert d.message == (
        "`e.lerp_(p, 1 - 0.999)` steps a moving average in place (`e` is bfloat16, cast by "
        "`.to(torch.bfloat16)` at line 5): a step smaller than 2**-9 of the average rounds "
        "away in bfloat16, so the average stalls; keep it in float32 and update it from "
        "`p.float()`"
    )
    assert [(r.start.row, r.message) for r in d.related] == [
        (5, "bfloat16 here: cast by `.to(torch.bfloat16)`")
    ]


@pytest.mark.parametrize(
    "step",
    [
        "e.mul_(decay).add_(p, alpha=1 - decay)",
        "e.mul_(0.9999).add_(p.data, alpha=0.0001)",
        "e.sub_((1 - decay) * (e - p))",
        "e.add_((p - e) * 0.001)",
        "e.copy_(decay * e + (1 - decay) * p)",
        "e.copy_(e.data * self_decay + p * (1.0 - self_decay))",
        "e.lerp_(p, weight)",
    ],
)
def test_each_averaging_step_on_a_float16_copy_is_reported(step: str) -> None:
    (d,) = findings(
        f"""
        def train(decay, weight, self_decay):
            model = nn.Linear(8, 8).half()
            ema = copy.deepcopy(model)
            for e, p in zip(ema.parameters(), model.parameters()):
                {step}
        """
    )
    assert d.start.row == 9
    assert "(`e` is float16, cast to float16 by `.half()` at line 6)" in d.message
    assert "smaller than 2**-12 of the average rounds away in float16" in d.message


def test_foreach_lerp_of_half_parameters_is_reported() -> None:
    (d,) = findings(
        """
        model = nn.Linear(8, 8).half()
        ema = copy.deepcopy(model)
        torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1 - 0.999)
        """
    )
    assert d.start.row == 7


@pytest.mark.parametrize(
    "made",
    [
        "ema = copy.deepcopy(model).float()",  # cast back to float32
        "ema = copy.deepcopy(base)",  # copied before the cast
    ],
)
def test_a_float32_average_is_quiet(made: str) -> None:
    assert not findings(
        f"""
        base = nn.Linear(8, 8)
        model = copy.deepcopy(base).half()
        {made}
        for e, p in zip(ema.parameters(), model.parameters()):
            e.lerp_(p.float(), 1 - 0.999)
        """
    )


@pytest.mark.parametrize(
    "step",
    [
        "e.lerp_(p, 0.75)",  # an interpolation, not an average's small step
        "e.lerp_(p, 1.0 / (i + 2))",  # a weight computed per step: a running merge
        "e.mul_(2.0).add_(p, alpha=1.0)",  # no decay
        "e.add_(p, alpha=-0.01)",  # an SGD-like step, not an average
        "e.mul_(0.999)",  # a decay alone
    ],
)
def test_steps_that_are_no_average_are_quiet(step: str) -> None:
    assert not findings(
        f"""
        model = nn.Linear(8, 8).half()
        ema = copy.deepcopy(model)
        for i, (e, p) in enumerate(zip(ema.parameters(), model.parameters())):
            {step}
        """
    )


def test_a_parameter_that_only_may_run_in_half_is_quiet() -> None:
    """A helper's model argument has no dtype the code shows: the premise is not evidence."""
    assert not findings(
        """
        @torch.no_grad()
        def update_ema(ema_model, model, decay=0.999):
            for e, p in zip(ema_model.parameters(), model.parameters()):
                e.mul_(decay).add_(p, alpha=1 - decay)
        """
    )


def test_library_emas_of_half_parameters_are_reported_where_made() -> None:
    found = findings(
        """
        from diffusers.training_utils import EMAModel
        from timm.utils import ModelEmaV3
        from torch.optim.swa_utils import AveragedModel


        def main(unet, model, weight_dtype):
            unet.to("cuda", dtype=weight_dtype)
            ema_unet = EMAModel(unet.parameters(), decay=0.9999)
            model = model.to(torch.bfloat16)
            ema = ModelEmaV3(model, decay=0.9998)
            swa = AveragedModel(model)
        """
    )
    assert [d.start.row for d in found] == [12, 14, 15]
    assert "keeps its moving average as clones of the parameters, in their dtype" in (
        found[0].message
    )
    assert "(`unet.parameters()` is half precision, cast to the working dtype" in (found[0].message)
    assert "keeps its moving average as a deep copy of the model, in its dtype" in (
        found[1].message
    )


def test_a_library_ema_made_before_the_cast_is_quiet() -> None:
    assert not findings(
        """
        from diffusers.training_utils import EMAModel


        def main(unet, weight_dtype):
            ema_unet = EMAModel(unet.parameters(), decay=0.9999)
            unet.to("cuda", dtype=weight_dtype)
        """
    )


def test_an_average_in_a_float32_branch_is_quiet() -> None:
    assert not findings(
        """
        def step(model, ema):
            model = model.half()
            ema = copy.deepcopy(model)
            for e, p in zip(ema.parameters(), model.parameters()):
                if e.dtype == torch.float32:
                    e.lerp_(p, 1 - 0.999)
        """
    )
