"""Every fix of every fixture, applied together, leaves sound code behind.

The fixed file compiles, reads no name pyflakes cannot find, and re-checking it finds
nothing that was not found before: rules never contradict each other's fixes.
``bench/fix_closure.py`` runs the same check over the library corpora.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules
from tests.support import ROOT, check_fixture, fixture_files

_spec = importlib.util.spec_from_file_location("fix_closure", ROOT / "bench" / "fix_closure.py")
assert _spec is not None and _spec.loader is not None
closure = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(closure)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixes_leave_sound_code(path: Path) -> None:
    fixed, problems = closure.close(path.read_bytes(), str(path), check_fixture(path))
    assert problems == []


def test_a_fix_reading_a_name_that_is_not_there_is_not_offered() -> None:
    """LongT5's side bias: the write that decides the dtype is in another method."""
    source = b"""import torch

class Attention(torch.nn.Module):
    def side_bias(self, mask):
        return torch.where(mask > 0, 0.0, -1e10)

    def forward(self, q, k, mask):
        scores = q @ k.transpose(-1, -2)
        bias = self.side_bias(mask)
        return scores + bias.type(scores.dtype)
"""
    found = check_source(source, "attention.py", all_rules())
    assert [(d.code, d.start.row, d.fix) for d in found] == [("MPC301", 5, None)]
