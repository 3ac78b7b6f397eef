"""A variable that holds a class holds its candidates (issue 36): ``cls = A if c else B``,
``if``/``elif`` assignments of classes, or ``{"a": A, "b": B}[name]``, then ``model =
cls(...)``: a cast of ``model`` reaches those classes only, and no other class of the project
is opened by it. A parameter, a loop or any other value keeps the class unknown. A factory's
value is a function's own variable too: ``model = load_a()`` holds what ``load_a`` returns,
not every model the file binds to ``model``. The runtime proofs are the xfile cases
``*_class_variable_cast`` and ``good_factory_scoped_cast`` (``tests/test_xfile.py``)."""

from __future__ import annotations

import pytest

from mpcheck.project.choices import choices_in
from mpcheck.project.closed import LOOSE
from mpcheck.project.models import uses_of_sources
from mpcheck.project.records import blank

THREE = b"""
from torch import nn


class A(nn.Module):
    def forward(self, x):
        return x


class B(nn.Module):
    def forward(self, x):
        return x


class C(nn.Module):
    def forward(self, x):
        return x
"""
CAST = "    model = cls()\n    model.eval()\n    model.half()\n    return model(x)\n"


@pytest.mark.parametrize(
    ("script", "a", "b"),
    [
        ("    cls = A if c else B\n" + CAST, "cast", "cast"),
        ("    cls = B if c else A if c > 1 else B\n" + CAST, "cast", "cast"),
        (
            "    if c == 1:\n        cls = A\n    elif c == 2:\n        cls = B\n" + CAST,
            "cast",
            "cast",
        ),
        ("    cls = {'a': A,\n           'b': B}[c]\n" + CAST, "cast", "cast"),
        ("    cls = A if c else A\n" + CAST, "cast", None),
        ("    cls = A if c else B\n    return cls().to(torch.bfloat16)\n", "cast", "cast"),
        # a class the text does not show keeps the cast's target unknown
        ("    cls = A if c else make()\n" + CAST, None, None),
        ("    cls = registry.get(c, A)\n" + CAST, None, None),
        ("    cls = {'a': A}.get(c)\n" + CAST, None, None),
        ("    cls = A\n    for cls in (A, B):\n        pass\n" + CAST, None, None),
    ],
)
def test_a_class_variable_holds_its_candidates(script: str, a: str | None, b: str | None) -> None:
    head = "import torch\nfrom lib import make, registry\nfrom pkg.model import A, B, C\n\n"
    head += "def g(x):\n    other = C()\n    return other(x)\n\n\ndef f(c, x):\n"
    tail = "\n\nf(1, None)\ng(None)\n"
    sources = {
        "pkg/__init__.py": b"",
        "pkg/model.py": THREE,
        "run.py": (head + script + tail).encode(),
    }
    uses = uses_of_sources(sources).at("pkg.model")
    found = [uses.of(name) for name in ("A", "B")]
    assert [None if f is None else f.kind for f in found] == [a, b]
    opened = uses.world_opening
    assert (opened is not None and opened.kind == LOOSE) == (a is None)
    c = uses.of("C")  # (built only in float32: no cast names it)
    assert c is not None and c.kind == "float32"


def test_a_parameter_holding_a_class_is_what_callers_hand() -> None:
    script = b"from pkg.model import A\n\ndef f(cls, x):\n" + CAST.encode() + b"\n\nf(A, None)\n"
    sources = {"pkg/__init__.py": b"", "pkg/model.py": THREE, "run.py": script}
    uses = uses_of_sources(sources).at("pkg.model")
    assert uses.world_opening is not None  # (no class is named: the world stays open)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("    cls = A if c else m.B\n", [b"A", b"m.B"]),
        ("    cls = A\n    cls = B\n", [b"A", b"B"]),
        ("    cls = A() if c else B()\n", None),
        ("    cls = {'a': A, 'b': B}\n", None),
        ("    cls = {'a': A, 'b': B}[k][0]\n", None),
        ("    other = A\n", None),
    ],
)
def test_the_classes_a_variable_may_hold(text: str, names: list[bytes] | None) -> None:
    code = blank(f"def f(c, k):\n{text}".encode())
    assert choices_in(code, 0, len(code), b"cls") == names


FACTORY = (
    THREE
    + b"""

def load_a():
    return A()
"""
)


@pytest.mark.parametrize(
    ("script", "a", "b"),
    [
        # the factory's value is the function's own: the cast there reaches what it returns
        (
            "def f(x):\n    model = load_a()\n    model.eval()\n    return model.half()(x)\n",
            "cast",
            "float32",
        ),
        (
            "def f(x):\n    model = B()\n    model.eval()\n    return model.half()(x)\n",
            "float32",
            "cast",
        ),
        # a parameter holds what callers hand: every model the file binds to the name
        ("def f(model):\n    model.eval()\n    return model.half()\n", "cast", "cast"),
    ],
)
def test_a_factorys_value_is_the_functions_own(script: str, a: str, b: str) -> None:
    head = "import torch\nfrom pkg.model import B, load_a\n"
    head += "head = torch.nn.Linear(2, 2).half()\n\n"  # (a project that never says half is fp32)
    other = "def g(x):\n    model = load_a()\n    model.eval()\n    return model(x)\n\n"
    other += "def k(x):\n    model = B()\n    model.eval()\n    return model(x)\n\n"
    tail = "\n\nf(None)\ng(None)\nk(None)\n"
    sources = {
        "pkg/__init__.py": b"",
        "pkg/model.py": FACTORY,
        "run.py": (head + other + script + tail).encode(),
    }
    uses = uses_of_sources(sources).at("pkg.model")
    found = [uses.of(name) for name in ("A", "B")]
    assert [None if f is None else f.kind for f in found] == [a, b]
