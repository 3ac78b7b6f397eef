"""MPC403 autocast-disabled-without-cast: autocast-made tensors crossing into a disabled region."""

from __future__ import annotations

import textwrap

import libcst as cst

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import check, span

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3


def source(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(source(body)) if d.code == "MPC403"]


def fixed(body: str) -> str:
    text = source(body)
    out, applied = apply_fixes(text, findings(body), unsafe=False)
    assert applied
    cst.parse_module(out)
    return out[len(HEADER) :]


MODEL = """
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 64)
        self.head = nn.Linear(64, 3)

    def forward(self, x, labels):
        with torch.autocast("cuda"):
            feats = self.backbone(x)
            with torch.autocast("cuda", enabled=False):
                logits = self.head(feats)
                return F.cross_entropy(logits, labels)
"""


def test_autocast_output_into_the_models_fp32_head() -> None:
    (d,) = findings(MODEL)
    assert span(d) == (15, 26, 15, 42)
    assert d.severity.value == "error"
    assert d.message == (
        "`feats` is computed in float16 by autocast at line 13, and autocast is off here "
        "(line 14), so nothing casts it: `self.head` has the model's weights (float32 under "
        "autocast); cast it with `.to(self.head.weight.dtype)`"
    )
    assert [(r.start.row, r.message) for r in d.related] == [
        (13, "`feats` computed in float16 by autocast"),
        (14, "autocast is disabled here"),
    ]
    assert d.fix is not None and d.fix.applicability == "safe"
    assert "logits = self.head(feats.to(self.head.weight.dtype))" in fixed(MODEL)


def test_fp32_module_and_explicit_fp32_operands_get_float() -> None:
    body = """
    def evaluate(images, labels, step):
        encoder = nn.Linear(16, 8)
        head = nn.Linear(8, 2)
        with torch.autocast("cuda"):
            emb = encoder(images)
            with torch.autocast("cuda", enabled=False):
                logits = head(emb)
                scores = emb * 2 @ head.weight.t()
                probs = torch.sigmoid(emb)
                target = torch.full_like(probs, 0.9, dtype=torch.float32)
                loss = F.binary_cross_entropy(probs, target)
        return logits, scores, loss
    """
    head, scores, loss = findings(body)
    assert span(head)[:2] == (11, 22)
    assert head.message.endswith(
        "`head` is built in float32 (the default) at line 7; cast it with `.float()`"
    )
    assert span(scores)[:2] == (12, 22)
    assert span(loss)[:2] == (15, 20)
    assert "`target` is made float32 by `dtype=torch.float32` at line 14" in loss.message
    out = fixed(body)
    assert "logits = head(emb.float())" in out
    assert "scores = (emb * 2).float() @ head.weight.t()" in out
    assert "loss = F.binary_cross_entropy(probs.float(), target)" in out


def test_disabled_decorator_with_an_inner_enabled_region() -> None:
    (d,) = findings(
        """
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Conv2d(3, 8, 3)
                self.readout = nn.Linear(8, 1)

            @torch.autocast("cuda", enabled=False)
            def forward(self, x):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    h = F.gelu(self.encoder(x)).mean((2, 3))
                return self.readout(h)
        """
    )
    assert span(d)[:2] == (15, 16)
    assert "`h` is computed in bfloat16 by autocast at line 14" in d.message
    assert "autocast is off here (line 11)" in d.message


def test_output_of_a_whole_model_under_autocast() -> None:
    (d,) = findings(
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = Body()
                self.head = nn.Linear(8, 1)

            def forward(self, x):
                with torch.autocast("cuda"):
                    h = self.body(x)
                with torch.autocast("cuda", enabled=False):
                    return self.head(h)
        """
    )
    assert "`h` is the output of `self.body` under autocast at line 13" in d.message


def test_silent_cases() -> None:
    assert not findings(
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.norm = nn.LayerNorm(8)
                self.out = nn.Linear(8, 8)
                self.scale = nn.Parameter(torch.ones(8))

            def forward(self, x, use_amp):
                with torch.autocast("cuda"):
                    h = self.proj(x)
                    with torch.autocast("cuda", enabled=False):
                        a = self.out(h.float())          # cast
                        b = self.norm(h) * self.scale    # norm accepts half input; mul promotes
                        c = self.out(x)                  # x did not come from autocast
                    with torch.autocast("cuda", enabled=use_amp):
                        d = self.out(h)                  # may be on: recast
                with torch.autocast("cuda", enabled=False):
                    freqs = x.float() @ self.scale.float()[:, None]   # rotary-style upcasts
                return a + b + c + d + freqs
        """
    )


