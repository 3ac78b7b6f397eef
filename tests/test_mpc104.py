"""MPC104 submodule-dtype-split: exact positions, messages, related locations and silences."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3

CLASSIFIER = """
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.norm(self.backbone(x)))
"""  # lines 4-13


def findings(body: str, code: str = "MPC104") -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == code]


def related(d: Diagnostic) -> list[tuple[int, int, str]]:
    return [(r.start.row, r.start.column, r.message) for r in d.related]


def test_fp32_head_called_with_half_features() -> None:
    body = CLASSIFIER + textwrap.dedent(
        """
        def predict(images):
            model = Classifier().half()
            model.head.float()
            feats = model.backbone(images.half())
            return model.head(feats)
        """
    )
    (d,) = findings(body)
    assert span(d) == (19, 12, 19, 29)
    assert d.message == (
        "`model.head` is float32 (cast to float32 by `.float()` at line 17) while `model` is "
        "float16 (cast to float16 by `.half()` at line 16), but `feats` passed to it is float16 "
        "(the output of `model.backbone` at line 18); the layer refuses mismatched dtypes; cast "
        "it to its weights' dtype at this call"
    )
    assert related(d) == [
        (17, 5, "`model.head` cast to float32 by `.float()`: the split"),
        (18, 13, "`feats` the output of `model.backbone`"),
        (16, 13, "`model` cast to float16 by `.half()`"),
    ]
    assert d.fix is not None and d.fix.applicability == "unsafe"
    out, n = apply_fixes(HEADER + textwrap.dedent(body), [d], unsafe=True)
    assert n == 1
    assert out.splitlines()[18] == "    return model.head(feats.to(model.head.weight.dtype))"


def test_split_reached_through_the_models_forward() -> None:
    body = CLASSIFIER + textwrap.dedent(
        """
        def train(mixed_precision):
            weight_dtype = torch.float32
            if mixed_precision == "fp16":
                weight_dtype = torch.float16
            model = Classifier()
            model.to(dtype=weight_dtype)
            model.backbone.to(torch.float32)
            batch = torch.randn(4, 16)
            return model(batch)
        """
    )
    (d,) = findings(body)
    assert span(d) == (23, 12, 23, 24)
    assert d.message == (
        "`model(batch)` runs `self.norm(self.backbone(x))` (line 13) with "
        "`self.backbone(x)` float32 (the output of `self.backbone` at line 13) and "
        "`self.norm` float16 on some paths (cast by `.to(weight_dtype)` at line 20): "
        "`model.backbone.to(torch.float32)` at line 21 cast part of `model` apart from the rest; "
        "the norm refuses mismatched dtypes; cast the input where `forward` calls the part, "
        "or keep the model in one dtype"
    )
    assert related(d) == [
        (13, 26, "`self.norm(self.backbone(x))` in the model's code is where the two dtypes meet"),
        (21, 5, "the split: cast by `.to(torch.float32)`"),
        (13, 36, "`self.backbone(x)` the output of `self.backbone`"),
        (20, 5, "`self.norm` cast by `.to(weight_dtype)`"),
        (18, 24, "`weight_dtype` is `torch.float16` here"),  # where the dtype came from
    ]
    assert d.fix is None  # the cast belongs in the model's code


def test_method_of_the_model_names_the_model() -> None:
    (d,) = findings(
        """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv_in = nn.Conv2d(4, 8, 3)

            def forward(self, z):
                return self.conv_in(z)

        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.post_quant_conv = nn.Conv2d(4, 4, 1)
                self.decoder = Decoder()

            def decode(self, z):
                return self.decoder(self.post_quant_conv(z))

        def run(latents):
            vae = VAE().to(torch.float16)
            vae.decoder.float()
            return vae.decode(latents.half())
        """
    )
    assert span(d) == (25, 12, 25, 38)
    assert "`vae.decoder.float()` at line 24 cast part of `vae` apart from the rest" in d.message
    assert "runs `self.conv_in(z)` (line 11) with `z` float16" in d.message
    assert [(r.start.row, r.start.column) for r in d.related] == [(11, 16), (24, 5), (20, 29)]


def test_rest_of_the_model_fed_the_split_parts_output() -> None:
    body = CLASSIFIER + textwrap.dedent(
        """
        def embed(images):
            model = Classifier()
            model.backbone.half()
            feats = model.backbone(images.half())
            return model.head(feats)
        """
    )
    (d,) = findings(body)
    assert span(d) == (19, 12, 19, 29)
    assert d.message == (
        "`feats` is float16, the output of `model.backbone`, which is float16 (cast to float16 "
        "by `.half()` at line 17) unlike the rest of `model`; `model.head` has `model`'s "
        "weights, float32 (built in float32 (the default) at line 16); the layer refuses "
        "mismatched dtypes; cast it to its weights' dtype at this call"
    )
    assert [(r.start.row, r.start.column) for r in d.related] == [(17, 5), (18, 13), (16, 13)]
    assert d.fix is not None
    assert d.fix.edits[0].content == "feats.to(model.head.weight.dtype)"


def test_head_built_in_float32_after_the_cast() -> None:
    (d,) = findings(
        CLASSIFIER
        + textwrap.dedent(
            """
            def finetune(x):
                model = Classifier().half()
                model.head = nn.Linear(16, 10)
                return model(x.half())
            """
        )
    )
    assert span(d) == (18, 12, 18, 27)
    assert "`nn.Linear(16, 10)` at line 17 built float32 part of `model` apart" in d.message
    assert "`self.head` float32 (built in float32 (the default) at line 17)" in d.message


def test_part_built_with_a_literal_dtype_inside_the_model() -> None:
    (d,) = findings(
        """
        class MoeBlock(nn.Module):
            def __init__(self, dim, dtype=None):
                super().__init__()
                self.gate = nn.Linear(dim, 8, bias=False, dtype=torch.float32)
                self.proj = nn.Linear(dim, dim, dtype=dtype)

            def forward(self, hidden_states):
                logits = self.gate(hidden_states)
                return self.proj(hidden_states), logits
        """
    )
    assert span(d) == (12, 18, 12, 42)
    assert d.message == (
        "`self.gate` is float32 (built with dtype=torch.float32 at line 8) while the rest of "
        "`self` follows the model's dtype, and so does `hidden_states` passed to it "
        "(`hidden_states`, an input of the function at line 11): when the model runs in half "
        "precision (built or loaded with a half dtype, which leaves a part's explicit dtype "
        "alone), the layer refuses mismatched dtypes; cast it to its weights' dtype at this call"
        " (latent: raises if `MoeBlock` runs in half without autocast)"
    )
    assert related(d) == [(8, 21, "`self.gate` built with dtype=torch.float32: the split")]


APEX = """
from apex.normalization import FusedRMSNorm

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.final_norm = FusedRMSNorm(8)

    def forward(self, h):
        return self.final_norm(self.fc(h))
