"""``map(lambda t: ..., items)`` is the engine's ``[... for t in items]``: Python calls the
lambda once per item, so each name unpacked from the result carries what the lambda made of
its own item (lucidrains-style ``q, k, v = map(lambda t: rearrange(t, ...), (q, k, v))``)."""

from __future__ import annotations

import pytest

from tests.support import check

HEAD = (
    "import torch\n"
    "from torch import nn\n"
    "class A(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.qkv = nn.Linear(8, 24)\n"
    "    def forward(self, x, m):\n"
    "        q, k, v = self.qkv(x).chunk(3, dim=-1)\n"
)
TAIL = "        return s\nmodel = A().half()\n"


def _codes(body: str) -> list[tuple[int, str]]:
    return [(d.start.row, d.code) for d in check(HEAD + body + TAIL)]


def test_each_item_carries_the_lambda_of_its_own_item() -> None:
    body = (
        "        q, k = map(lambda t: t.transpose(0, 1), (q, k))\n"
        "        s = torch.zeros(4, 4).to(q)\n"
        "        s.masked_fill_(m, -1e7)\n"
    )
    assert (11, "MPC301") in _codes(body)


def test_over_a_chunked_tensor_each_item_is_a_chunk() -> None:
    body = (
        "        h = self.qkv(x).chunk(3, dim=-1)\n"
        "        q, k, v = map(lambda t: t.transpose(0, 1), h)\n"
        "        s = torch.zeros(4, 4).to(q)\n"
        "        s.masked_fill_(m, -1e7)\n"
    )
    assert (12, "MPC301") in _codes(body)


def test_a_lambda_that_upcasts_makes_float32_items() -> None:
    body = (
        "        q, k = map(lambda t: t.float(), (q, k))\n"
        "        s = q @ k.transpose(-1, -2)\n"
        "        s.masked_fill_(m, -1e7)\n"
    )
    assert not [c for c in _codes(body) if c[1] == "MPC301"]


@pytest.mark.parametrize(
    "call",
    [
        "map(lambda t, u: t + u, (q, k), (k, q))",  # two iterables: not read
        "map(lambda t=None: t, (q, k))",  # a default: not read
        "map(str, (q, k))",  # no lambda: not read
    ],
)
def test_other_maps_are_left_unknown(call: str) -> None:
    body = f"        a, b = {call}\n"
    body += "        s = torch.zeros(4, 4).to(a)\n        s.masked_fill_(m, -1e7)\n"
    assert not [c for c in _codes(body) if c[1] == "MPC301"]


def test_a_rebound_map_is_not_the_builtin() -> None:
    body = (
        "        q, k = map(lambda t: t, (q, k))\n"
        "        s = torch.zeros(4, 4).to(q)\n"
        "        s.masked_fill_(m, -1e7)\n"
    )
    source = "def map(f, xs):\n    return xs\n" + HEAD + body + TAIL
    assert not [d for d in check(source) if d.code == "MPC301"]