READOUT = """
class Readout(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.gate = nn.Parameter(torch.ones(16))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        with torch.autocast("cuda"):
            h = self.proj(x)
            with torch.autocast("cuda", enabled=False):
                gated = self.head(h * self.gate)
                return gated + self.head(self.norm(h))
"""


def test_norm_keeps_the_half_dtype_and_a_float32_parameter_promotes() -> None:
    # ``h * self.gate`` is float32 (the fp32 parameter promotes it; measured on CPU autocast),
    # while a float32 LayerNorm returns its bfloat16/float16 input's dtype (torch-truth c01c).
    (d,) = findings(READOUT)
    assert span(d) == (18, 32, 18, 55)
    assert d.message == (
        "`self.norm(h)` is the output of `self.norm` on an input computed in float16 by "
        "autocast at line 18, and autocast is off here (line 16), so nothing casts it: "
        "`self.head` has the model's weights (float32 under autocast); cast it with "
        "`.to(self.head.weight.dtype)`"
    )
    assert "self.head(self.norm(h).to(self.head.weight.dtype))" in fixed(READOUT)


def test_autocast_policy_float32_meets_half_in_a_matmul() -> None:
    """``softmax`` is on CUDA autocast's float32 list: its output meets the half values."""
    body = """
        class Attention(nn.Module):
            def forward(self, q, k, v, w):
                with torch.autocast("cuda", dtype=torch.float16):
                    attn = (q @ k.transpose(-1, -2)).softmax(-1)
                    v = v @ w
                    h = w.half()
                    with torch.autocast("cuda", enabled=False):
                        a = torch.einsum("bij,bjd->bid", attn, v)
                        b = torch.bmm(attn, h)
                        c = attn.to(v.dtype) @ v
                return a, b, c
        """
    found = findings(body)
    assert [d.start.row for d in found] == [12, 13]
    policy = "`attn` is float32: `softmax` runs in float32 under autocast (line 8)"
    assert all(policy in d.message for d in found), found[0].message


def test_autocast_policy_float32_on_cpu_follows_the_cpu_lists() -> None:
    """CPU autocast runs ``softmax`` in bfloat16 (not on its float32 list): no clash."""
    body = """
        class Attention(nn.Module):
            def forward(self, q, k, v):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    attn = (q @ k.transpose(-1, -2)).softmax(-1)
                    v = v @ k
                    with torch.autocast("cpu", enabled=False):
                        return attn @ v
        """
    assert findings(body) == []


QUANTIZER = """
class Quantizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.project_in = nn.Linear(32, 4)
        self.register_buffer("codebook", torch.randn(16, 4))

    @torch.autocast("cuda", enabled=False)
    def forward(self, x):
        x = self.project_in(x)
        return torch.einsum("... i d, j d -> ... i j", x, self.codebook)
"""


def test_input_of_a_function_that_turns_autocast_off() -> None:
    """The decorator matters only to a caller under autocast: its inputs are autocast's half
    there (lucidrains' LFQ and FSQ before their fixes); a warning that states the premise."""
    (d,) = findings(QUANTIZER)
    assert span(d)[:2] == (13, 13)
    assert d.severity.value == "warning"
    assert d.message == (
        "`x` is an input (line 12) of a function that turns autocast off (line 11), which "
        "matters only when its caller runs under autocast, and there `x` is half; nothing "
        "casts it: `self.project_in` has the model's weights (float32 under autocast); cast it "
        "with `.to(self.project_in.weight.dtype)` (latent: raises when called under autocast)"
    )
    assert "x = self.project_in(x.to(self.project_in.weight.dtype))" in fixed(QUANTIZER)


def test_inputs_cast_on_entry_or_outside_a_disabling_decorator_are_quiet() -> None:
    entry = "    def forward(self, x):\n"
    cast = QUANTIZER.replace(entry, entry + "        x = x.float()\n")
    assert findings(cast) == []
    plain = QUANTIZER.replace('    @torch.autocast("cuda", enabled=False)\n', "")
    assert findings(plain) == []
    enabled = QUANTIZER.replace("enabled=False", "dtype=torch.float16")
    assert findings(enabled) == []


def test_inputs_through_einops_pack_and_a_helper_named_t() -> None:
    """``pack_one(t, pattern)``: ``t`` is an int by its name only; the half input passed to
    it comes back out of ``einops.pack`` (``torch.cat`` of the list, and the shapes)."""
    entry = "    def forward(self, x):\n"
    packed = "        if x.ndim >= 4:\n            x, ps = pack_one(x, 'b * d')\n"
    body = QUANTIZER.replace(entry, entry + packed)
    helper = "from einops import pack\n\ndef pack_one(t, pattern):\n    return pack([t], pattern)\n"
    (d,) = findings(helper + body)
    assert "`x` is an input" in d.message
