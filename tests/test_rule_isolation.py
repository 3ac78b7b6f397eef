"""A rule that raises is switched off for that file and named in one MPC002; the other
rules' findings on the file are kept (one rule's bug must not cost a file its findings)."""

from __future__ import annotations

from mpcheck.api import CallSite, Rule
from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules

SOURCE = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x.float())
"""


class Broken(Rule):
    code = "MPC999"
    name = "broken"
    summary = "Raises on every call."

    def check_call(self, call: CallSite) -> None:
        raise ValueError("boom")


def test_a_raising_rule_is_named_and_the_others_still_report() -> None:
    rules = [*all_rules(), Broken]
    found = check_source(SOURCE, "t.py", rules)
    codes = sorted(d.code for d in found)
    assert codes == ["MPC002", "MPC101"]
    (failure,) = [d for d in found if d.code == "MPC002"]
    assert "rule MPC999 failed on this file (ValueError: boom)" in failure.message
    assert (failure.start.row, failure.start.column) == (1, 1)


def test_without_the_broken_rule_nothing_is_reported_about_rules() -> None:
    assert [d.code for d in check_source(SOURCE, "t.py", all_rules())] == ["MPC101"]
