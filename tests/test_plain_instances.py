"""Objects of plain classes of the file (a KV cache kept by a class that is no module):
their attributes, their methods called through an instance, and a factory's float32 that
such a method joins, on one of its paths, with the activations it is handed."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import libcst as cst

from mpcheck.engine.facts import (
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    join,
    joined_with_arguments,
    one_path_factory,
    promote,
    tensor_or_none,
)
from tests.support import check
from tests.test_analysis import one, probe

NODE = cst.Name("x")
DEFAULT = Fact(Kind.TENSOR, origin=Origin(NODE, Cause.FACTORY, "made"), maybe=True, defaulted=True)
ARGUMENT = Fact(Kind.TENSOR, origin=Origin(cst.Param(cst.Name("k")), Cause.ACTIVATION, "k"))

CACHE = """
class Cache:
    def __init__(self, n, k=None):
        self.k = torch.zeros(1, n, 8) if k is None else k
        self.length = 0

    def read(self, k):
        if self.length == 0:
            return k
        return torch.cat((self.k[:, : self.length], k), dim=1)
"""


def test_a_none_tested_argument_beside_a_tensor_default_is_a_tensor() -> None:
    assert tensor_or_none(Fact(Kind.OTHER, params=frozenset({1})), DEFAULT).params == {1}
    assert tensor_or_none(Fact(Kind.OTHER), DEFAULT).is_tensor
    assert not tensor_or_none(Fact(Kind.OTHER), Fact(Kind.SCALAR)).is_tensor


def test_a_one_path_default_stays_through_a_helper_argument() -> None:
    """``torch.cat((self.k, k))`` with a ``k`` the caller decides: the default's path stays,
    tied to the argument, and a join with the argument's own path keeps it."""
    given = Fact(Kind.TENSOR, params=frozenset({0}))
    made = promote([DEFAULT, given], NODE)
    assert joined_with_arguments(made) and made.params == {0}
    argument = replace(ARGUMENT, params=frozenset({0}))
    assert join(argument, made).origin is DEFAULT.origin
    assert not one_path_factory(promote([DEFAULT, Fact(Kind.TENSOR)], NODE))  # no argument
    own = replace(DEFAULT, params=frozenset({1}))  # ``if past is None: past = zeros(...)``
    assert not joined_with_arguments(promote([own, given], NODE))


def test_an_init_default_in_an_if_expression_or_statement_is_kept() -> None:
    for init in (
        "self.k = torch.zeros(1, n, 8) if k is None else k",
        "self.k = k if k is not None else torch.zeros(1, n, 8)",
        "if k is None:\n    k = torch.zeros(1, n, 8)\nself.k = k",
    ):
        init_body = textwrap.indent(init, " " * 8).lstrip()
        fact = one(
            "class Cache:\n    def __init__(self, n, k=None):\n"
            f"        {init_body}\n\n    def show(self):\n        probe.at(self.k)\n"
        )
        assert fact.defaulted and fact.maybe and fact.cause is Cause.FACTORY, init


def test_an_instance_answers_attributes_and_method_calls() -> None:
    for make in ("cache = Cache(4)", "cache = self.cache"):
        fact = one(
            CACHE
            + f"""
class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.cache = Cache(4)

    def forward(self, x):
        {make}
        probe.at(cache.read(self.proj(x)))
"""
        )
        assert fact.prec is Prec.FULL and fact.maybe and fact.cause is Cause.FACTORY, make
        assert "returned by `read`" in fact.origin.text  # type: ignore[union-attr]


def test_an_annotated_parameter_is_an_instance() -> None:
    source = (
        CACHE
        + """
class Attn(nn.Module):
    def forward(self, x, cache: Optional[Cache] = None):
        probe.at(cache.k)
        probe.at(cache.read(x))
"""
    )
    attr, read = probe(source)
    assert one_path_factory(attr) and attr.defaulted
    assert read.prec is Prec.FULL and read.maybe


def test_an_argument_passed_for_its_own_default_is_not_the_default() -> None:
    """``past`` given: the ``torch.zeros`` it would default to is never made."""
    fact = one(
        """
        class Cache:
            def read(self, k, past=None):
                if past is None:
                    past = torch.zeros(1, 4, 8)
                return torch.cat((past, k), dim=1)

        class Attn(nn.Module):
            def forward(self, x, cache: Cache):
                probe.at(cache.read(x, past=x))
        """
    )
    assert fact.prec is Prec.MODEL


def test_a_helper_argument_of_unknown_dtype_keeps_the_default_unknown() -> None:
    fact = one(
        CACHE
        + """
def run(cache: Cache, mask: torch.Tensor):
    probe.at(cache.read(mask))
"""
    )
    assert fact.prec is not Prec.FULL


ATTENTION = """
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.upcast = False

    def forward(self, x, cos=None, rotary=False):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if {outer}:
            if rotary:
                q = q.float() * cos
        return F.scaled_dot_product_attention(q, k, v)
"""


def test_a_path_inside_a_path_is_reported_with_both_tests() -> None:
    found = check(textwrap.dedent(ATTENTION.format(outer="cos is not None")))
    assert [(d.code, d.start.row) for d in found] == [("MPC103", 18)]
    assert "on the path where `cos is not None` and `rotary`" in found[0].message


def test_a_path_inside_a_precision_switch_is_left_alone() -> None:
    assert check(textwrap.dedent(ATTENTION.format(outer="self.upcast"))) == []
