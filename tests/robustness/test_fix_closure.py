"""Every fix of every fixture, applied together, leaves sound code behind.

The fixed file compiles, reads no name pyflakes cannot find, and re-checking it finds
nothing that was not found before: rules never contradict each other's fixes.
``bench/fix_closure.py`` runs the same check over the library corpora.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mpcheck.diagnostics import Edit
from mpcheck.files.source import SourceFile
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


BLOCK = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(4, 4))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        scale = torch.ones(4)
        mask = torch.where(x > 0, 0.0, 1.0)
        t = x * 2
        return self.head(t * scale + mask)


scaler = torch.cuda.amp.GradScaler()
"""


@pytest.mark.parametrize(
    ("old", "new", "target", "problem"),
    [
        (
            "torch.ones(4)",
            "torch.ones(4, dtype=t.dtype)",
            None,
            "reads `t` where it may be unbound",
        ),
        ("torch.ones(4)", "torch.ones(4, dtype=x.dtype)", None, None),
        (
            "self.head(t",
            "self.head.weight.dtype; self.head(t",
            None,
            "`.weight` of a `torch.nn.Sequential`",
        ),
        ("torch.ones(4)", "torch.ones(4, dtype=self.proj.weight.dtype)", None, None),
        ("1.0)", "1.0, dtype=x.dtype)", None, "passes `dtype=` to `torch.where`"),
        ("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")', (2, 1), "(torch (2, 3))"),
        ("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")', (2, 4), None),
    ],
)
def test_the_closure_check_finds_a_fix_that_cannot_run(
    old: str, new: str, target: tuple[int, int] | None, problem: str | None
) -> None:
    """The shapes of the fixes that failed on public repositories (issue 34 item 8, issue 38
    item 6): the check over the corpora must catch each of them."""
    source = SourceFile.from_text(BLOCK)
    start = BLOCK.index(old)
    edit = Edit(new, source.position(start), source.position(start + len(old)))
    found = closure.fix_problems(source, [edit], target)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found
