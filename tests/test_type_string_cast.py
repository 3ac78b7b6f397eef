"""``x.type(q.type())``: a cast to the dtype ``q``'s type string names (``'torch.HalfTensor'``)."""

from __future__ import annotations

from tests.support import check

SOURCE = """
import torch
from torch import nn


class Pad(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        pad = torch.zeros(x.shape[0], 2, 8, device=x.device){cast}
        return self.proj(torch.cat([x, pad], dim=1))


model = Pad().half()
out = model(torch.randn(2, 3, 8, dtype=torch.float16))
"""


def codes(cast: str) -> list[str]:
    return [d.code for d in check(SOURCE.replace("{cast}", cast))]


def test_a_cast_to_a_tensors_type_string_takes_its_dtype() -> None:
    assert "MPC102" in codes("")  # float32 padding meets the half activations
    assert codes(".type(x.type())") == []
    assert codes(".type(x.dtype)") == []
