"""A model keeps its float32 evidence through three uses that do not cast it (issue 36):
a deep copy (a model of its class, whose own uses count), a method of a project object
that casts nothing it is handed (``diffusion.training_losses(model, ...)``), and a bound
method handed on (``p_sample_loop(model.forward_with_cfg, ...)``), a call of the model.
The runtime proofs are the xfile cases ``*_ema_copy_*``, ``*_project_method_*`` and
``good_bound_method_sampler`` (``tests/test_xfile.py``)."""

from __future__ import annotations

import pytest

from mpcheck.project.models import uses_of_sources
from mpcheck.project.records import record_of
from tests.support import XFILE
from tests.test_model_records import findings

MODEL = b"""
class Model(nn.Module):
    def forward(self, x):
        return x

    def guided(self, x, scale):
        half = x[: len(x) // 2]  # (a variable named so: no cast)
        return self.forward(torch.cat([half, half])) * scale

    def to_half(self):
        return self.half()
"""
DIFFUSION = b"""
class Base:
    def loss(self, model, x):
        return model(x)

    def cast_loss(self, model, x):
        return model.half()(x)


class Spaced(Base):
    def loss(self, model, x):
        return super().loss(model, x)

    def cast_loss(self, model, x):
        return super().cast_loss(model, x)


def create():
    return Spaced()
"""
HEAD = b"import copy\nfrom copy import deepcopy\nimport functools\nfrom pkg.model import Model\n"
HEAD += b"from pkg.diffusion import Base, create\nfrom pkg.other import sample, wrap\n"
HEAD += b"head = torch.nn.Linear(2, 2).half()\n\n"  # (a project that never says half is fp32)
HEAD += b"def keep(m):\n    return m\n\ndef main(x, d):\n    model = Model()\n"


def _kind(body: str) -> str | None:
    run = HEAD + b"".join(f"    {line}\n".encode() for line in body.splitlines())
    sources = {
        "pkg/__init__.py": b"",
        "pkg/model.py": MODEL,
        "pkg/diffusion.py": DIFFUSION,
        "pkg/other.py": b"def sample(fn, x):\n    return fn(x)\n",
        "run.py": run,
    }
    found = uses_of_sources(sources).at("pkg.model").of("Model")
    return None if found is None else found.kind


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        # a deep copy is a model of the class: its own uses decide
        ("ema = deepcopy(model).to(d)\nema.eval()\nema(x)\nmodel(x)", "float32"),
        ("ema = copy.deepcopy(model)\nkeep(ema)\nema.requires_grad_(False)", "float32"),
        ("keep(deepcopy(model))", "float32"),
        ("ema = copy.deepcopy(model)\nema.half()", "cast"),
        ("ema = deepcopy(model)\nema2 = deepcopy(ema)\nema2.to(torch.float16)", "cast"),
        ("ema = deepcopy(model)\nwrap(ema)", None),  # (another file's function: unknown)
        ("wrap(deepcopy(model))", None),
        # a method of a project object: kept when no definition along its bases casts
        ("diffusion = create()\nloss = diffusion.loss(model, x)", "float32"),
        ("diffusion = Base()\nloss = diffusion.loss(model, x)", "float32"),
        ("diffusion = create()\nloss = diffusion.cast_loss(model, x)", None),
        ("diffusion = create()\nloss = diffusion.missing(model, x)", None),
        ("opt = torch.optim.AdamW([])\nopt.add_param_group(model)", None),  # (a library's)
        # a bound method handed on is a call of the model, unless the method casts it
        ("y = sample(model.guided, x)", "float32"),
        ("fn = model.guided if x else model.forward\ny = sample(fn, x)", "float32"),
        ("fn = functools.partial(model.guided, scale=2.0)\ny = fn(x)", "float32"),
        ("y = create().p_sample(model.forward, x)", "float32"),
        ("y = sample(model.to_half, x)", None),  # (its callee calls it: it casts)
        ("y = wrap(model.encoder, x)", None),  # (a part, not a method: it might be cast)
        ("y = sample(model.encoder, x)", "float32"),  # (handed to a helper casting nothing)
    ],
)
def test_uses_that_keep_a_model_through_copies_methods_and_bound_methods(
    body: str, kind: str | None
) -> None:
    assert _kind(body) == kind


