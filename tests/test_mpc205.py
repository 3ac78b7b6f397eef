"""MPC205 master-weights-round-trip: a trained model cast to half in place, then trained on.

Reported at the cast (a validation pipeline sharing the training module, moved with a half
``dtype=``), when an optimiser step of the module follows on some path; quiet on a copy, on a
pipeline moved without a dtype, on a validation after the last step, and on frozen parts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import check, span

HEADER = "import copy\n\nimport torch\n"  # lines 1-3

# ``validate`` casts on line 11; the step is on line 19.
LOOP = """
class ValPipeline:
    @classmethod
    def from_pretrained(cls, name, unet=None, torch_dtype=None):
        return cls()

def validate(pipeline, dtype):
    pipeline = pipeline.to("cuda", dtype=dtype)

def train(model, loader, epochs, weight_dtype):
    optimizer = torch.optim.AdamW(model.parameters())
    for epoch in range(epochs):
        for x in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        {validation}
"""


def findings(validation: str, code: str = "MPC205") -> list:  # type: ignore[type-arg]
    body = LOOP.replace("{validation}", validation)
    return [d for d in check(HEADER + body) if d.code == code]


@pytest.mark.parametrize("dtype", ["torch.bfloat16", "torch.float16", "weight_dtype"])
def test_validation_cast_of_the_shared_model_is_reported_at_the_cast(dtype: str) -> None:
    validation = f'validate(ValPipeline.from_pretrained("m", unet=model), {dtype})'
    (d,) = findings(validation)
    assert span(d) == (11, 16, 11, 48)
    assert "casts the model the optimizer built at line 14 trains to" in d.message
    assert "`optimizer.step()` (line 20) goes on training from them" in d.message


def test_bfloat16_cast_is_not_a_grad_scaler_raise() -> None:
    """The bfloat16 cast rounds (MPC205) but unscaling bfloat16 gradients does not raise."""
    validation = 'validate(ValPipeline.from_pretrained("m", unet=model), torch.bfloat16)'
    assert findings(validation, "MPC201") == []


@pytest.mark.parametrize(
    "validation",
    [
        # a copy may be cast freely
        'validate(ValPipeline.from_pretrained("m", unet=copy.deepcopy(model)), torch.bfloat16)',
        # moved without a dtype: autocast runs it in half, the weights stay float32
        'ValPipeline.from_pretrained("m", unet=model, torch_dtype=torch.bfloat16).to("cuda")',
        # loaded from the saved weights: not the training module
        'validate(ValPipeline.from_pretrained("m", torch_dtype=torch.bfloat16), torch.bfloat16)',
        # a cast to float32 rounds nothing
        'validate(ValPipeline.from_pretrained("m", unet=model), torch.float32)',
    ],
)
def test_quiet_when_the_trained_weights_are_not_rounded(validation: str) -> None:
    assert findings(validation) == []


def test_quiet_after_the_last_step() -> None:
    after = LOOP.replace("{validation}", "pass") + (
        '    validate(ValPipeline.from_pretrained("m", unet=model), torch.bfloat16)\n'
    )
    assert [d for d in check(HEADER + after) if d.code == "MPC205"] == []


def test_quiet_on_a_frozen_part_cast_before_the_optimizer() -> None:
    body = """
def train(unet, vae, loader, weight_dtype):
    vae.requires_grad_(False)
    vae.to("cuda", dtype=weight_dtype)
    optimizer = torch.optim.AdamW(unet.parameters())
    for x in loader:
        loss = unet(vae(x.to(weight_dtype)).float()).mean()
        loss.backward()
        optimizer.step()
"""
    assert [d for d in check(HEADER + body) if d.code == "MPC205"] == []


def test_reported_through_the_cli_as_a_warning(tmp_path: Path) -> None:
    source = tmp_path / "train.py"
    source.write_text(
        HEADER
        + LOOP.replace(
            "{validation}", 'validate(ValPipeline.from_pretrained("m", unet=model), weight_dtype)'
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--select", "MPC205", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "train.py:11:16: MPC205 warning:" in run.stdout, run.stdout + run.stderr


def test_a_float16_cast_before_a_grad_scaler_step_is_left_to_mpc201() -> None:
    """The step raises first ("Attempting to unscale FP16 gradients"): one finding, MPC201's."""
    body = (
        LOOP.replace(
            "{validation}", 'validate(ValPipeline.from_pretrained("m", unet=model), torch.float16)'
        )
        .replace(
            "            loss.backward()\n            optimizer.step()",
            "            scaler.scale(loss).backward()\n            scaler.step(optimizer)",
        )
        .replace(
            "    for epoch in range(epochs):",
            '    scaler = torch.amp.GradScaler("cuda")\n    for epoch in range(epochs):',
        )
    )
    codes = [d.code for d in check(HEADER + body) if d.code in ("MPC201", "MPC205")]
    assert codes == ["MPC201"]


# The plain round trip: the trained model itself cast to half for evaluation and back.
@pytest.mark.parametrize(
    ("there", "back"),
    [
        ("model.to(torch.bfloat16)", "model.float()"),
        ("model.half()", "model.to(torch.float32)"),
        ("model.to(dtype=weight_dtype)", "model.to(dtype=torch.float32)"),
    ],
)
def test_an_evaluation_round_trip_of_the_trained_model_is_reported(there: str, back: str) -> None:
    (d,) = findings(f"{there}\n        model(x)\n        {back}")
    assert (d.start.row, d.start.column) == (22, 9)
    assert f"back by `{back}`" in d.message
    assert "`optimizer.step()` (line 20) goes on training from them" in d.message


@pytest.mark.parametrize(
    "validation",
    [
        # a copy may be cast freely
        "copy.deepcopy(model).to(torch.bfloat16)(x)",
        # autocast evaluates in half; the weights stay float32
        'with torch.autocast("cuda", dtype=torch.bfloat16):\n            model(x)',
        # cast to half for good, never back: half training, not a round trip
        "model.half()",
    ],
)
def test_quiet_without_a_round_trip_of_the_trained_weights(validation: str) -> None:
    assert findings(validation) == []


def test_quiet_on_a_frozen_model_round_trip() -> None:
    body = LOOP.replace(
        "{validation}", "teacher.half()\n        teacher(x)\n        teacher.float()"
    )
    assert [
        d for d in check(HEADER + body.replace("(model,", "(model, teacher,")) if d.code == "MPC205"
    ] == []


def test_the_round_trip_through_the_cli(tmp_path: Path) -> None:
    source = tmp_path / "train.py"
    source.write_text(HEADER + LOOP.replace("{validation}", "model.half()\n        model.float()"))
    run = subprocess.run(
        [sys.executable, "-m", "mpcheck", "check", "--select", "MPC205", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "train.py:22:9: MPC205 warning:" in run.stdout, run.stdout + run.stderr


def test_quiet_on_a_round_trip_before_training_starts() -> None:
    body = """
def train(model, loader):
    model.to(torch.bfloat16)
    model.to(torch.float32)
    optimizer = torch.optim.AdamW(model.parameters())
    for x in loader:
        model(x).mean().backward()
        optimizer.step()
"""
    assert [d for d in check(HEADER + body) if d.code == "MPC205"] == []
