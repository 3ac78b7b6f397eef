"""The hooks a rule can implement, declared once.

The engine dispatches from this table, :meth:`mpcheck.ruleset.rule.Rule.hooks` finds a rule's
overrides in it, and the docs list it. Each hook receives one kind of site, in the order
the walk meets them (statement order within a function).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mpcheck.engine.sites import (
    CallSite,
    ClassSite,
    FunctionSite,
    ReturnSite,
    SetItemSite,
    StoreSite,
)
from mpcheck.engine.training import TrainingSite

__all__ = ["HOOKS", "Hook", "Site", "SiteKind"]

SiteKind = Literal[
    "calls", "setitems", "stores", "returns", "functions", "classes", "training", "ambient"
]
Site = CallSite | SetItemSite | StoreSite | ReturnSite | FunctionSite | ClassSite | TrainingSite


@dataclass(frozen=True)
class Hook:
    """A rule method the engine calls, and the kind of site it receives."""

    method: str  # the rule's method: ``check_call``
    kind: SiteKind  # the sites it receives
    doc: str


HOOKS: tuple[Hook, ...] = (
    Hook("check_call", "calls", "A call, `a @ b`, or `t += v` (as `t.add_(v)`), with its facts."),
    Hook("check_setitem", "setitems", "`t[index] = value`."),
    Hook(
        "check_store",
        "stores",
        "`p.data = value` or `m.weight = nn.Parameter(value)`: a tensor's storage replaced.",
    ),
    Hook("check_class", "classes", "A class definition, with its resolved bases."),
    Hook("check_function", "functions", "A function or method, with its decorators resolved."),
    Hook("check_training", "training", "A training-loop step (backward, unscale, clip, step)."),
    Hook("check_return", "returns", "`return value`, with the fact of what is returned."),
    Hook(
        "check_ambient",
        "ambient",
        "An op autocast does not recast (an index write, `out=`, a compiled kernel) in a "
        "module method walked again as if a trainer's CUDA autocast were on.",
    ),
)
