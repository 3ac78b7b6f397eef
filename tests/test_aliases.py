"""engine.body_uses (the one walk behind engine.aliases and engine.tensor_use) looks node
classes up by identity (``type(node) is``): libcst's node classes are ABCs, whose
``isinstance`` was most of these per-function walks' cost. That is the same answer only
while none of those classes has a subclass."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine import body_uses
from mpcheck.engine.aliases import function_aliases
from mpcheck.engine.body_uses import BodyUses
from mpcheck.engine.tensor_use import tensor_uses
from tests.support import check


def _subclasses(kind: type) -> list[type]:
    found, stack = [], [kind]
    while stack:
        for sub in stack.pop().__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def test_the_classes_looked_up_by_identity_have_no_subclass() -> None:
    by_identity = {*body_uses.OWN_SCOPE, *body_uses.TARGETED, cst.Assign, cst.With}
    by_identity |= {cst.Attribute, cst.Subscript, cst.BinaryOperation, cst.MatrixMultiply}
    by_identity |= {cst.Name}
    assert body_uses.cst is cst
    assert {k: _subclasses(k) for k in by_identity} == {k: [] for k in by_identity}


def test_the_walks_still_see_every_kind_of_node() -> None:
    code = (
        "def f(x, w, split):\n"
        "    fn = a if split else b\n"
        "    other = a\n"
        "    other += 1\n"
        "    for loop in []: pass\n"
        "    with g() as held: pass\n"
        "    held = a\n"
        "    def inner():\n"
        "        nested = a\n"
        "    y = x.view(-1) + w[0] + (x @ w)\n"
        "    return fn(x, w)\n"
    )
    function = cst.parse_module(code).body[0]
    assert isinstance(function, cst.FunctionDef)
    found = function_aliases(function)
    assert {name: [n.value for n in names] for name, names in found.items()} == {"fn": ["a", "b"]}
    assert tensor_uses(function, frozenset({"x", "w", "split"})) == {"x", "w"}


def test_nested_scopes_use_tensors_but_bind_for_themselves() -> None:
    code = (
        "def f(x, w, n):\n"
        "    pick = a if n else b\n"
        "    def inner():\n"
        "        pick = x\n"
        "        other = a\n"
        "        return w[0]\n"
        "    g = lambda: x.view(-1)\n"
        "    return pick(n)\n"
    )
    function = cst.parse_module(code).body[0]
    assert isinstance(function, cst.FunctionDef)
    found = function_aliases(function)
    assert {name: [n.value for n in names] for name, names in found.items()} == {"pick": ["a", "b"]}
    assert tensor_uses(function, frozenset({"x", "w", "n"})) == {"x", "w"}


def test_a_check_walks_each_function_body_once_for_both_questions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``fn(x, w)`` through an alias and the tensor uses of the same function: one walk."""
    walked: list[str] = []
    real = body_uses.body_uses

    def counted(fn: cst.FunctionDef) -> BodyUses:
        walked.append(fn.name.value)
        return real(fn)

    monkeypatch.setattr("mpcheck.engine.functions.body_uses", counted)
    check(
        "import torch\n"
        "def a(x, w):\n    return x @ w\n"
        "def b(x, w):\n    return x * w\n"
        "def run(x, w, split):\n"
        "    fn = a if split else b\n"
        "    return fn(x.half(), w) + fn(x, w)\n",
        filename="t_once.py",
    )
    assert "run" in walked
    assert sorted(walked) == sorted(set(walked))
