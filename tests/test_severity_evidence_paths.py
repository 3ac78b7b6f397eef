"""Severity follows evidence in MPC104's paths beyond the direct call and in MPC105's ambient
path (issue 36, "What to build" 2): an error needs evidence that half (or autocast) reaches
the op; a finding resting on the premise alone is a warning that says so; evidence of
float32 gives nothing."""

from __future__ import annotations

import pytest

from mpcheck.diagnostics import Severity
from tests.support import check

ADAPTER = """
import torch
import torch.nn.functional as F
from torch import nn


class LoraLinear(nn.Module):
    adapter_layer_names = ("lora_A",)

    def __init__(self, base):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.ParameterDict(
            {"default": nn.Parameter(torch.zeros(4, 16, dtype=torch.float32))}
        )

    def forward(self, x):
        return self.base_layer(x) + F.linear(x, self.lora_A["default"])
{tail}
"""

NOISE = """
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 32)

    def forward(self, x):
        return self.backbone(x)

    def perturb(self, std):
        noise = torch.randn(self.backbone.weight.shape) * std
        self.backbone.weight.data = self.backbone.weight.data + noise
{tail}
"""

CACHE = """
import torch
from torch import nn


class CachedAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, cache_k, positions):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        cache_k.index_copy_(1, positions, k)
        return q
{tail}
"""
HALF_TAILS = {
    "LoraLinear": "\n\ndef main():\n    model = LoraLinear(nn.Linear(16, 4)).half()\n",
    "Classifier": "\n\ndef main():\n    model = Classifier().half()\n",
}
AUTOCAST_TAIL = """

def main():
    model = CachedAttention(8)
    with torch.autocast("cuda", dtype=torch.float16):
        model(torch.randn(1, 4, 8), torch.zeros(1, 16, 8), torch.arange(4))
"""
FLOAT32_TAIL = """

def main():
    model = CachedAttention(8)
    model(torch.randn(1, 4, 8), torch.zeros(1, 16, 8), torch.arange(4))
"""


def found(source: str, code: str) -> list[tuple[Severity, str]]:
    return [(d.severity, d.message) for d in check(source) if d.code == code]


@pytest.mark.parametrize(
    ("template", "cls"),
    [(ADAPTER, "LoraLinear"), (NOISE, "Classifier")],
    ids=["functional-adapter", "weight-store"],
)
def test_mpc104_premise_alone_is_a_latent_warning(template: str, cls: str) -> None:
    [(severity, message)] = found(template.replace("{tail}", ""), "MPC104")
    assert severity is Severity.WARNING
    assert message.endswith(f"(latent: raises if `{cls}` runs in half without autocast)")


@pytest.mark.parametrize(
    ("template", "cls"),
    [(ADAPTER, "LoraLinear"), (NOISE, "Classifier")],
    ids=["functional-adapter", "weight-store"],
)
def test_mpc104_with_a_half_cast_in_the_project_is_an_error(template: str, cls: str) -> None:
    tail = HALF_TAILS[cls]
    [(severity, message)] = found(template.replace("{tail}", tail), "MPC104")
    assert severity is Severity.ERROR
    assert f"(half: `{cls}` is cast to half" in message


def test_mpc105_ambient_premise_alone_is_a_warning() -> None:
    [(severity, message)] = found(CACHE.format(tail=""), "MPC105")
    assert severity is Severity.WARNING
    assert message.startswith("if `forward` runs under autocast")


def test_mpc105_ambient_with_autocast_at_every_call_is_an_error() -> None:
    [(severity, message)] = found(CACHE.format(tail=AUTOCAST_TAIL), "MPC105")
    assert severity is Severity.ERROR
    assert message.startswith("under autocast, `k` is float16")
    assert "every call runs under" in message


def test_mpc105_ambient_in_a_project_that_never_names_half_is_silent() -> None:
    assert found(CACHE.format(tail=FLOAT32_TAIL), "MPC105") == []
