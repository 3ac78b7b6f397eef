"""MPC106 half-without-kernel: an FFT, STFT, linear-algebra routine or quantile of a tensor
the project shows to be half; silent on float32 inputs, power-of-two transforms, CPU
autocast regions and the premise alone."""

from __future__ import annotations

import textwrap

from mpcheck.diagnostics import Diagnostic
from tests.support import check, span

HEADER = "import torch\nfrom torch import nn\n"  # lines 1-2


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC106"]


def module(forward: str, build: str = "Head().half()") -> str:
    """A module whose ``forward`` is ``forward`` (line 9 on), built by the script below it."""
    return (
        "\nclass Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = nn.Linear(8, 8)\n\n"
        "    def forward(self, x):\n"
        "        h = self.proj(x)\n"
        + textwrap.indent(textwrap.dedent(forward), "        ")
        + f"\n\nmodel = {build}\n"
    )


def summary(found: list[Diagnostic]) -> list[tuple[int, str]]:
    return [(d.start.row, d.severity.value) for d in found]


def test_a_transform_of_a_cast_models_activation_follows_its_size() -> None:
    body = module(
        "a = torch.fft.rfft(h, n=1000)\n"  # line 10: not a power of two: raises everywhere
        "b = torch.fft.rfft(h, n=1024)\n"  # cuFFT computes it in float16
        "c = torch.fft.rfft(h)\n"  # the data's length decides: a warning
        "d = torch.fft.fft2(h, s=(60, 64))\n"
        "e = torch.fft.fft2(h, s=(64, 64))\n"
        "f = h.stft(400, return_complex=True)\n"
        "return a, b, c, d, e, f\n"
    )
    assert summary(findings(body)) == [(11, "error"), (13, "warning"), (14, "error"), (16, "error")]


def test_the_message_says_what_raises_where_and_why_it_is_half() -> None:
    (d,) = findings(module("return torch.linalg.inv(h @ h.T)\n"))
    assert span(d) == (11, 16, 11, 41)
    assert d.severity.value == "error"
    assert d.message == (
        "`h @ h.T` is in the model's dtype here, and a linear-algebra routine has no half "
        "kernel: `torch.linalg.inv` raises `linalg.inv: Low precision dtypes not supported. Got "
        "Half` "
        "on every device (no half routine exists for it); compute it on `(h @ h.T).float()` "
        "and cast the result back (half: `Head` is cast to half by `Head().half()` at line 14)"
    )


def test_a_tensor_the_code_makes_bfloat16_names_its_dtype() -> None:
    body = """
    feats = torch.randn(16, 8).to(torch.bfloat16)
    scores = torch.linalg.svdvals(feats)
    top = feats.quantile(0.9)
    """
    found = findings(body)
    assert summary(found) == [(5, "error"), (6, "error")]
    assert "raises `\"linalg_svd_cpu\" not implemented for 'BFloat16'` on every" in found[0].message
    assert found[1].message.startswith("`feats` is bfloat16 here, and a quantile has no half")


def test_the_premise_alone_float32_inputs_and_cpu_autocast_are_silent() -> None:
    # a module nothing casts: half only if it runs in half (its input is most often data)
    assert findings(module("return torch.fft.rfft(h, n=1000)\n", build="Head()")) == []
    # a waveform as loaded, and a transform of a float32 copy
    assert findings(module("return torch.stft(h.float(), 1280, return_complex=True)\n")) == []
    body = """
    wav = torch.randn(2, 16000)
    spec = torch.stft(wav, 1280, return_complex=True)
    h = nn.Linear(8, 8)(torch.randn(2, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.fft.rfft(nn.Linear(8, 8)(h), n=1000)
    """
    assert findings(body) == []


def test_cuda_autocast_leaves_the_transform_to_its_input_dtype() -> None:
    body = """
    layer = nn.Linear(8, 8).cuda()
    with torch.autocast("cuda"):
        h = layer(torch.randn(4, 8, device="cuda"))
        spectrum = torch.fft.rfft(h, n=1000)
        kept = torch.fft.rfft(h.float(), n=1000)
    """
    assert summary(findings(body)) == [(7, "error")]


def test_a_branch_a_half_run_never_takes_is_silent() -> None:
    body = module("if h.dtype == torch.float32:\n    return torch.linalg.inv(h @ h.T)\nreturn h\n")
    assert findings(body) == []


def test_what_a_cast_model_is_handed_is_its_callers_dtype() -> None:
    """A layer of the half model computes in half; the waveform ``forward`` is handed is
    whatever the caller passes (loaded audio is float32): not reported on the model's dtype."""
    body = (
        "\nclass Front(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = nn.Linear(201, 8)\n\n"
        "    def forward(self, wav):\n"
        "        spec = torch.stft(wav, 400, return_complex=True).abs()\n"
        "        h = self.proj(spec.transpose(1, 2))\n"
        "        return torch.fft.rfft(h, n=1000)\n"
        "\n\nmodel = Front().half()\n"
    )
    assert summary(findings(body)) == [(12, "error")]


def test_numpy_of_bfloat16_raises_and_float16_converts() -> None:
    """numpy has no bfloat16: ``.numpy()`` raises on it alone (float16 is numpy.float16)."""
    found = findings(module("return h.detach().cpu().numpy()\n", build="Head().to(torch.bfloat16)"))
    assert summary(found) == [(11, "error")]
    assert found[0].message.startswith(
        "`h.detach().cpu()` is in the model's dtype here, and numpy has no bfloat16: "
        "`.numpy()` raises `TypeError: Got unsupported ScalarType BFloat16`; convert "
        "`h.detach().cpu().float()` instead (half: `Head` is cast to half by "
    )
    assert findings(module("return h.detach().numpy()\n")) == []  # (``.half()``: float16)
    body = """
    feats = torch.randn(16, 8).to(torch.bfloat16)
    a = feats.numpy()
    b = feats.float().numpy()
    c = feats.to(torch.float32).cpu().numpy()
    d = feats.detach().cpu().float().numpy()
    e = torch.randn(4, dtype=torch.float16).numpy()
    """
    assert summary(findings(body)) == [(5, "error")]


def test_numpy_of_the_models_dtype_unwritten_is_a_warning_naming_bfloat16() -> None:
    # a cast to a dtype variable: half on evidence, bfloat16 only on the premise
    found = findings(module("return h.detach().numpy()\n", build="Head().to(args.dtype)"))
    assert summary(found) == [(11, "warning")]
    assert found[0].message.endswith("; this holds if it is bfloat16 (float16 converts)")
