"""An unknown callee's result (issue 36, "Wrong kinds": MPC105 on a kernel's bfloat16 output
whose dtype was taken from its float32 scale argument). A custom op (``torch.ops.<ns>.<op>``,
a kernel or an extension registered with torch) is no torch function of the op table: its
result has no argument's dtype, so nothing is reported on it. What the code does to that
result (``.float()``), or what a summary of the project's own wrapper says it returns, is
still known."""

from __future__ import annotations

import textwrap

from tests.support import check

BLOCK = """
import torch
from torch import nn


def fp32_mm(x, w, scale):
    return torch.empty(x.shape[0], w.shape[0], dtype=torch.float32)


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.register_buffer("cache", torch.zeros(4, n))
        self.scale = torch.ones(n, dtype=torch.float32)

    def forward(self, x, idx):
        h = self.proj(x)
        {line}
        self.cache.index_copy_(0, idx, out)
        return out
"""


def codes(line: str) -> list[tuple[str, int]]:
    return [(d.code, d.start.row) for d in check(BLOCK.format(line=textwrap.dedent(line)))]


def test_a_custom_ops_result_does_not_take_its_scale_arguments_dtype() -> None:
    assert codes("out = torch.ops.mylib.scaled_mm(h, self.proj.weight, self.scale)") == []


def test_an_extension_call_is_unknown_too() -> None:
    assert codes("out = torch.ops.fbgemm.f8f8bf16(h, self.proj.weight, self.scale)") == []


def test_a_cast_of_the_custom_ops_result_is_still_known() -> None:
    line = "out = torch.ops.mylib.scaled_mm(h, self.proj.weight, self.scale).float()"
    assert codes(line) == [("MPC105", 20)]


def test_a_wrapper_whose_summary_returns_float32_is_still_reported() -> None:
    """The project's own kernel wrapper: its summary says float32, whatever its arguments."""
    assert codes("out = fp32_mm(h, self.proj.weight, self.scale)") == [("MPC105", 20)]
