"""Placing only the reported nodes gives exactly the ranges libcst's PositionProvider gives."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from mpcheck.files.positions import positions

ROOT = Path(__file__).resolve().parent.parent

TRICKY = {
    "crlf": "import torch\r\n\r\ndef f(x):\r\n    return (x\r\n        .float())\r\n",
    "lone_cr": "a = 1\rb = (a +\r  2)\r",
    "no_final_newline": "x = torch.ones(3)",
    "empty": "",
    "comments": "# lead\n\n@decorator  # d\n# between\nclass A:  # c\n    '''doc\n    more'''\n"
    "    x: int = 1; y = 2\n\n    async def f(self, *a, b=1, **k):\n        async with g() as h:"
    "\n            pass\n",
    "strings": 's = f"{x!r:>{w}}" """\ntwo\n""" \'three\'\nt = (\n    "a"\n    "b"\n)\n',
    "tabs": "if x:\n\tif y:\n\t\tz = [i  for i in range(3)  if i]\n\telse:\n\t\tpass\n",
    "match": "match p:\n    case [1, *rest] if rest:\n        pass\n    case {'k': v}:\n"
    "        pass\n    case _:\n        pass\n",
    "unicode": "s = 'héllo wörld'; t = torch.ones(2)  # ünïcode\nu = s\n",
    "try": "try:\n    x = 1\nexcept (A, B) as e:\n    raise\nelse:\n    y = lambda q: q\n"
    "finally:\n    del x\n",
}


def _fixture_sources() -> dict[str, str]:
    files = sorted((ROOT / "fixtures").rglob("*.py"))
    return {str(f.relative_to(ROOT)): f.read_text(encoding="utf-8") for f in files}


def _all_nodes(module: cst.Module) -> dict[cst.CSTNode, object]:
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_every_node_alone_is_placed_as_libcst_places_it(name: str) -> None:
    module = cst.parse_module(TRICKY[name])
    full = _all_nodes(module)
    for node, where in full.items():
        assert positions(module, [node])[node] == where, (type(node).__name__, name)


def test_nodes_of_every_fixture_are_placed_as_libcst_places_them() -> None:
    rnd = random.Random(12)
    sources = _fixture_sources()
    assert len(sources) > 30
    for name, source in sources.items():
        module = cst.parse_module(source)
        full = _all_nodes(module)
        nodes = list(full)
        for size in (1, 2, 5, 20):
            picked = rnd.sample(nodes, min(size, len(nodes)))
            got = positions(module, picked)
            for node in picked:
                assert got[node] == full[node], (name, type(node).__name__)


def test_only_the_wanted_nodes_and_what_they_hold_are_placed() -> None:
    module = cst.parse_module("import torch\n\ndef f(x):\n    return torch.ones(3) + x\n")
    call = next(n for n in _all_nodes(module) if isinstance(n, cst.Call))
    placed = positions(module, [call])
    assert set(placed) == {call, *_descendants(call)}
    assert placed[call].start.line == 4


def test_a_node_from_another_tree_has_no_place() -> None:
    module = cst.parse_module("x = 1\n")
    assert positions(module, [cst.Name("x")]) == {}


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    out = []
    for child in node.children:
        out += [child, *_descendants(child)]
    return out


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\n\x0cdef f(a):\n    return a.half()\n\x0cy = f(2)\nz = 3\n",
        "x = 1\r\ndef f(a):\n    return a.half()\r\n\r\ny = f(2)\r\nz = 3\r\n",
        "class A:\n    def f(self):\n        pass\n\x0c    def g(self): return 1\nz = 3\n",
    ],
)
def test_nodes_early_in_a_file_are_placed_as_when_the_whole_file_is_generated(
    source: str,
) -> None:
    """Generation stops once the wanted nodes are placed; a node ending where a dropped
    form feed starts the next line is still realigned as the whole text realigns it."""
    module = cst.parse_module(source)
    last = module.body[-1]
    for node in _all_nodes(module):
        if node is last or node in _descendants(last) or node is module:
            continue
        alone = positions(module, [node], source)
        with_last = positions(module, [node, last], source)  # (the whole file generated)
        assert alone[node] == with_last[node], (type(node).__name__, source)
