"""engine.aliases and engine.tensor_use look node classes up by identity (``type(node) is``):
libcst's node classes are ABCs, whose ``isinstance`` was most of these per-function walks'
cost. That is the same answer only while none of those classes has a subclass."""

from __future__ import annotations

import libcst as cst

from mpcheck.engine import aliases, tensor_use
from mpcheck.engine.aliases import function_aliases
from mpcheck.engine.tensor_use import tensor_uses


def _subclasses(kind: type) -> list[type]:
    found, stack = [], [kind]
    while stack:
        for sub in stack.pop().__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def test_the_classes_looked_up_by_identity_have_no_subclass() -> None:
    by_identity = {*aliases._OWN_SCOPE, *aliases._TARGETED, cst.Assign, cst.With}
    by_identity |= {cst.Attribute, cst.Subscript, cst.BinaryOperation, cst.MatrixMultiply}
    by_identity |= {cst.Name}
    assert tensor_use.cst is cst and aliases.cst is cst
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
