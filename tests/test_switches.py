"""Parts chosen by a config switch (mpcheck/engine/switches.py): the part of the path where a
value is float32 under the same switch, and a part one of whose classes returns float32."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from mpcheck.engine.switches import switch_of
from tests.support import check, span

PROJECTIONS = """
import math

import torch
from torch import nn


class Sinusoids(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        freqs = torch.exp(-math.log(10000) * torch.arange(self.dim // 2) / self.dim)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class Learned(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(1, dim)

    def forward(self, t):
        return self.proj(t[:, None])
"""

CLASS_EMBEDDING = (
    PROJECTIONS
    + """

class Denoiser(nn.Module):
    def __init__(self, dim, class_embed_type=None, classes=None):
        super().__init__()
        self.time_proj = Sinusoids(dim)
        if {outer}:
            self.class_embedding = nn.Embedding(classes, dim)
        elif class_embed_type == "timestep":
            self.class_embedding = nn.Linear(dim, dim)
        elif class_embed_type == "identity":
            self.class_embedding = nn.Identity()
        else:
            self.class_embedding = None
        self.config = {{"class_embed_type": class_embed_type}}

    def forward(self, x, class_labels):
        if {test}:
            class_labels = self.time_proj(class_labels)
        return x + self.class_embedding(class_labels)
"""
)
OUTER = "class_embed_type is None and classes is not None"


def found(source: str) -> list[tuple[str, int]]:
    return [(d.code, d.start.row) for d in check(textwrap.dedent(source))]


def test_the_part_of_the_switch_gets_the_float32_value() -> None:
    source = CLASS_EMBEDDING.format(outer=OUTER, test='self.config.class_embed_type == "timestep"')
    (finding,) = check(source)
    assert finding.code == "MPC101"
    assert span(finding) == (45, 20, 45, 54)
    assert 'on the path where `self.config.class_embed_type == "timestep"`' in finding.message
    assert finding.fix is None  # a cast at the call would recast the labels of other paths


@pytest.mark.parametrize(
    "test",
    [
        'self.config.class_embed_type == "identity"',  # that path's part is nn.Identity
        'self.config.label_type == "timestep"',  # not the switch that chose the part
    ],
)
def test_another_switch_or_path_is_left_alone(test: str) -> None:
    assert found(CLASS_EMBEDDING.format(outer=OUTER, test=test)) == []


def test_an_elif_under_an_unrelated_test_chooses_by_nothing() -> None:
    """``elif class_embed_type == "timestep"`` under ``if classes is not None:`` may be the
    Embedding's path too: the switch does not say which part the labels meet."""
    source = CLASS_EMBEDDING.format(
        outer="classes is not None", test='self.config.class_embed_type == "timestep"'
    )
    assert found(source) == []


def test_a_part_cast_again_forgets_its_choices() -> None:
    source = CLASS_EMBEDDING.format(outer=OUTER, test='self.config.class_embed_type == "timestep"')
    cast = "        self.class_embedding = nn.Identity()\n"
    source = source.replace(
        "    def forward(self, x, class_labels):\n",
        "    def forward(self, x, class_labels):\n" + cast,
    )
    assert found(source) == []


TIME_PROJ = (
    PROJECTIONS
    + """

class Denoiser(nn.Module):
    def __init__(self, dim, time_embedding_type="positional"):
        super().__init__()
        if time_embedding_type == "learned":
            self.time_proj = Learned(dim)
        elif {test}:
            self.time_proj = Sinusoids(dim)
        else:
            raise ValueError(time_embedding_type)
        self.time_embedding = nn.Linear(dim, dim)

    def forward(self, x, t):
        t_emb = self.time_proj(t)
        return x + self.time_embedding(t_emb)
"""
)


def test_a_part_one_of_whose_classes_returns_float32_returns_it_on_its_path() -> None:
    (finding,) = check(TIME_PROJ.format(test='time_embedding_type == "positional"'))
    assert finding.code == "MPC101"
    assert span(finding) == (41, 20, 41, 46)
    assert 'as built when `time_embedding_type == "positional"`' in finding.message


def test_a_part_chosen_by_precision_is_left_alone() -> None:
    """``Sinusoids`` when the model is float32: the float32 path goes with a float32 model."""
    assert found(TIME_PROJ.format(test="upcast_time_embedding")) == []


def test_a_part_whose_classes_all_return_the_models_dtype_is_left_alone() -> None:
    source = TIME_PROJ.format(test='time_embedding_type == "positional"')
    assert found(source.replace("= Sinusoids(dim)", "= Learned(dim)")) == []


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ('self.config.class_embed_type == "timestep"', ("class_embed_type", "timestep")),
        ('"timestep" == class_embed_type', ("class_embed_type", "timestep")),
        ('class_embed_type != "timestep"', None),
        ("class_embed_type == 3", None),
        ('a == "x" == b', None),
        ("class_embed_type is None", None),
    ],
)
def test_which_tests_are_switches(test: str, expected: tuple[str, str] | None) -> None:
    assert switch_of(cst.parse_expression(test)) == expected