"""  # lines 4-14


def test_apex_fused_norm_kept_in_float32() -> None:
    through, direct = findings(
        APEX
        + textwrap.dedent(
            """
            def generate(h):
                model = Decoder().half()
                model.final_norm.float()
                out = model(h.half())
                return model.final_norm(out)
            """
        )
    )
    assert span(through) == (19, 11, 19, 26)
    assert "runs `self.final_norm(self.fc(h))` (line 14)" in through.message
    assert "the fused norm (its CUDA kernel reads the weights in the input's dtype)" in (
        through.message
    )
    assert span(direct) == (20, 12, 20, 33)
    assert direct.message.startswith(
        "`model.final_norm` is float32 (cast to float32 by `.float()` at line 18) while "
        "`model` is float16"
    )


@pytest.mark.parametrize(
    "lines",
    [
        # cast at the call
        "model.head.float(); feats = model.backbone(x); model.head(feats.float())",
        "model.head.float(); feats = model.backbone(x); model.head(feats.to(torch.float32))",
        "model.head.float(); model.head(model.backbone(x).to(model.head.weight.dtype))",
        # torch's norms kept in float32 accept a half input and return its dtype
        "model.norm.float(); model(x); model.norm(x)",
        "model.norm.to(torch.float32); model.head(model.norm(model.backbone(x)))",
        # the whole model in one dtype again
        "model.head.float(); model.float(); model(x.float())",
        # a part fed its own dtype
        "model.backbone.float(); model.backbone(x.float())",
    ],
)
def test_silent_when_the_call_matches_the_part(lines: str) -> None:
    statements = lines.split("; ")
    body = CLASSIFIER + "def run(x):\n    model = Classifier().half()\n"
    body += "".join(f"    {line}\n" for line in statements)
    assert findings(body) == []


def test_silent_under_autocast() -> None:
    body = CLASSIFIER + textwrap.dedent(
        """
        def run(x):
            model = Classifier().half()
            model.head.float()
            with torch.autocast("cuda", dtype=torch.float16):
                model(x)
                model.head(model.backbone(x))
        """
    )
    assert findings(body) == []


def test_silent_for_parts_that_follow_the_model() -> None:
    body = """
        def conv_bn(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout))

        class Net(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.stem = conv_bn(3, 8)  # built by a helper: still cast with the model
                self.norm = nn.LayerNorm(8, dtype=torch.float32)  # norms accept half input
                self.router = nn.Linear(8, 4, dtype=torch.float32)
                self.out = nn.Linear(8, 8, dtype=torch.float32)

            def forward(self, x, h):
                y = self.stem(x)
                h = self.norm(h)
                if self.router.weight.dtype == torch.float32:
                    h = h.float()  # HunYuan-MoE's gate: upcast when the router is float32
                logits = self.router(h)
                out = self.out(h.to(get_parameter_dtype(self.out)))
                return y, logits, out
        """
    assert findings(body) == []
