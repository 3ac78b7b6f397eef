"""Names resolve through the file's own imports, whatever the spelling."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from mpcheck.project.names import _LEAVES, _TRIVIA, ImportTable, children, descendants
from tests.support import every_node


def resolve(imports: str, expr: str) -> str | None:
    module = cst.parse_module(imports)
    return ImportTable.of(module).resolve(cst.parse_expression(expr))


@pytest.mark.parametrize(
    ("imports", "expr", "expected"),
    [
        ("import torch", "torch.nn.functional.linear", "torch.nn.functional.linear"),
        ("import torch.nn.functional as F", "F.linear", "torch.nn.functional.linear"),
        ("from torch import nn", "nn.Linear", "torch.nn.Linear"),
        ("from torch.nn import functional as F", "F.gelu", "torch.nn.functional.gelu"),
        (
            "from torch.nn.functional import scaled_dot_product_attention as sdpa",
            "sdpa",
            "torch.nn.functional.scaled_dot_product_attention",
        ),
        ("import torch.nn.functional", "torch.nn.functional.conv2d", "torch.nn.functional.conv2d"),
        ("import torch as th", "th.float16", "torch.float16"),
        ("from torch.cuda.amp import autocast", "autocast", "torch.cuda.amp.autocast"),
        ("from torch.amp import autocast", "autocast", "torch.autocast"),
        ("import torch", "torch.nn.functional.softmax", "torch.softmax"),
        (
            "def f():\n    import torch.nn.functional as F\n",
            "F.linear",
            "torch.nn.functional.linear",
        ),
        ("if x:\n    pass\nelse:\n    from torch import nn\n", "nn.Conv2d", "torch.nn.Conv2d"),
        (
            "match kind:\n    case 'a':\n        pass\n    case _:\n        import torch as th\n",
            "th.float16",
            "torch.float16",
        ),
    ],
)
def test_resolves(imports: str, expr: str, expected: str) -> None:
    assert resolve(imports, expr) == expected


@pytest.mark.parametrize(
    ("imports", "expr"),
    [
        ("import torch", "F.linear"),  # F was never imported
        ("from . import torch", "torch.ones"),  # relative import: not the real torch
        ("import torch", "x.float"),
        ("import torch", "f()(1)"),
    ],
)
def test_does_not_resolve(imports: str, expr: str) -> None:
    assert resolve(imports, expr) is None


_TRIVIA_SOURCE = (
    "import torch as th, os.path as p  # c\n"
    "from x import *\n"
    "@dec(a=1)\n"
    "async def f(x: int = -1, *, y=(2)) -> None:\n"
    "    # leading\n"
    "    z = [x.a[1:2], {k: v for k, v in y if not k}, (a or b) < c, x @ y, ...]\n"
    "    z += lambda q: q ** 2; pass\n"
    "    async with g() as h:\n"
    "        await h(*z, **{'k': 1.5j}); break\n"
    "    return f'{x!r}' 'y' if x is not None else b'z'\n"
)


def test_descendants_are_every_node_but_syntax_trivia() -> None:
    module = cst.parse_module(_TRIVIA_SOURCE)
    every = every_node(module)
    trivia = {id(n) for n in every if isinstance(n, _TRIVIA) or _under_leaf(n, every)}
    found = descendants(module)
    assert {id(n) for n in found} == {id(n) for n in every} - trivia
    assert len(found) == len({id(n) for n in found})  # each node once
    kinds = {type(n) for n in found}
    assert {cst.Call, cst.Arg, cst.Param, cst.Lambda, cst.Await, cst.FormattedString} <= kinds
    assert {cst.Decorator, cst.ImportAlias, cst.CompFor, cst.Slice, cst.Comparison} <= kinds
    assert not kinds & {cst.SimpleWhitespace, cst.Comma, cst.Add, cst.Comment, cst.LeftParen}


def _under_leaf(node: cst.CSTNode, every: list[cst.CSTNode]) -> bool:
    """Below a name or a literal: only its parentheses and their whitespace can be."""
    return any(isinstance(p, _LEAVES) and node in every_node(p)[1:] for p in every)


def test_children_of_a_leaf_are_none_and_of_code_its_code() -> None:
    call = cst.parse_expression("(f)(a, *b, k=c)")
    assert children(cst.parse_expression("(name)")) == []
    assert isinstance(call, cst.Call)
    assert {id(n) for n in children(call)} == {id(call.func), *(id(a) for a in call.args)}


def test_children_are_libcsts_children_less_trivia_for_every_node() -> None:
    """Only fields whose declared type may hold code are read: node by node, over this
    suite's trivia source and the package's own sources (many kinds of node), that is
    exactly libcst's own ``children`` less trivia and what lies below a leaf."""
    import mpcheck

    sources = [_TRIVIA_SOURCE.encode()]
    sources += [p.read_bytes() for p in sorted(Path(mpcheck.__file__).parent.glob("*/s*.py"))]
    kinds: set[type] = set()
    for source in sources:
        for node in descendants(cst.parse_module(source)):
            kinds.add(type(node))
            below = [] if isinstance(node, _LEAVES) else node.children
            expected = [c for c in below if not isinstance(c, _TRIVIA)]
            assert sorted(map(id, children(node))) == sorted(map(id, expected)), type(node)
    assert len(kinds) > 60
