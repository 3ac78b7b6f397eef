"""MPC304 fp16-vanishing-epsilon: a guard float16 rounds to 0 protects a log, root or division."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mpcheck import cli
from mpcheck.diagnostics import Diagnostic, Severity
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC304"]


def module(forward: str, build: str = "Head().half()") -> str:
    """A module whose ``forward`` is ``forward`` (lines 11 on), built by a script."""
    return (
        "\nclass Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n"
        + textwrap.indent(textwrap.dedent(forward), "        ")
        + f"\n\ndef main():\n    return {build}(torch.randn(2, 8))\n"
    )


def test_a_log_guard_in_a_module_cast_to_float16_is_an_error() -> None:
    (d,) = findings(module("p = self.proj(x).sigmoid()\nreturn torch.log(p + 1e-8)\n"))
    assert span(d) == (12, 30, 12, 34)
    assert d.severity.value == "error"
    assert d.message == (
        "`1e-8` rounds to 0 in float16 (so does anything below 2**-25, about 3e-8): `p + 1e-8` "
        "guards nothing in a float16 tensor, and `torch.log(p + 1e-8)` gives -inf where the "
        "tensor is 0; use a guard float16 holds (1e-6, or `torch.finfo(x.dtype).eps`) or "
        "compute in float32 (half: `Head` is cast to half by `Head().half()` at line 16)"
    )
    assert [(r.start.row, r.message) for r in d.related] == [
        (16, "`Head` is cast to half by `Head().half()`")
    ]


@pytest.mark.parametrize(
    ("forward", "gives"),
    [
        ("n = x.norm(dim=-1, keepdim=True)\nreturn x / (n + 1e-10)\n", "inf or NaN"),
        ("return torch.rsqrt(x.pow(2).mean(-1) + 1e-12)\n", "inf"),
        ("return x.abs().clamp(min=1e-10).log()\n", "-inf"),
        ("return torch.clamp_min(x.abs(), 1e-10).log2()\n", "-inf"),
        ("return (x.abs() + 1e-9) ** -0.5\n", "inf"),
        ("d = x.abs().sum(-1)\nd += 1e-10\nreturn x / d.unsqueeze(-1)\n", "inf or NaN"),
        ("return torch.div(x, x.abs().add(1e-10))\n", "inf or NaN"),
        ("return (x.abs() + 1e-8).float().log()\n", "-inf"),  # the cast comes too late
    ],
)
def test_every_guarded_op_is_reported(forward: str, gives: str) -> None:
    (d,) = findings(module(forward))
    assert f"gives {gives} where the tensor is 0" in d.message
    assert d.severity.value == "error"


@pytest.mark.parametrize(
    "forward",
    [
        "return torch.log(x.abs() + 1e-6)\n",  # a subnormal float16 holds
        "return torch.log(x.abs() + 3e-8)\n",  # above 2**-25: rounds up to 2**-24
        "return torch.log(x.abs().float() + 1e-8)\n",  # added in float32
        "return torch.log(x.abs() + torch.finfo(x.dtype).eps)\n",
        "return x.abs() + 1e-8\n",  # no op that needs it
        "return x.clamp(min=0.0).log()\n",  # no guard
        "return torch.exp(x + 1e-8)\n",
    ],
)
def test_guards_that_hold_or_protect_nothing_are_quiet(forward: str) -> None:
    assert findings(module(forward)) == []


@pytest.mark.parametrize(
    "build",
    ["Head().to(torch.bfloat16)", "Head()", "Head().to(dtype)"],  # bf16, fp32, dtype not said
)
def test_a_module_not_cast_to_float16_is_quiet(build: str) -> None:
    assert findings(module("return torch.log(x.abs() + 1e-8)\n", build)) == []


def test_the_premise_alone_gives_nothing() -> None:
    body = """
        class Head(nn.Module):
            def forward(self, p):
                return torch.log(p + 1e-8)

        def score(p):
            return torch.log(p + 1e-8)
        """
    assert findings(body) == []


def test_a_learned_weight_is_never_zero() -> None:
    """BigVGAN's Snake activation: ``1 / (alpha + 1e-9)`` of a trained parameter."""
    body = """
        class Snake(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.alpha = nn.Parameter(torch.zeros(n))

            def forward(self, x):
                alpha = torch.exp(self.alpha.unsqueeze(0).unsqueeze(-1))
                return x + (1.0 / (alpha + 1e-9)) * torch.sin(x * alpha) ** 2

        def main():
            return Snake(4).half()(torch.randn(2, 4, 8).half())
        """
    assert findings(body) == []


