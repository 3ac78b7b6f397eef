"""``setattr(obj, "name", value)`` under a literal name binds as ``obj.name = value`` does
(``mpcheck.project.names.literal_setattr``, read by the engine's walk)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from mpcheck.project.names import literal_setattr
from mpcheck.project.records import record_of
from tests.support import check

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ('setattr(self, "proj", nn.Linear(8, 8))', ("self", "proj", "nn.Linear(8, 8)")),
        ("setattr(model.head, 'scale', s)", ("model.head", "scale", "s")),
        ('setattr(self, f"proj{i}", v)', None),  # a computed name: a family (families.py)
        ("setattr(self, name, v)", None),  # any name
        ('setattr(self, "not a name", v)', None),  # no attribute an assignment could spell
        ('setattr(self, "proj")', None),  # (not setattr's shape)
        ('setattr(*args, "proj", v)', None),
        ('getattr(self, "proj", v)', None),
        ('obj.setattr(self, "proj", v)', None),
    ],
)
def test_literal_setattr(code: str, found: tuple[str, str, str] | None) -> None:
    got = literal_setattr(cst.parse_expression(code))
    text = cst.Module([]).code_for_node
    assert (got and (text(got[0]), got[1], text(got[2]))) == found


BLOCK = """
class Head(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        {store}

    def forward(self, x):
        h = F.normalize(self.embed(x).float(), dim=-1)
        return self.proj(h)


def main():
    Head(8).half()(torch.randn(2, 8, dtype=torch.float16))
"""


def _rows(store: str) -> list[tuple[int, str]]:
    found = check(HEADER + textwrap.dedent(BLOCK).replace("{store}", store))
    return [(d.start.row, d.code) for d in found]


def test_a_part_set_by_literal_name_is_a_part() -> None:
    """A half model's part fed the float32 normalisation raises (``bad_setattr_part.py``)
    whether ``__init__`` assigns it or ``setattr``s it under its literal name."""
    assert _rows('setattr(self, "proj", nn.Linear(dim, dim))') == [(13, "MPC101")]
    assert _rows('setattr(self, "other", nn.Linear(dim, dim))') == []  # no ``self.proj``


@pytest.mark.parametrize(
    "value",
    [
        "nn.Linear(dim, dim)",
        "nn.Linear(dim, dim, dtype=torch.float32).float()",
        "nn.Linear(dim, dim).half()",
        "nn.Identity()",
        "None",
    ],
)
def test_setattr_binds_as_the_assignment(value: str) -> None:
    assert _rows(f'setattr(self, "proj", {value})') == _rows(f"self.proj = {value}")


def test_a_class_record_reads_a_literal_setattr_as_a_part() -> None:
    """The file's record (``held_parts.parts_in``) names what ``setattr(self, "block",
    Block(d))`` holds as it does for ``self.block = Block(d)``; a computed name, a name in a
    comment or a string, and a part's part are no part of this class."""
    record = record_of(
        b"from torch import nn\nfrom .blocks import Block\n\nclass Net(nn.Module):\n"
        b"    def __init__(self, d, enc):\n        self.embed = nn.Embedding(10, d)\n"
        b'        setattr(self, "block", Block(d))\n'
        b"        setattr(self, 'enc', enc)\n"
        b'        setattr(self, f"layer{d}", Block(d))\n'
        b'        # setattr(self, "old", Block(d))\n'
        b'        doc = """\n        setattr(self, "text", Block(d))\n        """\n'
        b'        setattr(self.embed, "inner", Block(d))\n'
        b'        setattr(self, "cache", None)\n',
        "pkg/net.py",
    )
    (net,) = record.classes
    assert net.parts == (
        ("embed", ("torch.nn.Embedding",)),
        ("block", ("pkg.blocks.Block",)),
        ("enc", ("?",)),
    )


def test_a_part_bound_by_literal_setattr_runs_with_its_owner() -> None:
    """``self.block(x)`` in the module class that ``setattr``s ``block`` runs wherever that
    class runs (the record's ``outside``), as with ``self.block = Block()``; in a plain class
    it is a run of the ``Block`` the record knows ``self.block`` holds."""
    source = (
        "from torch import nn\nfrom net import Block\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        '        setattr(self, "block", Block())\n\n    def forward(self, x):\n'
        "        return self.block(x)\n"
    )
    assert record_of(source.encode(), "run.py").outside == ()
    plain = source.replace("class Model(nn.Module):", "class Model:")  # a run of its own
    assert record_of(plain.encode(), "run.py").outside == ("net.Block",)
