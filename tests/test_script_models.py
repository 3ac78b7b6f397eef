"""A script that runs a model it cast to half: when its input must be half too."""

from __future__ import annotations

import textwrap

import pytest

from tests.support import check

SCRIPT = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(8, 8)
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        return self.head(self.block({input}))


def main():
    model = Net().half()
    {extra}
    x = torch.randn(2, 8)
    {call}
"""
PLAIN = {"input": "x", "extra": "pass", "call": "model(x)"}


def codes(change: dict[str, str]) -> list[tuple[str, int]]:
    source = textwrap.dedent(SCRIPT.format(**{**PLAIN, **change}))
    return [(d.code, d.start.row) for d in check(source)]


def test_a_float32_input_into_the_files_own_half_model_is_reported() -> None:
    assert codes({}) == [("MPC102", 19)]


@pytest.mark.parametrize(
    "change",
    [
        {"call": "with torch.autocast('cuda', dtype=torch.float16):\n        model(x)"},
        {"input": "x.to(self.block.weight.dtype)"},  # the model casts what it is given
        {"extra": "model.block.float()"},  # a part cast apart: MPC104's case, not this one
    ],
)
def test_autocast_a_casting_forward_or_a_split_model_is_not_reported(
    change: dict[str, str],
) -> None:
    assert ("MPC102", 19) not in codes(change)


TWO_MODELS = """
import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 4)
        self.conv = nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, z):
        return self.conv({decoder_input})


def main():
    denoiser = Denoiser().to(torch.float16)
    decoder = {decoder}
    latents = denoiser(torch.randn(1, 4, 8, 8, dtype=torch.float16))
    {call}
"""
TWO_PLAIN = {"decoder_input": "z", "decoder": "Decoder()", "call": "decoder(latents)"}


def two_models(change: dict[str, str]) -> list[tuple[str, int]]:
    source = textwrap.dedent(TWO_MODELS.format(**{**TWO_PLAIN, **change}))
    return [(d.code, d.start.row) for d in check(source)]


def test_a_half_models_output_into_a_float32_model_is_reported() -> None:
    """The denoiser's output is half (this instance's dtype, outside model code); the
    decoder, only ever built in float32, hands it to a float32 conv, which raises."""
    assert two_models({}) == [("MPC104", 29)]
    # through a norm first: a float32 norm returns the half input's dtype, the conv raises
    assert two_models({"decoder_input": "self.norm(z)"}) == [("MPC104", 29)]


@pytest.mark.parametrize(
    "change",
    [
        {"call": "decoder(latents.float())"},  # cast at the call
        {"decoder_input": "z.float()"},  # the decoder casts its input itself
        {"decoder": "Decoder().half()"},  # both models half
        {"call": "with torch.autocast('cuda'):\n        decoder(latents)"},  # autocast recasts
    ],
)
def test_a_half_input_a_float32_model_takes_is_quiet(change: dict[str, str]) -> None:
    assert two_models(change) == []
