"""Float16-only overflow needs float16 shown (issue 37, item 1): a class every half path of
which writes bfloat16 down (``.to(torch.bfloat16)``, ``.bfloat16()``,
``torch_dtype=torch.bfloat16``) has bfloat16 activations, whose range is float32's, so
MPC301/MPC302 report no float16 overflow there. A cast whose dtype may be float16 (``.half()``,
a dtype variable) or a use that may cast the model keeps the hazard, quoted as the evidence.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpcheck.project.models import uses_of_sources
from mpcheck.project.records import ModelRecord, record_of
from tests.support import XFILE

LAYERS = b"import torch\nfrom torch import nn\nclass Block(nn.Module):\n    pass\n"
MODEL = b"from layers import Block\nclass Model(nn.Module):\n    def __init__(self):\n"
MODEL += b"        self.block = Block()\n"


def uses(script: bytes) -> Any:
    sources = {
        "layers.py": LAYERS,
        "model.py": MODEL,
        "run.py": b"from model import Model\n" + script,
    }
    return uses_of_sources(sources)


def test_only_bfloat16_casts_reach_the_part() -> None:
    found = uses(b"model = Model().to(torch.bfloat16)\nother = Model().bfloat16()\n")
    only = found.at("layers").bfloat16_only("Block")
    assert only is not None and only.via == ("Model",)
    assert found.at("model").bfloat16_only("Model") is not None


@pytest.mark.parametrize(
    "other",
    [
        b"half = Model().half()\n",  # float16 written down
        b"dtype = pick()\nhalf = Model().to(dtype)\n",  # a variable: its values may be float16
        b"half = Model().to(dtype=torch.float16)\n",
    ],
)
def test_a_cast_that_may_write_float16_keeps_it_open(other: bytes) -> None:
    found = uses(b"model = Model().to(torch.bfloat16)\n" + other)
    assert found.at("layers").bfloat16_only("Block") is None
    assert found.at("model").bfloat16_only("Model") is None


def test_a_model_of_unknown_class_cast_keeps_every_class_open() -> None:
    found = uses(b"model = Model().to(torch.bfloat16)\nm = getattr(zoo, name)().half()\n")
    assert found.at("layers").bfloat16_only("Block") is None


def findings(case: Path) -> list[Any]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json", "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    found: list[Any] = json.loads(done.stdout)
    return found


def test_bfloat16_only_model_gets_no_float16_overflow() -> None:
    assert findings(XFILE / "good_bfloat16_only_casts") == []


def test_the_cast_that_may_write_float16_is_the_evidence_quoted() -> None:
    (finding,) = findings(XFILE / "bad_float16_through_dtype_variable")
    assert finding["code"] == "MPC301" and finding["severity"] == "error"
    assert (
        "`Attention` is cast to half by `Attention(8).to(dtype)` at lm/run.py:17"
        in (finding["message"])
    )


def test_a_float16_autocast_around_every_run_keeps_float16_open(tmp_path: Path) -> None:
    """Weights cast to bfloat16 and every run inside an autocast region whose dtype is not
    read here: autocast may lower the matmul to float16, whatever the weights are (measured
    on torch 2.13 CPU: ``masked_fill(..., -1e9)`` then raises "value cannot be converted to
    type c10::Half without overflow")."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_bfloat16_only_casts", case)
    run = case / "lm" / "run.py"
    run.write_text(
        "import torch\n\nfrom .layers import Attention\n\n\ndef main() -> None:\n"
        "    model = Attention(8).to(torch.bfloat16)\n"
        '    with torch.autocast("cpu", dtype=torch.float16):\n'
        "        model(torch.randn(2, 4, 8), torch.zeros(2, 4, 4, dtype=torch.bool))\n"
    )
    found = findings(case)
    assert {(f["code"], f["location"]["row"]) for f in found} >= {("MPC301", 33)}


def test_a_cast_of_unknown_class_writing_bfloat16_keeps_the_bfloat16_claim() -> None:
    """A model picked by name and cast to bfloat16 may be any class, and makes it bfloat16:
    the world it opens brings no float16."""
    found = uses(
        b"model = Model().to(torch.bfloat16)\nm = getattr(zoo, name)().to(torch.bfloat16)\n"
    )
    assert found.world_kinds == ("unknown class",)
    assert found.at("layers").bfloat16_only("Block") is not None


def test_the_record_keeps_which_loose_casts_write_bfloat16() -> None:
    code = b"import torch\nm = getattr(zoo, a)().bfloat16()\nn = getattr(zoo, b)().half()\n"
    record = record_of(code, "run.py")
    assert len(record.loose) == 2 and len(record.loose_bfloat16) == 1
    assert ModelRecord.from_plain(json.loads(json.dumps(record.to_plain()))) == record


@pytest.mark.parametrize(("cast", "reported"), [("to(torch.bfloat16)", False), ("half()", True)])
def test_a_premise_resting_on_bfloat16_casts_of_unknown_class(
    tmp_path: Path, cast: str, reported: bool
) -> None:
    """A model picked by name and cast: no cast names ``Attention``, so its half rests on
    the premise that the pick may be it, in the dtype that cast writes down."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_bfloat16_only_casts", case)
    (case / "lm" / "run.py").write_text(
        "import torch\n\nfrom . import layers\n\n\ndef main(name: str) -> None:\n"
        "    norm = layers.RMSNorm(8).to(torch.bfloat16)\n"
        f"    model = getattr(layers, name)(8).{cast}\n"
        "    x = torch.randn(2, 4, 8, dtype=torch.bfloat16)\n"
        "    model(norm(x), torch.zeros(2, 4, 4, dtype=torch.bool))\n"
        '\n\nif __name__ == "__main__":\n    main("Attention")\n'
    )
    found = findings(case)
    assert bool(found) is reported
    fills = [f for f in found if f["code"] == "MPC301"]
    assert all("latent: if `Attention` runs in float16" in f["message"] for f in fills)
