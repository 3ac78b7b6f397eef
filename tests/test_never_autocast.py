"""A project that never turns autocast on cannot make a finding whose premise is autocast
(issue 36, "severity follows evidence"): MPC303's "if this runs under autocast" phases and
MPC402's ``out=`` matmul of a Function's inputs stay quiet there, and speak again as soon as
any file opens an enabled region, imports a trainer that may (Lightning, accelerate, ...),
or the project is a package its users run as they like.

The xfile pair ``good_never_autocast_rotary`` / ``warn_autocast_trainer_rotary`` proves the
MPC303 side under torch (tests/test_xfile.py); this drives MPC402 and the record's scan.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpcheck.project.records import blank, may_autocast, record_of
from tests.support import FIXTURES

FUNCTION = FIXTURES / "mpc402" / "bad_out_matmul_function_inputs.py"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("from torch.amp import autocast\n@autocast('cuda', enabled=False)\ndef f(): ...\n", False),
        ("with torch.autocast(device_type=d, enabled=False):\n    pass\n", False),
        ("from torch.cuda.amp import autocast\nprint(torch.is_autocast_enabled())\n", False),
        ("# autocast(...) in a comment\nx = 'torch.autocast(\"cuda\")'\n", False),
        ("with torch.autocast('cuda'):\n    pass\n", True),
        ("with torch.autocast('cuda', enabled=use_amp):\n    pass\n", True),
        ("ctx = nullcontext() if cpu else torch.amp.autocast(device_type=d, dtype=t)\n", True),
        ("with accelerator.autocast():\n    pass\n", True),
        ("make = torch.autocast\n", True),
        ("torch.set_autocast_enabled(True)\n", True),
        ("from lightning import Trainer\n", True),
        ("import accelerate\n", True),
        ("from transformers import Trainer, TrainingArguments\n", True),
        ("from transformers import AutoModel\n", False),
    ],
)
def test_a_file_may_turn_autocast_on(code: str, expected: bool) -> None:
    record = record_of(code.encode(), "pkg/train.py")
    assert record.autocasts is expected
    assert may_autocast(blank(code.encode()), []) is (expected and "autocast" in code)


def findings(root: Path) -> list[Any]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json"]
    done = subprocess.run([*cmd, "."], cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    found: list[Any] = json.loads(done.stdout)
    return found


SCRIPT = """\
import torch
from torch import nn

from .kernels import ChunkedLogits


def main() -> None:
    body, head = nn.Linear(8, 8), nn.Linear(8, 16, bias=False)
    {run}


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    ("run", "more", "expected"),
    [
        ("ChunkedLogits.apply(body(torch.randn(4, 8)), head.weight, 4)", {}, []),
        (
            "with torch.autocast('cuda', enabled=False):\n"
            "        ChunkedLogits.apply(body(torch.randn(4, 8)), head.weight, 4)",
            {},
            [],
        ),
        (
            "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
            "        ChunkedLogits.apply(body(torch.randn(4, 8)), head.weight, 4)",
            {},
            ["MPC402"],
        ),
        (
            "ChunkedLogits.apply(body(torch.randn(4, 8)), head.weight, 4)",
            {"pkg/fit.py": "import lightning\n"},
            ["MPC402"],
        ),
        (
            "ChunkedLogits.apply(body(torch.randn(4, 8)), head.weight, 4)",
            {"setup.py": "from setuptools import setup\nsetup(name='pkg')\n"},
            ["MPC402"],
        ),
    ],
    ids=["never", "disabled-only", "enabled", "lightning-import", "installable"],
)
def test_an_out_matmul_premise_needs_autocast_somewhere(
    tmp_path: Path, run: str, more: dict[str, str], expected: list[str]
) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    kernels = FUNCTION.read_text().split("\ndef main()", 1)[0]
    (pkg / "kernels.py").write_text(kernels)
    (pkg / "train.py").write_text(SCRIPT.format(run=run))
    for name, text in more.items():
        (tmp_path / name).write_text(text)
    assert [f["code"] for f in findings(tmp_path)] == expected


NANOGPT = """\
from contextlib import nullcontext

import torch

from .model import GPT

class Runner:
    def __init__(self, device_type):
        self.model = GPT()
        self._ctx = (
            nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type)
        )
        self.off = torch.autocast("cuda", enabled=False)

    def run(self, x):
        with self._ctx:
            y = self.model(x)
        with self.off:
            return self.model(y)
"""


def test_a_context_bound_to_autocast_covers_the_calls_entered_by_name() -> None:
    """nanoGPT's ``ctx = nullcontext() if cpu else autocast(...)``, ``with ctx:``: every call
    inside runs under that autocast or in float32; a context bound to a disabled one is none."""
    record = record_of(NANOGPT.encode(), "pkg/runner.py")
    (covered, uncovered) = record.calls
    assert covered[0] == "pkg.model.GPT" and covered[1] is not None
    assert "`with self._ctx`" in covered[1][2]
    assert uncovered == ("pkg.model.GPT", None)
