"""A model of another project file that the project only builds in float32, handed half
values by a script with no autocast (``decoder.decode(latents)`` of a half denoiser's
latents): its method hands them as they came to a float32 Linear/conv, which raises ("Input
type (c10::Half) and bias type (float) should be the same"). The class's summary says which
layer of which method gets which inputs so (``ClassSummary.feeds``); the project's evidence
for the class, by its qualified name, says it stays float32. The CLI side is
``fixtures/xfile/*_imported_decoder`` (tests/test_xfile.py); the same-file case is
tests/test_script_models.py."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcheck.project import summarise
from mpcheck.project.summarise import FileSummariser
from tests.support import XFILE, project_findings
from tests.test_cache import copy_tree, run

VAE = """\
import torch
from torch import nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv_in = nn.Conv2d(3, c, 3, padding=1)

    def forward(self, x):
        return self.conv_in(x)


class Vae(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.encoder = Encoder(c)
        self.post = nn.Conv2d(c, c, 1)
        self.norm = nn.GroupNorm(2, c)
        self.proj = nn.Linear(c, c)
        self.scale = 0.18215

    def encode(self, x):
        return self.encoder(x)

    def decode(self, z, mask=None):
        {body}

    def _private(self, z):
        return self.post(z)
"""


CONV_IN = "        return self.conv_in(x)"  # the layer ``Vae.encode`` reaches, in ``Encoder``


@pytest.fixture
def fresh() -> Iterator[None]:
    summarise.forget()
    yield
    summarise.forget()


@pytest.mark.parametrize(
    ("body", "fed"),
    [
        ("return self.post(z)", (((0,), "self.post"),)),
        ("return self.post(z / self.scale)", (((0,), "self.post"),)),  # arithmetic keeps it
        ("return self.post(torch.relu(z))", (((0,), "self.post"),)),
        ("return self.proj(z + mask)", (((0, 1), "self.proj"),)),  # both inputs reach it
        ("return self.post(z.to(self.post.weight.dtype))", ()),  # cast to the weights
        ("return self.post(z.float())", ()),
        ("return self.norm(z)", ()),  # a norm takes a half input with float32 weights
        ("z = self.norm(z)\n        return self.post(z)", ()),  # (not followed through a norm)
        ("with torch.autocast('cuda'):\n            return self.post(z)", ()),
        ("return z * self.scale", ()),  # no weights
    ],
)
def test_the_summary_lists_the_layers_each_method_hands_its_inputs(
    tmp_path: Path, fresh: None, body: str, fed: tuple[tuple[tuple[int, ...], str], ...]
) -> None:
    (tmp_path / "vae.py").write_text(VAE.format(body=body))
    summary = FileSummariser(tmp_path).summarise(tmp_path / "vae.py", lambda *a: None)
    assert summary is not None
    feeds = summary.classes["Vae"].feeds
    assert tuple((at, p.text) for m, at, p in feeds if m == "decode") == fed
    # a module of a class of the file counts when its ``forward`` feeds a layer: that layer
    # is named; a private method is no other file's business
    assert [(m, at, p.text) for m, at, p in feeds if m != "decode"] == [
        ("encode", (0,), "self.conv_in")
    ]
    encode = next(p for m, _, p in feeds if m == "encode")
    assert (encode.path, encode.line) == ("vae.py", VAE.splitlines().index(CONV_IN) + 1)
    again = type(summary).from_json(summary.to_json())
    assert again is not None and again.classes["Vae"].feeds == feeds


DECODER = """
    import torch
    from torch import nn


    class Decoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.post = nn.Conv2d(c, c, 1)

        def decode(self, z):
            return self.post(z)

        def forward(self, z):
            return self.post(z)
"""
DENOISER = """
    import torch
    from torch import nn


    class Denoiser(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return self.conv(x)
"""
SAMPLE = """
    import torch
    {imports}


    @torch.no_grad()
    def main():
        denoiser = Denoiser(4).half()
        decoder = {build}
        {extra}
        latents = denoiser(torch.randn(1, 4, 8, 8).half())
        image = {call}
        return image
"""
PLAIN = {
    "imports": "from models.unet import Denoiser\n    from models.vae import Decoder",
    "build": "Decoder(4)",
    "extra": "pass",
    "call": "decoder.decode(latents)",
}


def findings(tmp_path: Path, change: dict[str, str], **files: str) -> set[tuple[str, int, str]]:
    project = {
        "models/__init__.py": "",
        "models/unet.py": DENOISER,
        "models/vae.py": DECODER,
        "sample.py": SAMPLE.format(**{**PLAIN, **change}),
    }
    return project_findings(tmp_path, {**project, **files}, ("MPC104",))


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"call": "decoder(latents)"},  # ``forward``
        {"call": "decoder.decode(z=latents)"},
        {"call": "decoder.decode(latents / 0.18215)"},
        {
            "imports": "from models.unet import Denoiser\n    import models.vae as vae",
            "build": "vae.Decoder(4)",
        },
        {
            "imports": "from models.unet import Denoiser\n    import models.vae",
            "build": "models.vae.Decoder(4)",
        },
        {
            "imports": "from models.unet import Denoiser\n    from models import Decoder"
        },  # re-export
    ],
)
def test_a_half_value_into_another_files_float32_model_is_reported(
    tmp_path: Path, change: dict[str, str]
) -> None:
    files = {"models/__init__.py": "from .vae import Decoder\n"}
    sample = textwrap.dedent(SAMPLE.format(**{**PLAIN, **change})).lstrip().splitlines()
    row = next(i for i, line in enumerate(sample, 1) if "image = " in line)
    assert findings(tmp_path, change, **files) == {("sample.py", row, "MPC104")}


@pytest.mark.parametrize(
    ("change", "files"),
    [
        ({"call": "decoder.decode(latents.float())"}, {}),  # cast at the call
        ({"build": "Decoder(4).half()"}, {}),  # both half
        ({"extra": "decoder.to(torch.float16)"}, {}),
        ({}, {"other.py": "from models.vae import Decoder\nm = Decoder(4).half()\n"}),
        ({"call": "decoder.decode(torch.randn(1, 4, 8, 8))"}, {}),  # float32 input
        # the method casts what it is given
        (
            {},
            {
                "models/vae.py": DECODER.replace(
                    "self.post(z)", "self.post(z.to(self.post.weight.dtype))"
                )
            },
        ),
    ],
)
def test_a_float32_model_that_gets_float32_or_is_cast_is_quiet(
    tmp_path: Path, change: dict[str, str], files: dict[str, str]
) -> None:
    assert findings(tmp_path, change, **files) == set()


AUTOENCODER = """

    class Autoencoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.decoder = Decoder(c)

        def decode(self, z):
            return self.decoder(z)
"""


@pytest.mark.parametrize("where", ["models.vae", "models.auto"])
def test_a_method_running_a_part_whose_forward_feeds_a_layer_is_followed(
    tmp_path: Path, where: str
) -> None:
    """``vae.decode(z)`` hands ``z`` to ``self.decoder``, whose ``forward`` runs it through
    a conv: a class of the same file (its summary names that conv) or of another (whose own
    summary says so)."""
    imports = f"from models.unet import Denoiser\n    from {where} import Autoencoder"
    change = {"imports": imports, "build": "Autoencoder(4)"}
    if where == "models.vae":
        files = {"models/vae.py": DECODER + AUTOENCODER}
    else:
        auto = "\n    from torch import nn\n    from models.vae import Decoder\n" + AUTOENCODER
        files = {"models/auto.py": auto}
    assert len(findings(tmp_path, change, **files)) == 1


@pytest.mark.parametrize(("region", "found"), [("dtype=torch.float16", 0), ("enabled=False", 1)])
def test_autocast_around_the_call_is_quiet(tmp_path: Path, region: str, found: int) -> None:
    call = (
        "None\n"
        f"        with torch.autocast('cpu', {region}):\n"
        "            image = decoder.decode(latents)"
    )
    assert len(findings(tmp_path, {"call": call})) == found


CASE = XFILE / "bad_half_latents_into_imported_decoder"
DECODE = "return self.out(torch.relu(self.post(z)))"


def test_a_method_that_starts_casting_its_input_rechecks_the_script(
    tmp_path: Path, fresh: None
) -> None:
    """The finding rests on the class's summary: an edit of ``decode`` that casts its input
    changes that summary, so the script is checked again (and is quiet), as a cold run."""
    tree = copy_tree(CASE, tmp_path / "case")
    status, before, _ = run(tree)
    assert status == 1 and "MPC104" in before
    vae = tree / "models" / "vae.py"
    vae.write_text(vae.read_text().replace(DECODE, DECODE.replace("(z)", "(z.float())")))
    status, after, _ = run(tree)
    assert status == 0 and after == run(tree, "--no-cache")[1]
