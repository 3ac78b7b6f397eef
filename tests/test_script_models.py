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
