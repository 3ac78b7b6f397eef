"""engine.phases.bound_before: what a name holds at a cast is what its last binding before the
cast gave it (``t = self.timesteps_proj(t)``), looking through reshapes of itself and giving
up where a branch or loop may rebind it otherwise."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine.phases import bound_before


def _last_cast(body: str) -> tuple[cst.FunctionDef, cst.Call]:
    module = cst.parse_module(f"def f(self, t, x, n):\n{body}    return t.to(x.dtype)\n")
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    last = function.body.body[-1]
    assert isinstance(last, cst.SimpleStatementLine)
    ret = last.body[0]
    assert isinstance(ret, cst.Return) and isinstance(ret.value, cst.Call)
    return function, ret.value


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ("    t = self.timesteps_proj(t)\n", "self.timesteps_proj(t)"),
        ("    t = self.proj(t)\n    t = t.unflatten(0, (-1, n))\n", "self.proj(t)"),
        ("    t = self.proj(t)\n    if n:\n        t = t.view(-1)\n", "self.proj(t)"),
        ("    t = self.proj(t)\n    y: int = 3\n", "self.proj(t)"),
        ("", None),  # the parameter
        ("    t = self.proj(t)\n    if n:\n        t = self.shift(t)\n", None),
        ("    t = self.proj(t)\n    for t in x:\n        pass\n", None),
        ("    t = self.proj(t)\n    t *= 1000\n", None),
        ("    t = self.proj(t)\n    t, y = x, n\n", None),
    ],
)
def test_the_binding_that_reaches_a_cast(body: str, value: str | None) -> None:
    function, cast = _last_cast(body)
    found = bound_before(function, cast, "t")
    assert (None if found is None else cst.Module([]).code_for_node(found)) == value


def test_a_cast_in_a_nested_block_sees_the_bindings_before_each_enclosing_block() -> None:
    """The path down to the cast goes through the blocks holding it: the statements before
    the cast in its own block first, then those before each enclosing statement."""
    module = cst.parse_module(
        "def f(self, t, x, n):\n"
        "    t = self.proj(t)\n"
        "    with ctx():\n"
        "        if n:\n"
        "            y = g(t.to(x.dtype))\n"
    )
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    calls = [n for n in _every(function) if isinstance(n, cst.Call)]
    cast = next(c for c in calls if isinstance(c.func, cst.Attribute) and c.func.attr.value == "to")
    found = bound_before(function, cast, "t")
    assert found is not None and cst.Module([]).code_for_node(found) == "self.proj(t)"


def test_a_node_outside_the_function_is_bound_to_nothing() -> None:
    function, _ = _last_cast("    t = self.proj(t)\n")
    _, elsewhere = _last_cast("    t = self.proj(t)\n")
    assert bound_before(function, elsewhere, "t") is None


def _every(root: cst.CSTNode) -> list[cst.CSTNode]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children)
    return found
