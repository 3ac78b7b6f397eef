"""Autocast's float32 list in code its callers run only under autocast (issue 37 item 4, 36 item 3).

Under autocast the ops on the device's float32 list (CUDA's: ``pow``, ``sum``, ``norm``,
``rsqrt``, ``softmax``, ...) return float32 whatever their input, so ``x.pow(2).mean()`` is a
float32 mean square and ``x.norm() + 1e-12`` keeps its guard. The engine gave a region the
function opens that policy; it now gives it to code every run of which is under its callers'
regions, in any file (a model never cast and run only under autocast, or every cast model
reaching the class run so). The CPU's float32 list holds none of those ops: a region written
for the CPU keeps them in the input's dtype. The xfile fixtures
``good_cast_model_under_cuda_autocast``, ``bad_cast_model_under_cpu_autocast`` and
``warn_cpu_autocast_only_pow_norm`` show both sides; tests/test_runtime_proof.py probes the
CUDA policy under torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpcheck.project.records import ModelRecord, record_of
from tests.support import project_findings

MODEL = """\
import torch
from torch import nn


class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.proj(x)
        ms = h.pow(2).mean(-1, keepdim=True)
        unit = h / (h.norm(dim=-1, keepdim=True) + 1e-12)
        return h * torch.rsqrt(ms + 1e-6) + unit
"""


def _run(region: str, cast: str = ".half()") -> str:
    return (
        "import torch\n\nfrom model import Norm\n\n\ndef main():\n"
        f"    model = Norm(8){cast}\n    x = torch.randn(2, 8)\n"
        f"    with {region}:\n        print(model(x))\n"
    )


@pytest.mark.parametrize(
    ("code", "cpu"),
    [
        ("with torch.autocast('cpu', dtype=torch.float16):\n    m(x)\n", True),
        ("with torch.autocast(device_type='cpu'):\n    m(x)\n", True),
        ("with torch.cpu.amp.autocast():\n    m(x)\n", True),
        (
            "ctx = torch.amp.autocast(device_type='cpu', dtype=torch.float16)\n"
            "with ctx:\n    m(x)\n",
            True,
        ),
        ("with torch.autocast('cuda'):\n    m(x)\n", False),
        ("with torch.autocast(device_type=x.device.type):\n    m(x)\n", False),
        (
            "ctx = torch.autocast(device_type=dev, dtype=torch.float16)\nwith ctx:\n    m(x)\n",
            False,
        ),
        ("m(x)\n", False),
    ],
)
def test_a_record_names_the_models_it_runs_under_a_cpu_region(code: str, cpu: bool) -> None:
    source = f"import torch\nfrom pkg.model import Net\n\nm = Net()\n{code}"
    record = record_of(source.encode(), "run.py")
    assert record.on_cpu == (("pkg.model.Net",) if cpu else ())
    assert ModelRecord.from_plain(json.loads(json.dumps(record.to_plain()))) == record


def _findings(tmp_path: Path, run: str) -> list[tuple[str, int]]:
    found = project_findings(tmp_path, {"model.py": MODEL, "run.py": run})
    return sorted((code, row) for name, row, code in found if name == "model.py")


def test_cast_model_run_only_under_cuda_autocast_squares_in_float32(tmp_path: Path) -> None:
    assert _findings(tmp_path, _run("torch.autocast('cuda', dtype=torch.float16)")) == []


def test_cast_model_run_under_cpu_autocast_keeps_its_half_squares(tmp_path: Path) -> None:
    found = _findings(tmp_path, _run("torch.autocast('cpu', dtype=torch.float16)"))
    assert found == [("MPC302", 12), ("MPC304", 13)]


def test_cast_model_run_outside_autocast_is_reported(tmp_path: Path) -> None:
    run = _run("torch.no_grad()")
    assert _findings(tmp_path, run) == [("MPC302", 12), ("MPC304", 13)]


def test_never_cast_model_under_cpu_float16_autocast_squares_in_float16(tmp_path: Path) -> None:
    found = _findings(tmp_path, _run("torch.autocast('cpu', dtype=torch.float16)", cast=""))
    assert found == [("MPC302", 12)]  # (float16 from autocast only: MPC304 wants a cast)


def test_never_cast_model_under_cuda_autocast_is_quiet(tmp_path: Path) -> None:
    assert _findings(tmp_path, _run("torch.autocast('cuda')", cast="")) == []
