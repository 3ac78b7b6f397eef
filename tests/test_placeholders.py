"""Size-0 placeholders (:mod:`mpcheck.engine.placeholders`): an attribute built empty and
rebuilt whenever a size test finds it too small never meets the data in its own dtype."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from mpcheck.engine.placeholders import empty, placeholder, rebuilt
from tests.support import check

HEADER = "import torch\nfrom torch import nn\n"  # lines 1-2


def _resolve(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return None


def _class(source: str) -> cst.ClassDef:
    found = cst.parse_module(textwrap.dedent(source)).body[0]
    assert isinstance(found, cst.ClassDef)
    return found


@pytest.mark.parametrize(
    ("code", "is_empty"),
    [
        ("torch.zeros(0)", True),
        ("torch.empty(0, d)", True),
        ("torch.zeros((b, 0, d))", True),
        ("torch.zeros(size=[0, d])", True),
        ("torch.full((0,), 1.0)", True),
        ("torch.tensor([])", True),
        ("torch.Tensor()", True),
        ("torch.zeros(1, d)", False),  # a length-1 input meets it as built
        ("torch.zeros(n, d)", False),
        ("torch.full((2,), 0)", False),  # 0 is the fill value, not a dim
        ("torch.tensor([0.0])", False),
        ("torch.zeros(*shape)", False),
        ("torch.arange(0)", False),  # not a shape-first factory
    ],
)
def test_an_empty_factory_has_a_literal_zero_in_its_shape(code: str, is_empty: bool) -> None:
    assert empty(cst.parse_expression(code), _resolve) is is_empty


FORWARD = """
class Pos(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.pe = torch.zeros(0, d)

    def forward(self, x):
        {test}
            self.pe = torch.ones(x.size(0), x.size(1), dtype=x.dtype)
        return x + self.pe[: x.size(0)]
"""


@pytest.mark.parametrize(
    ("test", "is_rebuilt"),
    [
        ("if self.pe.size(0) < x.size(0):", True),
        ("if self.pe.shape[0] <= x.shape[0]:", True),
        ("if self.pe.size(0) != x.size(0):", True),
        ("if x.shape[0] > self.pe.shape[0]:", True),  # the reversed form
        ("if len(self.pe) < len(x):", True),
        ("if self.pe.numel() == 0:", True),
        ("if self.pe is None or self.pe.size(0) < x.size(0):", True),
        ("if self.training and self.pe.size(0) < x.size(0):", False),  # not on every path
        ("if self.pe.size(0) > x.size(0):", False),  # rebuilt when big: not too small
        ("if self.pe.numel() == 4:", False),
        ("if self.pe.size(0) <= 0:", True),
        ("if self.pe.size(0) != 0:", False),  # rebuilt when it is not empty
        ("if self.pe.size(0) < 0:", False),
        ("if x.size(0) > 4:", False),  # no size of the table
    ],
)
def test_a_size_test_that_finds_it_too_small_rebuilds_it(test: str, is_rebuilt: bool) -> None:
    assert rebuilt(_class(FORWARD.format(test=test)), "pe") is is_rebuilt


def test_an_early_return_when_big_enough_guards_the_rebuild_after_it() -> None:
    source = """
    class Pos(nn.Module):
        def __init__(self, d):
            self.pe = torch.zeros(0, d)

        def extend_pe(self, x):
            if self.pe is not None:
                if self.pe.size(1) >= x.size(1) * 2 - 1:
                    if self.pe.dtype != x.dtype or self.pe.device != x.device:
                        self.pe = self.pe.to(dtype=x.dtype, device=x.device)
                    return
            self.pe = self.build(x).to(device=x.device, dtype=x.dtype)

        def late(self, x):
            self.pe = self.build(x)
            if self.pe.size(0) >= x.size(0): return
    """
    cls = _class(source)
    assert rebuilt(cls, "pe")
    init = cls.body.body[0]
    assert isinstance(init, cst.FunctionDef)
    stmt = init.body.body[0]
    assert isinstance(stmt, cst.SimpleStatementLine)
    assign = stmt.body[0]
    assert isinstance(assign, cst.Assign)
    assert placeholder(cls, "pe", assign.value, _resolve)
    # a rebuild before the test, with no rebuild after it, is no guarded one
    late_only = source.replace("            self.pe = self.build(x).to", "            y = (x).to")
    assert not rebuilt(_class(late_only), "pe")


@pytest.mark.parametrize(
    ("test", "is_rebuilt"),
    [
        ("if self.pe.size(0) >= x.size(0): return", True),
        ("if self.pe.size(0) > 0: return", True),  # returns only once it is filled
        ("if self.pe.size(0) == 0: return", False),  # returns while it is empty
        ("if self.pe.size(0) >= 0: return", False),  # always returns
        ("if self.pe.size(0) >= x.size(0): pass", False),  # no return
    ],
)
def test_an_early_return_must_skip_only_a_filled_table(test: str, is_rebuilt: bool) -> None:
    source = f"""
    class Pos(nn.Module):
        def __init__(self, d):
            self.pe = torch.zeros(0, d)

        def extend(self, x):
            {test}
            self.pe = self.build(x)
    """
    assert rebuilt(_class(source), "pe") is is_rebuilt


def test_a_rebuild_in_a_method_the_test_calls_counts() -> None:
    source = """
    class Pos(nn.Module):
        def __init__(self, d):
            self.pe = torch.zeros(0, d)

        def grow(self, n, dtype):
            self.pe = torch.ones(n, 4, dtype=dtype)

        def forward(self, x):
            if self.pe.size(0) < x.size(0):
                self.grow(x.size(0), x.dtype)
            return x + self.pe[: x.size(0)]
    """
    assert rebuilt(_class(source), "pe")


@pytest.mark.parametrize(
    "use",
    [
        "self.pe = torch.ones(x.size(0), x.size(1), dtype=self.pe.dtype)",
        "self.pe = self.pe.new_ones(x.size(0), x.size(1))",
        "self.pe = torch.cat([self.pe, x])",
        "self.pe = x.to(self.pe)",
    ],
)
def test_a_class_that_reads_the_placeholder_dtype_keeps_it(use: str) -> None:
    source = FORWARD.format(test="if self.pe.size(0) < x.size(0):").replace(
        "self.pe = torch.ones(x.size(0), x.size(1), dtype=x.dtype)", use
    )
    assert not rebuilt(_class(source), "pe")


def _findings(body: str) -> list[str]:
    return [d.code for d in check(HEADER + textwrap.dedent(body)) if d.code.startswith("MPC1")]


PLAIN = """
class Pos(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.pe = torch.zeros({rows}, dim)

    def forward(self, x):
        if x.size(0) > self.pe.size(0):
            self.pe = torch.ones(x.size(0), x.size(1)).to(x.dtype)
        return self.proj(x) @ self.pe[: x.size(0)].T


model = Pos().half()
"""


def test_a_size_0_attribute_rebuilt_in_the_input_dtype_is_no_finding() -> None:
    assert _findings(PLAIN.format(rows=0)) == []


def test_a_size_1_attribute_meets_a_length_1_input_as_built() -> None:
    assert _findings(PLAIN.format(rows=1)) == ["MPC102"]


REGISTERED = """
from diffusers import ModelMixin


class Pos(ModelMixin):
    def __init__(self, dim=8):
        super().__init__()
        self.dim = dim
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("pe", torch.zeros({rows}, dim, dtype=torch.float32), persistent=False)

    def extend(self, x):
        if self.pe.size(0) >= x.size(0):
            return
        self.pe = torch.ones(x.size(0), self.dim).to(x.dtype)

    def forward(self, x):
        self.extend(x)
        return self.proj(x) + self.pe[: x.size(0)]


model = Pos.from_pretrained("p", torch_dtype=torch.float16)
"""


def test_a_registered_size_0_buffer_rebuilt_before_use_is_no_finding() -> None:
    # (non-persistent and float32 in a class ``from_pretrained`` loads: built, it stays float32)
    assert _findings(REGISTERED.format(rows=0)) == []
    assert _findings(REGISTERED.format(rows=4)) == ["MPC102"]