def test_a_root_is_followed_to_its_division() -> None:
    assert findings(module("return torch.sqrt(x.var(-1) + 1e-8)\n")) == []
    (d,) = findings(module("return x / torch.sqrt(x.var(-1, keepdim=True) + 1e-8)\n"))
    assert "gives inf or NaN where the tensor is 0" in d.message


def test_a_library_base_says_half_not_float16() -> None:
    found = findings(
        """
        from diffusers import ModelMixin

        class Vae(ModelMixin):
            def forward(self, x):
                return x / (x.norm(dim=1, keepdim=True) + 1e-12)
        """
    )
    assert found == []


ZERO_ROWS = """
    from diffusers import ModelMixin

    class Encoder(ModelMixin):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8, bias={bias})

        def forward(self, x, mask):
            {make}
            h = self.proj(x)
            return h / (h.norm(dim=-1, keepdim=True) + 1e-12)
    """


@pytest.mark.parametrize(
    "make",
    [
        "x = F.pad(x, (0, 0, 0, 3))",  # zero padding
        "x = torch.cat([x, torch.zeros_like(x)], 1)",  # zero rows joined to data
        "x = x.masked_fill(mask[..., None], 0.0)",  # a masked fill with 0
        "x = F.pad(x, (0, 0, 0, 3)).transpose(0, 1) * 2.0",  # a reshape, then a product
    ],
)
def test_rows_the_code_makes_zero_are_a_latent_hazard_under_the_contract(make: str) -> None:
    (d,) = findings(ZERO_ROWS.format(bias="False", make=make))
    assert d.severity.value == "warning"
    assert "(latent: if `Encoder` runs in float16;" in d.message
    assert "bfloat16 holds the guard; rows are exactly 0 there" in d.message
    assert "rows made exactly 0 here" in d.related[-1].message


@pytest.mark.parametrize(
    ("bias", "make"),
    [
        ("True", "x = F.pad(x, (0, 0, 0, 3))"),  # the bias: a zero row projects to it
        ("False", "x = F.pad(x, (0, 0, 0, 3), value=-1.0)"),  # padding with -1
        ("False", "x = F.pad(x, (0, 0, 0, 3), mode='reflect')"),
        ("False", "x = x.masked_fill(mask[..., None], -1e4)"),
        ("False", "x = F.pad(x, (0, 0, 0, 3)) + 1.0"),  # a sum: no zero row kept
        ("False", "x = F.pad(x, (0, 0, 0, 3))[:, :5]"),  # (indexing: not followed)
        # a buffer of zeros bound to a name is often filled in place first: not a source
        ("False", "z = torch.zeros_like(x); z.index_add_(0, mask, x); x = torch.cat([x, z])"),
    ],
)
def test_rows_that_are_not_kept_zero_say_nothing(bias: str, make: str) -> None:
    found = findings(ZERO_ROWS.format(bias=bias, make=make))
    if "[:, :5]" in make:  # a slice keeps the fact: it may keep the padded rows
        assert len(found) == 1
    else:
        assert found == []


def test_zero_rows_without_any_half_evidence_say_nothing() -> None:
    body = ZERO_ROWS.format(bias="False", make="x = F.pad(x, (0, 0, 0, 3))")
    body = body.replace("from diffusers import ModelMixin\n", "").replace("ModelMixin", "nn.Module")
    assert findings(body) == []


def test_zero_rows_follow_helpers_and_module_calls_of_the_file() -> None:
    """Swin v2: padded in a method, cut into windows by a helper, normalised two modules
    down; the warning names the padding and the call that hands the rows in."""
    (d,) = findings(
        """
        from transformers import PreTrainedModel

        def windows(x, size):
            return x.view(-1, size * size, x.shape[-1])

        class Keys(nn.Module):
            def __init__(self):
                super().__init__()
                self.key = nn.Linear(8, 8, bias=False)

            def forward(self, h):
                return F.normalize(self.key(h), dim=-1)

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.keys = Keys()

            def forward(self, h):
                return self.keys(h)

        class Swin(PreTrainedModel):
            def __init__(self, config):
                super().__init__(config)
                self.block = Block()

            def pad(self, x):
                return F.pad(x, (0, 0, 0, 1, 0, 1))

            def forward(self, x):
                return self.block(windows(self.pad(x), 4))
        """
    )
    assert span(d)[:2] == (16, 16)
    assert "zero padding at line 32, handed in by `self.block(windows(self.pad(x), 4))`" in (
        d.message
    )
    assert [r.start.row for r in d.related][-2:] == [32, 35]