def test_the_record_lists_the_methods_that_cast_and_those_that_do_not() -> None:
    record = record_of(MODEL, "pkg/model.py")
    assert {"pkg.model.Model.forward", "pkg.model.Model.guided"} <= set(record.keepers)
    assert record.casters == ("pkg.model.Model.to_half",)


@pytest.mark.parametrize(
    ("case", "severity"),
    [
        ("good_ema_copy_float32_model", None),
        ("good_project_method_keeps_model", None),
        ("good_bound_method_sampler", None),
        ("bad_ema_copy_cast_model", "error"),  # (the copy's ``.half()``: evidence of half)
        ("bad_project_method_casts_model", "warning"),  # (escapes: the premise stands)
    ],
)
def test_dit_shaped_projects(case: str, severity: str | None) -> None:
    found = [f for f in findings(XFILE / case, "--no-cache") if f["code"] == "MPC101"]
    assert [f["severity"] for f in found] == ([severity] if severity else [])


CONTAINED = b"""
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        block = Block()
        self.body = nn.Sequential(block, nn.Identity())
        self.layers = nn.ModuleList([Block()])
"""


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        # a torch container holds its modules and casts none: the part follows its owner
        ("model = Model()\nmodel(x)", "float32"),
        ("model = Model().half()\nmodel(x)", "cast"),
        # built outside a class body too: the container holding it there is followed by no
        # record, so the part may escape
        ("model = Model()\nblock = Block()\nstack = nn.Sequential(block)", None),
    ],
)
def test_a_torch_container_holds_a_part_as_its_owner_does(body: str, kind: str | None) -> None:
    run = b"import torch\nfrom torch import nn\nfrom pkg.model import Block, Model\n"
    run += b"head = torch.nn.Linear(2, 2).half()\n\ndef main(x):\n"
    run += b"".join(f"    {line}\n".encode() for line in body.splitlines())
    sources = {"pkg/__init__.py": b"", "pkg/model.py": CONTAINED, "run.py": run}
    found = uses_of_sources(sources).at("pkg.model").of("Block")
    assert (None if found is None else found.kind) == kind


TWO = b"""
from torch import nn


class A(nn.Module):
    def forward(self, x):
        return x


class B(nn.Module):
    def forward(self, x):
        return x
"""


@pytest.mark.parametrize(
    ("script", "a", "b"),
    [
        # a name a function binds is its own variable: a cast there casts its models only
        (
            "def f(x):\n    model = A()\n    model.eval()\n    return model(x)\n\n"
            "def g(x):\n    model = B()\n    model = model.half()\n    return model(x)\n",
            "float32",
            "cast",
        ),
        (
            "def f(x):\n    model = A()\n    return model(x)\n\n"
            "def g(x):\n    model = B()\n    return external(model)\n",
            "float32",
            None,
        ),
        # every binding of the function counts (a branch), and a parameter holds what
        # callers hand: every model the file binds the name to
        (
            "def f(c):\n    if c:\n        model = A()\n    else:\n        model = B()\n"
            "    model.half()\n",
            "cast",
            "cast",
        ),
        (
            "def f(c):\n    model = A() if c else B()\n    model.half()\n\n"
            "def g(x):\n    model = B()\n    return model(x)\n",
            "cast",
            "cast",
        ),
        (
            "def f(model):\n    model.half()\n    model = B()\n\n"
            "def g(x):\n    model = A()\n    return model(x)\n",
            "cast",
            "cast",
        ),
        (
            "def f(model):\n    model.half()\n\ndef g(x):\n    model = A()\n    return model(x)\n",
            "cast",
            None,
        ),
    ],
)
def test_a_functions_own_variable_holds_its_own_models(
    script: str, a: str | None, b: str | None
) -> None:
    head = "import torch\nfrom lib import external\nfrom pkg.model import A, B\n"
    head += "head = torch.nn.Linear(2, 2).half()\n\n"  # (a project that never says half is fp32)
    sources = {"pkg/__init__.py": b"", "pkg/model.py": TWO, "run.py": (head + script).encode()}
    uses = uses_of_sources(sources).at("pkg.model")
    found = [uses.of(name) for name in ("A", "B")]
    assert [None if r is None else r.kind for r in found] == [a, b]
