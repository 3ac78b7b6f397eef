"""Evidence of float32 and of code that cannot run (issue 36): loaded data is float32, not
the model's activation; another library's function gives its result no argument's dtype;
a quantity named by its unit is a Python number; a branch whose test is always false gives
no finding. Each case holds on the old engine's false alarm and its true counterpart."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from tests.support import check

MODULE = """
import torch
import torchaudio
from torch import nn
{imports}

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, p):
        {body}
        return self.proj(x)
"""


def codes(body: str, imports: str = "") -> list[tuple[str, int]]:
    indented = textwrap.indent(textwrap.dedent(body), " " * 8).strip()
    source = MODULE.format(body=indented, imports=imports)
    return [(d.code, d.start.row) for d in check(source)]


@pytest.mark.parametrize(
    "body",
    [
        "wav, sr = torchaudio.load(p)\nenergy = wav.pow(2).mean().sqrt()",
        "wav = torchaudio.load(p)[0]\nwav = wav / wav.pow(2).mean(-1, keepdim=True).sqrt()",
    ],
)
def test_a_loaded_waveform_is_float32_data(body: str) -> None:
    assert codes(body) == []


def test_the_model_activation_beside_it_is_still_reported() -> None:
    assert codes("wav, sr = torchaudio.load(p)\nenergy = x.pow(2).mean().sqrt()") == [
        ("MPC302", 14)
    ]


def test_another_librarys_function_does_not_take_its_arguments_dtype() -> None:
    """``torchaudio.functional.gain(x)`` is not a torch function: before, any ``torch*``
    name was, so its result was ``x``'s (the model's) dtype."""
    assert codes("y = torchaudio.functional.gain(x)\nenergy = y.pow(2).mean().sqrt()") == []


def test_a_to_tensor_transform_makes_float32_that_meets_half_latents() -> None:
    body = """
        to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.5, 0.5)])
        mask = to_tensor(p)
        x = torch.cat([x.half(), mask], 1)
    """
    assert codes(body, "from torchvision import transforms") == [("MPC102", 14)]
    cast = body.replace("mask], 1)", "mask.half()], 1)")
    assert codes(cast, "from torchvision import transforms") == []


@pytest.mark.parametrize(
    "test",
    ["False", "0", "None", "TYPE_CHECKING", 'type == "laplacian"', '"x" == len', "p and False"],
)
def test_a_branch_that_cannot_run_gives_nothing(test: str) -> None:
    body = f"if {test}:\n    x = x.masked_fill(x > 0, -1e9)"
    assert codes(body, "from typing import TYPE_CHECKING") == []


def test_the_else_of_a_branch_that_cannot_run_is_walked() -> None:
    body = 'if type == "a":\n    pass\nelse:\n    x = x.masked_fill(x > 0, -1e9)'
    assert codes(body) == [("MPC301", 16)]


def test_a_shadowed_builtin_is_a_real_test() -> None:
    source = MODULE.format(
        body='if type == "a":\n            x = x.masked_fill(x > 0, -1e9)', imports=""
    )
    shadowed = source.replace("def forward(self, x, p):", "def forward(self, x, p, type):")
    assert [(d.code, d.start.row) for d in check(shadowed)] == [("MPC301", 14)]


def test_an_input_never_used_as_a_tensor_may_be_a_python_number(tmp_path: Path) -> None:
    """Through the CLI: ``gpu_capacity_gb * 0.9 * 1e9`` (or ``x * 1e9``) of an input the
    function never indexes nor calls a tensor method on is no evidence of a float16 tensor,
    whatever its name; the same product over an input used as a tensor still is."""
    path = tmp_path / "budget.py"
    path.write_text(
        "import torch\n\n\n"
        "def budget(gpu_capacity_gb):\n"
        "    return gpu_capacity_gb * 0.9 * 1e9\n\n\n"
        "def scale(hidden):\n"
        "    return hidden * 1e9\n\n\n"
        "def scale_rows(hidden):\n"
        "    return hidden[:, 0] * 1e9\n"
    )
    out = tmp_path / "out.json"
    rc = cli.main(
        ["check", "--no-cache", "--exit-zero", "--output-format", "json", "-o", str(out), str(path)]
    )
    assert rc == 0
    rows = [f["location"]["row"] for f in json.loads(out.read_text())]
    assert rows == [13]


MODEL = """import torch
from torch import nn

from pkg.utils import NEAR_INF


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, mask):
        return self.proj(x).masked_fill(mask, -NEAR_INF)
"""


@pytest.mark.parametrize(
    ("utils", "rows"),
    [
        ("NEAR_INF = 1e20\n", [13]),  # a file without torch: read without a walk
        ("import torch\n\nNEAR_INF = 1e20\n", [13]),  # walked: the module's own numbers
        ("NEAR_INF = 1e20\nNEAR_INF = 1e4\n", []),  # bound twice: which one is unknown
        ("NEAR_INF = 1e4\n", []),  # fits float16
    ],
)
def test_a_module_number_crosses_files(tmp_path: Path, utils: str, rows: list[int]) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "utils.py").write_text(utils)
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    out = tmp_path / "out.json"
    argv = ["check", "--no-cache", "--exit-zero", "--output-format", "json", "-o", str(out)]
    assert cli.main([*argv, str(tmp_path)]) == 0
    found = [(f["code"], f["location"]["row"]) for f in json.loads(out.read_text())]
    assert found == [("MPC301", r) for r in rows]
