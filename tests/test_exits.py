"""Paths that leave a block (mpcheck/engine/exits.py): the code after an ``if`` sees only the
paths that fall through it; ``continue``/``break`` carry their values to the loop and
``return`` to the function's end."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.engine.exits import close_loop, merge_paths, settle
from mpcheck.engine.facts import Fact, Kind, Prec, join
from mpcheck.engine.frames import Frame
from mpcheck.engine.sites import Scope
from tests.support import check

SCOPE = Scope(None, None, False, None)
HALF = Fact(Kind.TENSOR, Prec.HALF, "float16")
FULL = Fact(Kind.TENSOR, Prec.FULL, "float32")


def frame(dead: bool = False, **env: Fact) -> Frame:
    return Frame(dict(env), SCOPE, dead=dead)


def test_a_dead_path_leaves_the_live_ones_values() -> None:
    after = frame(x=HALF)
    merge_paths(after, frame(dead=True, x=FULL), frame(x=HALF))
    assert after.env["x"] is HALF and not after.dead
    merge_paths(after, frame(x=HALF), frame(dead=True, x=FULL))  # (either side)
    assert after.env["x"] is HALF and not after.dead


def test_two_live_paths_are_joined_and_two_dead_ones_leave_the_frame_dead() -> None:
    after = frame(x=HALF)
    merge_paths(after, frame(x=FULL), frame(x=HALF))
    assert after.env["x"].prec not in (Prec.FULL, Prec.HALF)
    merge_paths(after, frame(dead=True), frame(dead=True))
    assert after.dead


def test_what_a_dead_path_returns_is_kept() -> None:
    after, returned = frame(), frame(dead=True)
    returned.returns = FULL
    merge_paths(after, returned, frame())
    assert after.returns is FULL


def test_a_loop_meets_the_values_of_its_continue_and_break_paths() -> None:
    before = frame(x=HALF)
    body = frame(dead=True, x=HALF)  # every path of the body left it
    body.jumps.append({"x": FULL})
    close_loop(before, body)
    # no round (the values before it), or a round that jumped: the body's end is never reached
    assert before.env["x"] == join(HALF, FULL)
    assert before.jumps == [] and not before.dead


def test_a_functions_end_meets_its_returns() -> None:
    end = frame(dead=True, x=HALF)
    end.exits.append({"self.proj": FULL})
    settle(end)
    assert end.env == {"self.proj": FULL} and not end.dead
    live = frame(x=HALF)
    live.exits.append({"x": HALF, "y": FULL})
    settle(live)
    assert live.env == {"x": HALF, "y": FULL}


def codes(source: str) -> list[tuple[str, int]]:
    return [(d.code, d.start.row) for d in check(textwrap.dedent(source))]


HEAD = """
import torch
from torch import nn


def run(frames, flag, other):
    model = nn.Linear(4, 4).half()
    x = frames.half()
"""


@pytest.mark.parametrize(
    "branch",
    [
        # ``if`` without ``else``: the branch returns
        "if flag:\n    x = x.float()\n    print(x.sum())\n    return\n",
        # ``if``/``else``: the ``else`` raises
        "if flag:\n    pass\nelse:\n    x = x.float()\n    raise ValueError(x.sum())\n",
        # an ``elif`` chain: every branch but the last leaves
        "if flag:\n    x = x.float()\n    return\n"
        "elif other:\n    x = x.double()\n    raise ValueError\n"
        "else:\n    x = x.half()\n",
        # a nested ``if`` whose two branches both leave: the outer branch leaves too
        "if flag:\n    x = x.float()\n"
        "    if other:\n        return\n    else:\n        raise ValueError\n",
        # ``return`` inside a ``with`` block
        "if flag:\n    with torch.no_grad():\n        x = x.float()\n        return x.sum()\n",
    ],
)
def test_the_code_after_an_if_does_not_see_a_path_that_left(branch: str) -> None:
    body = textwrap.indent(branch + "return model(x)\n", "    ")
    assert codes(HEAD + body) == []


@pytest.mark.parametrize(
    "branch",
    [
        "if flag:\n    x = x.float()\n",  # falls through: float32 on that path
        "if flag:\n    x = x.float()\nelse:\n    return\n",  # the float32 path is the only one
    ],
)
def test_a_path_that_falls_through_is_still_seen(branch: str) -> None:
    body = textwrap.indent(branch + "return model(x)\n", "    ")
    assert [code for code, _ in codes(HEAD + body)] == ["MPC101"]


def test_a_continue_leaves_the_rest_of_the_loop_body_alone() -> None:
    body = (
        "for f in frames:\n"
        "    if flag:\n        x = f.float()\n        print(x.sum())\n        continue\n"
        "    print(model(x))\n"
    )
    assert codes(HEAD + textwrap.indent(body, "    ")) == []


def test_init_attributes_bound_before_an_early_return_are_the_objects() -> None:
    source = """
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, dim, fp32_head=False, tiny=False):
            super().__init__()
            self.proj = nn.Linear(dim, dim)
            if tiny:
                self.head = nn.Linear(dim, dim).float()
                return
            self.head = nn.Linear(dim, dim)

        def forward(self, x):
            return self.head(self.proj(x))
    """
    # the returning path's ``self.head`` is part of the object as the caller sees it: the
    # join of both paths, not only the one that fell off the end
    import libcst as cst

    from mpcheck.engine.analysis import FileAnalysis
    from mpcheck.project.names import ImportTable

    class Quiet:
        def wants(self, kind: str) -> bool:
            return False

        def deliver(self, kind: str, site: object) -> None:
            pass

    module = cst.parse_module(textwrap.dedent(source))
    walk = FileAnalysis(module, ImportTable.of(module), Quiet(), source=source.encode())
    walk.run()
    head = walk.classes["Block"].attrs["self.head"]
    assert head.kind is Kind.MODULE and head.prec is not Prec.MODEL
