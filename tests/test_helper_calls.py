"""Calls whose callee is decided by the code around them, checked through the CLI: a local
name bound to functions (``attn_fn = a if split else b``), a parameter annotated with a
project module class (``norm_module: RMSNorm``), and a helper handed a tensor that a factory
made on one path (``k`` from a float32 cache on the cache's path). The whole case, across
files, is ``fixtures/xfile/*_helper_cache_keys`` (tests/test_xfile.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support import project_findings as findings

HEAD = """
import torch
from torch import nn


def upcast(x):
    return x.float()


def scaled(x):
    return x * 2


def widened(x):
    return x.to(torch.float32)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
{body}


model = Head().half()
"""


def head(body: str) -> str:
    return HEAD.format(body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8))


def test_a_local_name_bound_to_a_function_calls_it(tmp_path: Path) -> None:
    source = head("""
        fn = upcast
        return self.proj(fn(x))
    """)
    assert findings(tmp_path, {"head.py": source}) == {("head.py", 24, "MPC101")}


@pytest.mark.parametrize(
    "body",
    [
        # rebound by a loop, a parameter or a ``with``: any callable
        "for fn in (upcast, scaled):\n    x = fn(x)\nreturn self.proj(fn(x))",
        "fn = upcast\nfn = getattr(self, 'post', scaled)\nreturn self.proj(fn(x))",
        "fn = upcast\nwith torch.no_grad() as fn:\n    pass\nreturn self.proj(fn(x))",
    ],
)
def test_a_name_bound_otherwise_is_not_followed(tmp_path: Path, body: str) -> None:
    assert findings(tmp_path, {"head.py": head(body)}) == set()


def test_a_conditional_between_functions_is_either(tmp_path: Path) -> None:
    source = head("""
        fn = upcast if self.training else widened
        return self.proj(fn(x))
    """)
    assert findings(tmp_path, {"head.py": source}) == {("head.py", 24, "MPC101")}


NORM = """
import torch
from torch import nn


class Fp32Out(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x.float() * self.w.float()
"""

USER = """
from torch import nn

from .norm import Fp32Out


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = Fp32Out()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(self.normalise(x, self.norm))

    def normalise(self, x, norm_module: {annotation}):
        return norm_module(x)


model = Block().half()
"""


def test_a_parameter_annotated_with_a_project_module_runs_its_forward(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "", "pkg/norm.py": NORM}
    found = findings(tmp_path, {**files, "pkg/block.py": USER.format(annotation="Fp32Out")})
    assert found == {("block.py", 13, "MPC101")}


def test_a_parameter_annotated_otherwise_stays_unknown(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "", "pkg/norm.py": NORM}
    assert findings(tmp_path, {**files, "pkg/block.py": USER.format(annotation="object")}) == set()
