"""A fix reads only names bound where it goes: what counts as a read, and where."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ScopeProvider

from mpcheck.fix_names import unbound

SOURCE = """import torch
import torch.nn.functional as F

def helper(mask):
    bias = torch.where(mask > 0, 0.0, -1e10)
    loss = F.binary_cross_entropy(bias, mask)
    return torch.autocast("cuda", False)

def forward(scores, mask):
    return scores
"""


def first(module: cst.Module, kind: type[cst.CSTNode], text: str) -> cst.CSTNode:
    """The first ``kind`` node spelled ``text`` that is not a definition's name."""
    found: list[cst.CSTNode] = []

    class Find(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind) and module.code_for_node(node) == text:
                found.append(node)
            return not isinstance(node, (cst.Parameters, cst.AssignTarget))

    module.visit(Find())
    return found[0]


@pytest.mark.parametrize(
    ("kind", "replaced", "code", "missing"),
    [
        (cst.Float, "1e10", "torch.finfo(scores.dtype).max", {"scores"}),
        (cst.Float, "1e10", "torch.finfo(mask.dtype).max", set()),
        (cst.Name, "binary_cross_entropy", "binary_cross_entropy_with_logits", set()),
        (cst.Arg, "False", "enabled=False, dtype=torch.float16", set()),
        (cst.Arg, "False", "enabled=flag", {"flag"}),
        (cst.Name, "mask", "scores", {"scores"}),
        (cst.Float, "1e10", "abs(len(mask))", set()),  # builtins are bound everywhere
    ],
)
def test_names_a_fix_reads(
    kind: type[cst.CSTNode], replaced: str, code: str, missing: set[str]
) -> None:
    module = cst.parse_module(SOURCE)
    scopes = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    assert unbound(code, first(module, kind, replaced), scopes.get) == missing


@pytest.mark.parametrize(
    ("kind", "replaced", "code"),
    [
        (cst.Arg, "False", "enabled=False"),
        (cst.Call, 'torch.autocast("cuda", False)', 'torch.autocast("cuda", enabled=False)'),
    ],
)
def test_scopes_are_not_computed_for_a_fix_that_reads_nothing_new(
    kind: type[cst.CSTNode], replaced: str, code: str
) -> None:
    module = cst.parse_module(SOURCE)
    asked: list[cst.CSTNode] = []

    def scope_of(node: cst.CSTNode) -> None:
        asked.append(node)

    assert unbound(code, first(module, kind, replaced), scope_of) == set()
    assert asked == []
