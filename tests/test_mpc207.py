"""MPC207 half-moving-average: where it reports, what it says, where it stays quiet."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mpcheck.diagnostics import Diagnostic
from tests.support import FIXTURES, check, project_findings, span

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
        "`.to(torch.bfloat16)`, copied by `copy.deepcopy(model)` at line 6): a step smaller "
        "than 2**-9 of the average rounds "
        "away in bfloat16, so the average stalls; keep it in float32 and update it from "
        "`p.float()`"
    )
    assert [(r.start.row, r.message) for r in d.related] == [
        (6, "bfloat16 here: cast by `.to(torch.bfloat16)`, copied by `copy.deepcopy(model)`")
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
        "e.lerp_(p, ema_rate)",
        "e.mul_(decay).add_((1 - decay) * p)",
        "e.mul_(decay).add_(p, alpha=one_minus_decay)",
    ],
)
def test_each_averaging_step_on_a_float16_copy_is_reported(step: str) -> None:
    (d,) = findings(
        f"""
        def train(decay, ema_rate, self_decay, one_minus_decay):
            model = nn.Linear(8, 8).half()
            ema = copy.deepcopy(model)
            for e, p in zip(ema.parameters(), model.parameters()):
                {step}
        """
    )
    assert d.start.row == 9
    assert (
        "(`e` is float16, cast to float16 by `.half()`, copied by `copy.deepcopy(model)` at line 7)"
    ) in d.message
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
        "e.lerp_(p, 0.5)",  # a uniform soup
        "e.lerp_(p, alpha)",  # a merge's or Lookahead's named weight
        "e.mul_(momentum).add_(p)",  # a momentum sum
        "e.mul_(decay).add_(p)",  # no step of the average's size
        "e.mul_(beta1).add_(p, alpha=1 - beta1)",  # an optimizer's moment
        "e.grad.add_(p, alpha=weight_decay)",  # an L2 term
        "e.mul_(0.5).add_(p, alpha=0.5)",  # a half step, which half precision holds
    ],
)
def test_steps_that_are_no_average_are_quiet(step: str) -> None:
    assert not findings(
        f"""
        alpha, momentum, decay, beta1, weight_decay = 0.5, 0.9, 0.999, 0.9, 0.01
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
    assert found[0].message.startswith(
        "`EMAModel(unet.parameters(), decay=0.9999)` keeps a moving average in the dtype it "
        "copies or is given (the average is half precision, cast to the working dtype "
        "`weight_dtype`"
    )
    assert "(the average is bfloat16, cast by `.to(torch.bfloat16)` at line 13)" in (
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


KEEPER = """
import copy
import torch


class EMA:
    def __init__(self, model, decay=0.9999, dtype=None):
        self.decay = decay
        self.model = copy.deepcopy(model)
        if dtype is not None:
            self.model.to(dtype=dtype)

    @torch.no_grad()
    def step(self, model):
        for e, p in zip(self.model.parameters(), model.parameters()):
            e.mul_(self.decay).add_(p, alpha=1 - self.decay)
"""


def test_a_project_ema_class_built_on_a_half_model_is_reported_in_its_file() -> None:
    found = findings(
        KEEPER
        + """

def main(model, weight_dtype):
    model = model.half()
    ema = EMA(model)
    fresh = EMA(model.float())
    given = EMA(fresh, dtype=weight_dtype)
"""
    )
    assert [d.start.row for d in found] == [24, 26]
    assert "(the average is float16, cast to float16 by `.half()` at line 23)" in found[0].message
    assert "kept in the dtype given as `dtype=weight_dtype`" in found[1].message


def test_a_project_ema_class_of_another_file_is_reported_where_built(tmp_path: Path) -> None:
    files = {
        "helpers/ema.py": KEEPER,
        "train.py": """
            import torch
            from helpers.ema import EMA


            def main(model):
                model = model.to(torch.bfloat16)
                ema = EMA(model)
                keep = EMA(model, dtype=torch.float32)


            if __name__ == "__main__":
                main(torch.nn.Linear(2, 2))
            """,
    }
    assert project_findings(tmp_path, files, {"MPC207"}) == {("train.py", 7, "MPC207")}


def test_an_ema_class_that_keeps_float32_is_no_keeper() -> None:
    fixed = KEEPER.replace("copy.deepcopy(model)", "copy.deepcopy(model).float()")
    assert not findings(fixed + "\n\nema = EMA(torch.nn.Linear(2, 2).half())\n")


def test_a_float32_cast_under_a_test_keeps_only_part_of_the_average() -> None:
    """``p.float() if p.ndim == 1 else p``: the matrices stay in the dtype handed in."""
    partly = KEEPER.replace(
        "self.model = copy.deepcopy(model)",
        "self.model = copy.deepcopy(model)\n"
        "        self.norms = [p.float() if p.ndim == 1 else p for p in model.parameters()]",
    )
    found = findings(partly + "\n\nema = EMA(torch.nn.Linear(2, 2).half())\n")
    assert [d.start.row for d in found] == [23]


def test_a_trainer_subclass_stepping_an_average_is_still_a_trainer(tmp_path: Path) -> None:
    """An averaging step in a ``Trainer`` subclass of another file keeps it what it is: the
    float16 unscale that ``trainer.train()`` raises on is still reported (MPC201)."""
    case = FIXTURES / "xfile" / "bad_trainer_subclass_elsewhere" / "lmtune"
    files = {f"lmtune/{p.name}": p.read_text() for p in case.glob("*.py")}
    files["lmtune/trainers.py"] = files["lmtune/trainers.py"].replace(
        "import ", "import torch\nimport ", 1
    ) + textwrap.indent(
        textwrap.dedent(
            """

                @torch.no_grad()
                def update_ema(self, ema_params, decay=0.999):
                    for e, p in zip(ema_params, self.model.parameters()):
                        e.mul_(decay).add_(p, alpha=1 - decay)
                """
        ),
        "    ",
    )
    found = project_findings(tmp_path, files)
    assert ("finetune.py", 15, "MPC201") in found


def test_a_plain_class_stepping_a_float32_average_answers_its_calls() -> None:
    """A running mean kept by a plain class (no copy: not an EMA keeper) is still read as
    that class: its float32 mean joined to bfloat16 activations raises (MPC102)."""
    found = [
        d.code
        for d in check(
            HEADER
            + textwrap.dedent(
                """
                class FeatureStats:
                    def __init__(self, dim, decay=0.99):
                        self.mean = torch.zeros(1, dim)
                        self.decay = decay

                    @torch.no_grad()
                    def update(self, x):
                        self.mean.mul_(self.decay).add_(x.mean(0), alpha=1 - self.decay)

                    def with_mean(self, x):
                        return torch.cat((x, self.mean.expand(x.shape[0], -1)), dim=-1)


                class Head(nn.Module):
                    def __init__(self, dim):
                        super().__init__()
                        self.out = nn.Linear(2 * dim, dim)
                        self.stats = FeatureStats(dim)

                    def forward(self, x):
                        return self.out(self.stats.with_mean(x))


                head = Head(16).to(torch.bfloat16)
                head(torch.randn(4, 16, dtype=torch.bfloat16))
                """
            )
        )
    ]
    assert "MPC102" in found
    assert "MPC207" not in found


@pytest.mark.parametrize(
    ("change", "rows"),
    [
        ("", [23, 24]),  # the copy keeps float16; ``dtype=None`` casts nothing
        # a float32 copy in ``__init__`` is the fix, unless a dtype is given
        ("self.model = copy.deepcopy(model).float()", [24]),
        # a cast in another method (logging, saving) keeps nothing of the average
        (
            "self.model = copy.deepcopy(model)\n"
            "    def stats(self):\n"
            "        return self.model.weight.float()",
            [25, 26],
        ),
    ],
)
def test_what_an_ema_class_keeps_is_read_from_its_init(change: str, rows: list[int]) -> None:
    keeper = KEEPER.replace("self.model = copy.deepcopy(model)", change) if change else KEEPER
    found = findings(
        keeper
        + "\n\nmodel = torch.nn.Linear(2, 2).half()\n"
        + "a = EMA(model, dtype=None)\nb = EMA(model, dtype=torch.bfloat16)\n"
    )
    assert [d.start.row for d in found] == rows


@pytest.mark.parametrize(("weight", "reported"), [("ema_rate", True), ("remaining", False)])
def test_a_named_lerp_weight_counts_by_its_words(weight: str, reported: bool) -> None:
    """``ema`` as a word of the name (``ema_rate``), not inside another (``remaining``)."""
    found = findings(
        f"""
        def merge({weight}):
            model = nn.Linear(8, 8).half()
            ema = copy.deepcopy(model)
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, {weight})
        """
    )
    assert bool(found) is reported
