"""Values float32 on one path of an ``if`` (mpcheck/engine/branches.py): reported when the
test has nothing to do with precision, left alone when it picks one or when the other path
is a helper's argument, whose dtype the caller decides."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mpcheck.engine.branches import about_precision
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.ruleset.rule import all_rules
from tests.support import check

ATTENTION = """
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.upcast = False

    def forward(self, x, cos=None):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if {test}:
            q = q.float() * cos
        return F.scaled_dot_product_attention(q, k, v)
"""


def codes(source: str) -> list[tuple[str, int]]:
    return [(d.code, d.start.row) for d in check(textwrap.dedent(source))]


@pytest.mark.parametrize("test", ["cos is not None", "self.training", "x.shape[1] > 4"])
def test_a_float32_path_chosen_by_anything_else_is_reported(test: str) -> None:
    assert codes(ATTENTION.format(test=test)) == [("MPC103", 17)]


@pytest.mark.parametrize(
    "test",
    [
        "self.upcast",
        "x.dtype == torch.float32",
        'x.device.type == "mps"',
        "torch.is_autocast_enabled()",
        'self.config.mixed_precision == "no"',
    ],
)
def test_a_float32_path_chosen_by_precision_or_device_is_left_alone(test: str) -> None:
    assert codes(ATTENTION.format(test=test)) == []


def test_both_branches_count_the_else_path_too() -> None:
    branch = "            q = q.float() * cos\n"
    other = "            pass\n        else:\n" + branch
    source = ATTENTION.format(test="cos is None").replace(branch, other)
    found = check(textwrap.dedent(source))
    assert [(d.code, d.start.row) for d in found] == [("MPC103", 19)]
    assert "on the path where `not (cos is None)`" in found[0].message


def test_a_helper_argument_on_the_other_path_is_left_alone() -> None:
    """``image`` of a free function may be any tensor its caller passed."""
    source = """
        import torch

        def prepare(vae, image):
            vae.to(dtype=torch.float16)
            if not isinstance(image, list):
                image = image.float()
            return vae.encode(image)
    """
    assert codes(source) == []


SAMPLER = """
    import torch

    class Sampler:
        def __init__(self, pipeline, resize, dtype):
            self.pipeline, self.resize, self.dtype = pipeline, resize, dtype

        def sample(self, mask, latents, inpainting):
            unet = self.pipeline.unet
            if inpainting:
                latent_mask = {then}
            else:
                latent_mask = {other}
            return unet(torch.cat([latents, latent_mask], 1), 0)
"""


@pytest.mark.parametrize(
    ("then", "other", "expected"),
    [
        # the other path made in a dtype the engine cannot read: the float32 path still is
        ("(self.resize(mask) > 0).float()", "torch.ones(1, 1, 8, 8, dtype=self.dtype)", ["MPC101"]),
        # a comparison with a cast method is a bool tensor, whatever it compared
        ("(self.resize(mask) > 0).float()", "latents[:, :1].half()", ["MPC101"]),
        # ... and the cast decides its dtype
        (
            "(self.resize(mask) > 0).to(latents.dtype)",
            "torch.ones(1, 1, 8, 8, dtype=self.dtype)",
            [],
        ),
        # float32 on both paths is float32, not "on one path"
        ("(self.resize(mask) > 0).float()", "torch.ones(1, 1, 8, 8)", ["MPC101 always"]),
    ],
)
def test_a_float32_path_whatever_the_other_path_made(
    then: str, other: str, expected: list[str]
) -> None:
    source = SAMPLER.format(then=then, other=other)
    found = check(textwrap.dedent(source))
    on_path = [
        d.code + ("" if "on the path where `inpainting`" in d.message else " always") for d in found
    ]
    assert on_path == expected


def test_a_factory_on_one_path_keeps_its_own_policy() -> None:
    """``if state is None: state = torch.zeros(...)`` is MPC102's, worded for its path."""
    source = """
        import torch
        from torch import nn

        class Cell(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.hh = nn.Linear(d, d)

            def forward(self, x, state=None):
                if state is None:
                    state = torch.zeros(x.shape[0], 8)
                return self.hh(state) + x
    """
    found = check(textwrap.dedent(source))
    assert [(d.code, d.start.row) for d in found] == [("MPC102", 12)]
    assert "the default when none is passed" in found[0].message


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ("self.kv_cache is not None", False),
        ("local_x.size(-1) < TW", False),
        ('self.config.class_embed_type == "timestep"', False),
        ("self.force_upcast", True),
        ("needs_upcasting", True),
        ("self.is_quantized", True),
        ("use_fp16", True),
        ("hidden.dtype != torch.bfloat16", True),
        ("is_torch_npu_available()", True),
        ("sample_rate > 0", False),  # "amp" inside a word is no precision switch
    ],
)
def test_which_tests_are_about_precision(test: str, expected: bool) -> None:
    assert about_precision(test) is expected


def test_a_string_in_a_constructor_annotation_names_no_class(tmp_path: Path) -> None:
    """``Literal["sde-dpmsolver++"]`` in an ``__init__`` of a project file: no class to look
    up (it once crashed the file's whole check)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "parts.py").write_text(
        "from torch import nn\n\nclass Part(nn.Module):\n    pass\n"
    )
    main = tmp_path / "pkg" / "model.py"
    main.write_text(
        textwrap.dedent(
            """
            from typing import Literal

            from torch import nn

            from .parts import Part


            class Model(nn.Module):
                def __init__(self, kind: Literal["sde-dpmsolver++"], part: Part) -> None:
                    super().__init__()
                    self.part = part
            """
        )
    )
    found = check_source(main.read_text(), str(main), all_rules(), Options(project_root=tmp_path))
    assert [d.code for d in found] == []
