"""engine.timestep_uses: a cast timestep counts when it reaches a call as a timestep, not when
it is first mixed with another tensor (a noise scaling, a loss weighting)."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.engine.timestep_uses import only_mixed


def _cast_in(body: str) -> tuple[cst.Call, cst.FunctionDef]:
    function = cst.parse_module(f"def f(t, x, model):\n    c = t.to(x.dtype)\n{body}").body[0]
    assert isinstance(function, cst.FunctionDef)
    first = function.body.body[0]
    assert isinstance(first, cst.SimpleStatementLine)
    assign = first.body[0]
    assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
    return assign.value, function


@pytest.mark.parametrize(
    ("body", "mixed"),
    [
        ("    return x * c\n", True),
        ("    d = c / 1000\n    y = x + d.view(-1, 1)\n", True),
        ("    print(len(c.shape))\n", True),
        ("    y = (1.0 - (1.0 - 1e-6) * c) * x\n", True),
        ("    return c\n", False),
        ("    model(x, timestep=c / steps)\n", False),
        ("    d = c * self.config.scale\n    model(x, d)\n", False),
        ("    return model(x, c * 1000)\n", False),
        ("    d = -c\n    e = torch.clamp(d, min=0)\n    model(e)\n", False),
        ("    out = {'t': c}\n", False),
        ("    x[0] = c\n", False),
    ],
)
def test_where_a_cast_timestep_goes(body: str, mixed: bool) -> None:
    assert only_mixed(*_cast_in(body)) is mixed


def _visitor_parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    seen: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if stack:
                seen[node] = stack[-1]
            stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            stack.pop()

    module.visit(Collect())
    return seen


def test_the_parent_map_is_the_one_libcst_visitor_sees() -> None:
    """The plain walk gives every code node the parent libcst's visitor gives it (trivia
    holds no code), over every fixture of the timestep rule and this module's own source."""
    from pathlib import Path

    from mpcheck.engine import timestep_uses
    from mpcheck.project.names import descendants

    sources = [*sorted(Path("fixtures/mpc303").glob("*.py")), Path(timestep_uses.__file__)]
    assert len(sources) > 3
    for source in sources:
        module = cst.parse_module(source.read_bytes())
        seen = _visitor_parents(module)
        code = set(descendants(module)) - {module}
        walked = timestep_uses._parents(module)
        assert set(walked) == code
        assert all(walked[node] is seen[node] for node in code)
        assert timestep_uses._parents(module) is walked  # (kept for the last function)


def test_the_binding_check_visits_what_libcsts_visitor_would() -> None:
    """phases._is_timestep dispatches ``_Bindings``'s ``visit_`` methods by exact class over
    the function's code nodes: one entry per method, for classes with no subclass (libcst's
    visitor dispatches on the class name, so that is what it would call)."""
    from mpcheck.engine import phases

    methods = {n.removeprefix("visit_") for n in vars(phases._Bindings) if n.startswith("visit_")}
    assert {k.__name__ for k in phases._BINDING_VISITS} == methods
    assert all(not k.__subclasses__() for k in phases._BINDING_VISITS)
    assert all(
        phases._BINDING_VISITS[k] is getattr(phases._Bindings, f"visit_{k.__name__}")
        for k in phases._BINDING_VISITS
    )
