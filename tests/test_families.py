"""Attributes under computed names (``mpcheck.engine.families``): ``setattr(self, f"x{i}", v)``
read back by ``getattr(self, f"x{j}")`` is one family whose fact is ``v``'s."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from mpcheck.engine.families import family_key, shapes, template
from mpcheck.engine.frames import ClassInfo
from tests.support import check

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


@pytest.mark.parametrize(
    ("code", "shape"),
    [
        ('f"scaler{i}"', "scaler{}"),
        ("f'optim{ind}'", "optim{}"),
        ('f"block_{i}_{j}_norm"', "block_{}_{}_norm"),
        ('f"stage{n:02d}"', "stage{}"),
        ('rf"s{i}"', "s{}"),
        ('f"{layer_type}_inv_freq"', None),  # no constant prefix: may be any name
        ('f"0{i}"', None),  # not the start of a name
        ('f"block.{i}"', None),  # not an attribute's name
        ('f"scaler"', None),  # a constant
        ('"scaler0"', None),
        ("name", None),
    ],
)
def test_template(code: str, shape: str | None) -> None:
    assert template(cst.parse_expression(code)) == shape


CLASS = """
class Trainer:
    default_lr = None

    def __init__(self, n):
        for i in range(n):
            setattr(self, f"scaler{i}", None)
            setattr(self, f"optim{i}", None)
        setattr(self, "lr", 1.0)
        self.amp = False

    def scale(self, loss):
        return self.helper
    {extra}
"""


def _key(extra: str, read: str = 'f"scaler{j}"', base: str = "") -> str | None:
    module = cst.parse_module(base + CLASS.replace("{extra}", extra))
    classes = {}
    for node in module.body:
        if isinstance(node, cst.ClassDef):
            bases = tuple(cst.Module([]).code_for_node(a.value) for a in node.bases)
            classes[node.name.value] = ClassInfo(node, False, {}, {}, bases)
    return family_key(
        classes, "Trainer", [cst.parse_expression("self"), cst.parse_expression(read)]
    )


def test_shapes_of_a_class() -> None:
    module = cst.parse_module(CLASS.replace("{extra}", ""))
    node = module.body[0]
    assert isinstance(node, cst.ClassDef)
    found = shapes(node)
    assert found.templates == {"scaler{}", "optim{}"}
    assert found.names == {"default_lr", "__init__", "scale", "lr", "amp", "helper"}
    assert not found.other


@pytest.mark.parametrize(
    ("extra", "read", "key"),
    [
        ("", 'f"scaler{j}"', "self.scaler{}"),
        ("", 'f"optim{j - 1}"', "self.optim{}"),
        ("", 'f"sched{j}"', None),  # no setattr stores it
        ("def f(self): return self.scaler_state", 'f"scaler{j}"', None),  # spelled by it
        ("def scaler_state(self): pass", 'f"scaler{j}"', None),  # a method it spells
        ("def f(self): return self.optimizer", 'f"scaler{j}"', "self.scaler{}"),
        ("def f(self, n): setattr(self, n, None)", 'f"scaler{j}"', None),  # any name
        ("def f(self, i): setattr(self, f'scalers{i}', None)", 'f"scaler{j}"', None),
        ("def f(self, i): setattr(self, f'scale{i}', None)", 'f"scaler{j}"', None),
        ("def f(self, i): setattr(self, f'scaler{i}_ema', None)", 'f"scaler{j}"', None),
        ("def f(self, i): setattr(self, f'scaler_ema{i}x', None)", 'f"scaler{j}"', None),
        ("def f(self, i): setattr(self, f'grad_scaler{i}', None)", 'f"scaler{j}"', "self.scaler{}"),
        ("def f(self, i): setattr(self, f'scaler{i}_ema', None)", 'f"scaler{j}_ema"', None),
        ("def f(self, i): setattr(self, f'x{i}_a', None)", 'f"optim{j}"', "self.optim{}"),
        # ``self`` of a nested class is another object
        ("class Inner:\n        def f(self): self.scaler_x = 1", 'f"scaler{j}"', "self.scaler{}"),
    ],
)
def test_family_key(extra: str, read: str, key: str | None) -> None:
    assert _key(extra, read) == key


def test_family_key_sees_local_base_classes() -> None:
    base = "class Base:\n    def f(self):\n        setattr(self, f'scaler_{0}', None)\n\n"
    assert _key("", base=base) == "self.scaler{}"  # ``Trainer`` does not derive from it
    derived = base + CLASS.replace("{extra}", "").replace("Trainer:", "Trainer(Base):")
    module = cst.parse_module(derived)
    classes = {}
    for node in module.body:
        assert isinstance(node, cst.ClassDef)
        bases = tuple(cst.Module([]).code_for_node(a.value) for a in node.bases)
        classes[node.name.value] = ClassInfo(node, False, {}, {}, bases)
    args = [cst.parse_expression("self"), cst.parse_expression('f"scaler{j}"')]
    assert family_key(classes, "Trainer", args) is None


def test_family_key_needs_self_and_a_class() -> None:
    assert _key("", 'f"scaler{j}"') == "self.scaler{}"
    module = cst.parse_module(CLASS.replace("{extra}", ""))
    node = module.body[0]
    assert isinstance(node, cst.ClassDef)
    classes = {"Trainer": ClassInfo(node, False, {}, {}, ())}
    read = cst.parse_expression('f"scaler{j}"')
    assert family_key(classes, "Trainer", [cst.parse_expression("other"), read]) is None
    assert family_key(classes, None, [cst.parse_expression("self"), read]) is None
    assert family_key(classes, "Trainer", [cst.parse_expression("self")]) is None


def test_a_family_of_layers_meets_an_upcast() -> None:
    """The family holds any value: per-stage projections built in ``__init__``."""
    body = """
        class Stages(nn.Module):
            def __init__(self, n):
                super().__init__()
                for i in range(n):
                    setattr(self, f"proj{i}", nn.Linear(8, 8))
                self.n = n

            def forward(self, x):
                for i in range(self.n):
                    x = getattr(self, f"proj{i}")(x.float())
                return x
        """
    found = [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC101"]
    assert [(d.start.row, d.start.column) for d in found] == [(14, 17)]
    assert 'but `getattr(self, f"proj{i}")` has the model\'s weights' in found[0].message


def test_the_family_a_subclass_stores_replaces_the_inherited_one() -> None:
    """``__init__`` of a subclass storing the family anew: its members, not the base's."""
    body = """
        class Base:
            def __init__(self, n):
                for i in range(n):
                    setattr(self, f"scaler{i}", torch.amp.GradScaler("cuda"))

        class Off(Base):
            def __init__(self, n):
                setattr(self, f"scaler{n}", torch.amp.GradScaler("cuda", enabled=False))
                self.model = None

            def backward(self, loss, i):
                getattr(self, f"scaler{i}").scale(loss).backward()

            def step(self, i, optimizer):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                getattr(self, f"scaler{i}").step(optimizer)
        """
    assert [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC202"] == []
    # a second ``setattr`` of the family in the same walk adds a member: one of them scales
    more = "self.model = None"
    both = body.replace(
        more, f"setattr(self, f'scaler{{n}}', torch.amp.GradScaler('cuda'))\n{' ' * 16}{more}"
    )
    (d,) = [d for d in check(HEADER + textwrap.dedent(both)) if d.code == "MPC202"]
    assert d.start.row == 20 and "made in `__init__`" in d.message
