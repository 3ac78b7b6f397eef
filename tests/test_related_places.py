"""Where a shown fact's dtype was decided in another file is looked up at report time only:
the walk keeps the facts it showed the rules (they are immutable) and a file with no finding
walks none of their origins (:meth:`mpcheck.engine.base.Walk.decided_at`)."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
import pytest

from mpcheck.engine.base import Walk
from mpcheck.project.summary import Place
from tests.support import check

QUIET = """
import torch

def f(x):
    return torch.relu(x.float()) + 1
"""

REPORTED = """
import torch
from torch import nn

class RMSNorm(nn.Module):
    def forward(self, x):
        variance = x.half().pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6)
"""


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many place lookups each check made, and with how many nodes."""
    asked: list[int] = []
    original = Walk.decided_at

    def counted(self: Walk, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, Place]:
        wanted = list(nodes)
        asked.append(len(wanted))
        return original(self, wanted)

    monkeypatch.setattr(Walk, "decided_at", counted)
    return asked


def test_a_file_with_no_finding_looks_up_no_place(lookups: list[int]) -> None:
    assert check(QUIET) == []
    assert lookups == []


def test_a_reported_finding_looks_up_its_own_nodes_once(lookups: list[int]) -> None:
    found = check(REPORTED)
    assert [d.code for d in found] == ["MPC302"]
    assert len(lookups) == 1 and lookups[0] >= 1


def test_after_the_first_finding_the_shown_facts_are_indexed_not_kept() -> None:
    """``Walk.found`` walks the facts shown so far and keeps their places only; facts shown
    afterwards are indexed as they come, and ``decided_at`` answers as from the kept facts:
    the first place shown for each wanted node."""
    from mpcheck.engine.analysis import FileAnalysis
    from mpcheck.engine.facts import Cause, Fact, Kind, Origin
    from mpcheck.project.names import ImportTable

    class Quiet:
        def wants(self, kind: str) -> bool:
            return False

        def deliver(self, kind: str, site: object) -> None:
            pass

    module = cst.parse_module("x = a\ny = b\n")
    a, b = cst.Name("a"), cst.Name("b")
    first, second = Place("u.py", 1, 1, "first"), Place("u.py", 2, 1, "second")

    def fact(node: cst.CSTNode, place: Place | None) -> Fact:
        via = Origin(node, Cause.LITERAL, "there", place=place)
        return Fact(Kind.TENSOR, origin=Origin(cst.Name("z"), Cause.LITERAL, "here", via=via))

    walk = FileAnalysis(module, ImportTable.of(module), Quiet(), source=b"x = a\ny = b\n")
    walk.shown((fact(a, first), fact(b, None)))
    walk.found()
    assert walk._shown is None
    walk.shown((fact(a, second), fact(b, second)))
    assert walk.decided_at([a, b]) == {a: first, b: second}
    assert walk.decided_at([b]) == {b: second}
    assert walk.decided_at([]) == {}
