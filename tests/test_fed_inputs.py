"""Which inputs a module's ``forward`` hands to its own layers, as the summary tells another
file (``ClassSummary.fed_inputs``): every input that reaches a layer of the model's dtype as
it came, alone or in arithmetic with the others, and none once it is cast. The CLI side is
``fixtures/xfile/*_fused_residual_input`` (tests/test_xfile.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcheck.project import summarise
from mpcheck.project.summarise import FileSummariser

FUSION = """\
import torch
from torch import nn


class Fusion(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 1)

    def forward(self, x, residual, scale=None):
        {body}
"""


@pytest.fixture
def fresh() -> Iterator[None]:
    summarise.forget()
    yield
    summarise.forget()


@pytest.mark.parametrize(
    ("body", "fed"),
    [
        ("return self.conv(x + residual)", (0, 1)),
        ("return self.conv(residual * 2)", (1,)),
        ("return self.conv(x) + residual", (0,)),  # the residual joins after the layer
        ("return self.conv(x + residual.to(x.dtype))", (0,)),  # cast to the input's dtype
        ("return self.conv((x + residual).float())", ()),
        ("return x + residual", ()),  # no weights
    ],
)
def test_the_summary_lists_every_input_forward_feeds_its_layers(
    tmp_path: Path, fresh: None, body: str, fed: tuple[int, ...]
) -> None:
    (tmp_path / "fusion.py").write_text(FUSION.format(body=body))
    summary = FileSummariser(tmp_path).summarise(tmp_path / "fusion.py", lambda *a: None)
    assert summary is not None
    assert summary.classes["Fusion"].fed_inputs == fed
    again = type(summary).from_json(summary.to_json())
    assert again is not None and again.classes["Fusion"].fed_inputs == fed