def test_a_tensor_the_code_makes_float16_names_its_cast() -> None:
    (d,) = findings(
        """
        def score(x):
            h = x.to(torch.float16)
            return torch.log(h.abs() + 1e-8)
        """
    )
    assert d.severity.value == "error"
    cast = "cast to float16 by `torch.float16` at line 6"
    assert d.message.endswith(f"(the tensor is float16: {cast})")


@pytest.mark.parametrize(
    ("region", "count"),
    [
        ('torch.autocast("cuda")', 1),  # CUDA's default autocast dtype is float16
        ('torch.autocast("cpu", dtype=torch.float16)', 1),
        ('torch.autocast("cpu")', 0),  # bfloat16 by default
        ('torch.autocast("cuda", dtype=torch.bfloat16)', 0),
    ],
)
def test_an_autocast_output_is_float16_only_in_a_float16_region(region: str, count: int) -> None:
    body = f"""
        def cost(x):
            head = nn.Linear(8, 4)
            with {region}:
                logits = head(x)
            return -(logits.sigmoid() + 1e-10).log()
        """
    assert len(findings(body)) == count


def test_autocasts_float32_softmax_needs_no_guard() -> None:
    body = """
        def entropy(x):
            head = nn.Linear(8, 4)
            with torch.autocast("cuda"):
                p = head(x).softmax(-1)
                return -(p * torch.log(p + 1e-8)).sum(-1)
        """
    assert findings(body) == []


MODEL = """import torch
from torch import nn

from pkg.utils import EPS


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return torch.log(self.proj(x).sigmoid() + EPS)


def main():
    return Head().half()(torch.randn(2, 8).half())
"""


@pytest.mark.parametrize(("utils", "rows"), [("EPS = 1e-10\n", [13]), ("EPS = 1e-6\n", [])])
def test_a_constant_of_another_file_is_read(tmp_path: Path, utils: str, rows: list[int]) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "utils.py").write_text(utils)
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    out = tmp_path / "out.json"
    argv = ["check", "--no-cache", "--exit-zero", "--output-format", "json", "-o", str(out)]
    assert cli.main([*argv, "--select", "MPC304", str(tmp_path)]) == 0
    found = json.loads(out.read_text())
    assert [(f["code"], f["location"]["row"]) for f in found] == [("MPC304", r) for r in rows]
    if rows:
        assert "`EPS` (1e-10) rounds to 0 in float16" in found[0]["message"]


@pytest.mark.parametrize(
    ("forward", "count"),
    [
        ("return F.normalize(self.proj(x), dim=-1)\n", 1),  # eps=1e-12 by default
        ("return F.normalize(self.proj(x), dim=-1, eps=1e-10)\n", 1),
        ("return F.cosine_similarity(self.proj(x), x, dim=-1)\n", 1),  # eps=1e-8
        ("return F.normalize(self.proj(x), dim=-1, eps=1e-6)\n", 0),
        ("return F.normalize(self.proj(x).float(), dim=-1)\n", 0),
    ],
)
def test_a_norm_floored_at_a_vanishing_eps(forward: str, count: int) -> None:
    found = findings(module(forward))
    assert len(found) == count
    if found:
        assert "which rounds to 0 in float16" in found[0].message
        assert "an all-zero row gives 0 / 0 = NaN" in found[0].message


def test_a_norm_of_rows_nothing_makes_zero_is_a_latent_warning() -> None:
    """float16 is shown (``Head().half()``), but the NaN needs an all-zero row, which a
    projection's output is only by accident: a warning that says so. Rows the code makes
    exactly 0 (zero padding) keep the error."""
    (found,) = findings(module("return F.normalize(self.proj(x), dim=-1)\n"))
    assert found.severity is Severity.WARNING
    assert "latent: only an all-zero row gives NaN, and no code here makes one" in found.message
    assert "half: `Head` is cast to half by" in found.message
    padded = "return F.normalize(F.pad(x, (0, 0, 0, 2)) * 2.0, dim=-1)\n"
    (found,) = findings(module(padded))
    assert found.severity is Severity.ERROR


def test_cuda_autocast_normalizes_in_float32() -> None:
    body = """
        def embed(x):
            head = nn.Linear(8, 4)
            with torch.autocast("cuda"):
                return F.normalize(head(x), dim=-1)
        """
    assert findings(body) == []
