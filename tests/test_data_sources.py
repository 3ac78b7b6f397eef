"""Data sources (``mpcheck/knowledge/sources.py``, issue 36 items 1 and 5): what loaders,
decoders and numpy constructors return is data of their library's dtype, not the model's
activation. Float32/float64 data gives no half finding (a helper's parameter multiplied with
it is no longer taken for the model's half activation), meets a half model as float32 does
(MPC102 names the source), and is half only when the code casts it. Each case is checked
with the old engine's behaviour in mind: the quiet ones were MPC302 false alarms, the
reported ones were missed."""

from __future__ import annotations

import textwrap

import pytest

from mpcheck.diagnostics import Severity
from mpcheck.knowledge import ranges, sources
from tests.support import check

MODULE = """
import cv2
import librosa
import numpy as np
import soundfile as sf
import torch
import torchaudio
import torchvision
from PIL import Image
from torch import nn
from torchvision.transforms import functional as TF


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.proj(x)

    def embed(self, path, latents):
        {body}
"""
BODY_ROW = MODULE.splitlines().index("        {body}")  # the body's first line is row 1


def findings(body: str) -> list[tuple[str, int, Severity]]:
    indented = textwrap.indent(textwrap.dedent(body).strip(), " " * 8).strip()
    source = MODULE.format(body=indented)
    return [(d.code, d.start.row - BODY_ROW, d.severity) for d in check(source)]


# Float32/float64 data times a parameter of the model: torch promotes to the data's dtype,
# so its energy is not computed in half. Before, the unknown data let the parameter decide.
@pytest.mark.parametrize(
    "load",
    [
        "data, sr = sf.read(path)\nwav = torch.from_numpy(data)",
        "data, sr = sf.read(path, dtype='float32')\nwav = torch.from_numpy(data)",
        "y, sr = librosa.load(path)\nwav = torch.tensor(y)",
        "wav, sr = torchaudio.load(path)",
        "wav = torch.from_numpy(np.random.randn(16000))",
        "wav = torch.as_tensor(np.zeros(16000, dtype=np.float32))",
        "wav = torch.from_numpy(np.zeros(16000).astype(np.float32))",
    ],
)
def test_loaded_float_data_is_not_a_half_activation(load: str) -> None:
    body = f"{load}\nwav = wav * self.gain\nreturn wav.pow(2).mean().sqrt()"
    assert findings(body) == []


def test_the_same_arithmetic_on_an_unknown_tensor_is_still_reported() -> None:
    """The control: a tensor nothing is known of, times the parameter, is the model's."""
    body = "wav = torch.load(path)\nwav = wav * self.gain\nreturn wav.pow(2).mean().sqrt()"
    assert [(c, r) for c, r, _ in findings(body)] == [("MPC302", 3)]


@pytest.mark.parametrize(
    "load",
    [
        "data, sr = sf.read(path, dtype='float16')\nwav = torch.from_numpy(data)",
        "data, sr = sf.read(path)\nwav = torch.from_numpy(data).half()",
        "wav = torch.from_numpy(np.random.randn(16000).astype(np.float16))",
    ],
)
def test_data_cast_to_half_is_half_with_the_cast_as_evidence(load: str) -> None:
    """Half because the code says so: reported, and not as a latent premise."""
    body = f"{load}\nreturn wav.pow(2).mean().sqrt()"
    found = check(MODULE.format(body=textwrap.indent(body, " " * 8).strip()))
    assert [(d.code, d.start.row - BODY_ROW) for d in found] == [("MPC302", load.count("\n") + 2)]
    assert "latent" not in found[0].message


@pytest.mark.parametrize(
    ("load", "what"),
    [
        ("mask = torch.from_numpy(np.ones((1, 1, 8, 8)))", "float64"),
        ("mask = torch.from_numpy(np.zeros((1, 1, 8, 8), dtype=np.float32))", "float32"),
        ("mask = TF.to_tensor(Image.open(path).convert('L'))", "float32"),
    ],
)
def test_float_data_concatenated_with_half_latents_is_reported(load: str, what: str) -> None:
    """Recall: data of a known float dtype meets the half latents (MPC102, at the source).
    Before, ``from_numpy`` of an array gave a tensor of unknown dtype: nothing was found."""
    body = f"{load}\nx = torch.cat([latents.half(), mask], 1)\nreturn self.proj(x)"
    found = check(MODULE.format(body=textwrap.indent(body, " " * 8).strip()))
    assert [(d.code, d.start.row - BODY_ROW) for d in found] == [("MPC102", 1)]
    assert what in found[0].message


@pytest.mark.parametrize(
    "load",
    [
        "wav = torch.from_numpy(cv2.imread(path)) / 255.0",
        "wav = torchvision.io.read_image(path) / 255.0",
        "wav = TF.pil_to_tensor(Image.open(path)) / 255.0",
        "wav = torch.from_numpy(np.array(Image.open(path).convert('L'))) / 255.0",
    ],
)
def test_decoded_pixels_are_data_too(load: str) -> None:
    body = f"{load}\nwav = wav * self.gain\nreturn wav.pow(2).mean().sqrt()"
    assert findings(body) == []


def test_uint8_pixels_scaled_by_255_are_bounded_by_one() -> None:
    """``read_image(p) / 255.`` is in [0, 1] (uint8's bound over 255): its square cannot
    overflow even cast to half."""
    body = "img = (torchvision.io.read_image(path) / 255.0).half()\nreturn img.pow(2).mean()"
    assert findings(body) == []


def test_one_table_states_each_bound_once() -> None:
    """The waveform loaders' bound lives in their rows; ranges reads it from there."""
    assert "torchaudio.load" in sources.SOURCES
    assert not hasattr(ranges, "WAVEFORM_LOADERS")
    assert "torchvision.transforms.functional.to_tensor" in ranges.UNIT_FUNCTIONS
    assert sources.SOURCES["torchaudio.load"].bound == 1.0
