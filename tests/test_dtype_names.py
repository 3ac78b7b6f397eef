"""A cast that writes a dtype variable writes what the variable may hold
(:mod:`mpcheck.project.dtype_names`): bfloat16 only when every half value it may hold is
bfloat16, and "may be float16" ("" here) when one may be float16 or any is not read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpcheck.project.brackets import closing
from mpcheck.project.dtype_names import DtypeNames
from mpcheck.project.models import ModelUses, uses_of_sources
from mpcheck.project.records import blank, record_of
from tests.support import XFILE


def written(source: str, call: str = "model.to(") -> str:
    """The half dtype the last ``call`` of ``source`` writes ("" unknown or either)."""
    data = source.encode()
    code = blank(data)
    at = code.rindex(call.encode()) + len(call)
    return DtypeNames(code, data).argument_half(at, closing(code, at))


BFLOAT16_ONLY = {
    "bound once": "weight_dtype = torch.bfloat16\nmodel.to(weight_dtype)\n",
    "float32 or bfloat16 by branch": (
        "def main(args):\n    weight_dtype = torch.float32\n    if args.bf16:\n"
        "        weight_dtype = torch.bfloat16\n    model.to(device, dtype=weight_dtype)\n"
    ),
    "conditional": "dtype = torch.bfloat16 if args.bf16 else torch.float32\nmodel.to(dtype)\n",
    "conditional over lines": (
        "dtype = (\n    torch.bfloat16\n    if args.bf16\n    else torch.float32\n)\n"
        "model.to(dtype)\n"
    ),
    "dict indexed": (
        'DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}\n'
        "def main(args):\n    dtype = DTYPES[args.precision]\n    model.to(dtype)\n"
    ),
    "dict display indexed": (
        'dtype = {"bf16": torch.bfloat16, "no": torch.float}[p]\nmodel.to(dtype)\n'
    ),
    "dict get with default": (
        'DTYPES = {"bf16": torch.bfloat16}\ndtype = DTYPES.get(k, torch.float32)\nmodel.to(dtype)\n'
    ),
    "getattr of torch": 'dtype = getattr(torch, "bfloat16")\nmodel.to(dtype)\n',
    "name of a name": "amp = torch.bfloat16\nweight_dtype = amp\nmodel.to(weight_dtype)\n",
    "a keyword argument line is no assignment": (
        "dtype = torch.bfloat16\nx = torch.zeros(\n    3,\n    dtype=torch.float16,\n)\n"
        "model.to(dtype)\n"
    ),
    "the function's own variable": (
        "dtype = torch.float16\ndef main():\n    dtype = torch.bfloat16\n    model.to(dtype)\n"
    ),
    "literal": "model.to(torch.bfloat16)\n",
    "torch under another name": "dtype = th.bfloat16 if bf16 else th.float32\nmodel.to(dtype)\n",
    "an enclosing function's variable": (
        "def main():\n    weight_dtype = torch.bfloat16\n    def validate():\n"
        "        model.to(weight_dtype)\n"
    ),
    "a tuple target in another function": (
        "def g():\n    dtype, x = h()\ndef f():\n    dtype = torch.bfloat16\n    model.to(dtype)\n"
    ),
}

MAY_BE_FLOAT16 = {
    "either by branch": (
        "def main(args):\n    weight_dtype = torch.float32\n    if args.mp == 'fp16':\n"
        "        weight_dtype = torch.float16\n    elif args.mp == 'bf16':\n"
        "        weight_dtype = torch.bfloat16\n    model.to(weight_dtype)\n"
    ),
    "conditional with float16": (
        "dtype = torch.float16 if args.fp16 else torch.bfloat16\nmodel.to(dtype)\n"
    ),
    "dict with float16": (
        'DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}\ndtype = DTYPES[k]\n'
        "model.to(dtype)\n"
    ),
    "dict changed after": (
        'DTYPES = {"bf16": torch.bfloat16}\nDTYPES["fp16"] = torch.float16\ndtype = DTYPES[k]\n'
        "model.to(dtype)\n"
    ),
    "dict updated": (
        'DTYPES = {"bf16": torch.bfloat16}\nDTYPES.update(extra)\nmodel.to(DTYPES[k])\n'
    ),
    "getattr of a setting": "dtype = getattr(torch, cfg.dtype)\nmodel.to(dtype)\n",
    "parameter": "def f(model, dtype):\n    model.to(dtype)\n",
    "parameter shadowing a global": (
        "dtype = torch.bfloat16\ndef f(model, dtype):\n    model.to(dtype)\n"
    ),
    "parameter rebound": (
        "def f(model, dtype=None):\n    dtype = dtype or torch.bfloat16\n    model.to(dtype)\n"
    ),
    "enclosing function's parameter": (
        "dtype = torch.bfloat16\ndef outer(dtype):\n    def inner():\n        model.to(dtype)\n"
    ),
    "call": "dtype = pick()\nmodel.to(dtype)\n",
    "attribute": "model.to(args.dtype)\n",
    "import": "from config import dtype\nmodel.to(dtype)\n",
    "loop": "dtype = torch.bfloat16\nfor dtype in (torch.float16,):\n    model.to(dtype)\n",
    "tuple target": "dtype = torch.bfloat16\ndtype, x = f()\nmodel.to(dtype)\n",
    "walrus": "dtype = torch.bfloat16\nif (dtype := pick()):\n    model.to(dtype)\n",
    "global written elsewhere": (
        "dtype = torch.bfloat16\ndef g():\n    global dtype\n    dtype = torch.float16\n"
        "def f():\n    model.to(dtype)\n"
    ),
    "config string": "dtype = DTYPES[cfg['precision']]\nmodel.to(dtype)\n",
    "bfloat16 beside an unknown": "def f(d):\n    model.to(torch.bfloat16 if c else d)\n",
    "star import": "from config import *\ndtype = torch.bfloat16\nmodel.to(dtype)\n",
    "no module statement": "def f():\n    model.to(dtype)\nclass C:\n    dtype = torch.bfloat16\n",
    "a local loop variable": (
        "dtype = torch.bfloat16\ndef f():\n    for dtype in (torch.float16,):\n        pass\n"
        "    model.to(dtype)\n"
    ),
    "cycle": "dtype = other_dtype\nother_dtype = dtype\nmodel.to(dtype)\n",
    "a tuple target in the casting function": (
        "def g():\n    x = 1\ndef f():\n    dtype = torch.bfloat16\n    dtype, x = h()\n"
        "    model.to(dtype)\n"
    ),
}


@pytest.mark.parametrize("source", BFLOAT16_ONLY.values(), ids=BFLOAT16_ONLY)
def test_every_half_value_bfloat16_writes_bfloat16(source: str) -> None:
    assert written(source) == "bfloat16"


@pytest.mark.parametrize("source", MAY_BE_FLOAT16.values(), ids=MAY_BE_FLOAT16)
def test_a_value_that_may_be_float16_or_is_unknown_writes_no_one_dtype(source: str) -> None:
    assert written(source) == ""


def test_float16_only_writes_float16() -> None:
    assert written("dtype = torch.float16 if c else torch.float32\nmodel.to(dtype)\n") == "float16"
    assert written("model.to(device, torch.half)\n") == "float16"


def test_a_float16_text_beside_an_unknown_keeps_float16() -> None:
    assert written("def f(d):\n    model.to(torch.float16 if c else d)\n") == "float16"


LAYERS = b"import torch\nfrom torch import nn\nclass Block(nn.Module):\n    pass\n"


def uses(script: bytes) -> ModelUses:
    sources = {"layers.py": LAYERS, "run.py": b"import torch\nfrom layers import Block\n" + script}
    return uses_of_sources(sources)


@pytest.mark.parametrize(
    "script",
    [
        b"weight_dtype = torch.bfloat16\nmodel = Block().to(weight_dtype)\n",
        b"dtype = torch.bfloat16 if bf16 else torch.float32\nmodel = Block().to(dtype=dtype)\n",
        b'D = {"bf16": torch.bfloat16}\ndtype = D[k]\nmodel = Block(dtype=dtype)\n',
    ],
)
def test_the_record_writes_the_variable_s_bfloat16(script: bytes) -> None:
    (cast,) = record_of(b"import torch\nfrom layers import Block\n" + script, "run.py").casts
    assert cast[3] == "bfloat16"
    found = uses(script)
    assert found.at("layers").bfloat16_only("Block") is not None


def test_a_variable_that_may_be_float16_keeps_the_class_open() -> None:
    script = b"dtype = torch.float16 if fp16 else torch.bfloat16\nmodel = Block().to(dtype)\n"
    (cast,) = record_of(b"import torch\nfrom layers import Block\n" + script, "run.py").casts
    assert cast[3] == ""
    assert uses(script).at("layers").bfloat16_only("Block") is None


@pytest.mark.parametrize(
    "script",
    [
        b"dtype = torch.float32\nmodel = Block().to(dtype)\n",
        b"dtype = torch.float32 if c else torch.float64\nmodel = Block().to(device, dtype=dtype)\n",
        b"dtype = torch.float32\nmodel = Block.from_pretrained(p, torch_dtype=dtype)\n",
    ],
)
def test_a_variable_that_only_holds_float32_casts_nothing_to_half(script: bytes) -> None:
    """Every value the name may hold is read and none is half: no half cast is recorded."""
    assert record_of(b"import torch\nfrom layers import Block\n" + script, "run.py").casts == ()


@pytest.mark.parametrize(
    "script",
    [
        b"dtype = torch.float32\nif half:\n    dtype = torch.float16\nmodel = Block().to(dtype)\n",
        b"def f(dtype):\n    model = Block().to(dtype)\n",
        b"dtype = torch.float32\nmodel = Block.from_pretrained(p, torch_dtype=args.dtype)\n",
    ],
)
def test_a_variable_that_may_hold_half_is_still_a_cast(script: bytes) -> None:
    assert len(record_of(b"import torch\nfrom layers import Block\n" + script, "run.py").casts) == 1


def test_a_keyword_choice_is_read_whole() -> None:
    """``torch_dtype=torch.bfloat16 if a else torch.float16``: the whole argument, not its
    first name, is what the load writes."""
    script = b"m = Block.from_pretrained(p, torch_dtype=torch.bfloat16 if a else torch.float16)\n"
    (cast,) = record_of(b"import torch\nfrom layers import Block\n" + script, "run.py").casts
    assert cast[3] == ""


def test_an_autocast_region_s_dtype_variable() -> None:
    """An autocast region's ``dtype=`` name is read the same way (``self.X`` through what
    the file assigns it, as before)."""
    from mpcheck.project.records import may_autocast_float16

    def lowers_to_float16(text: str) -> bool:
        data = text.encode()
        return may_autocast_float16(data, blank(data), ())

    bf16 = "amp = torch.bfloat16 if bf16 else torch.float32\n"
    assert not lowers_to_float16(bf16 + "with torch.autocast('cuda', dtype=amp):\n    f()\n")
    fp16 = "amp = torch.float16 if fp16 else torch.bfloat16\n"
    assert lowers_to_float16(fp16 + "with torch.autocast('cuda', dtype=amp):\n    f()\n")
    own = "class A:\n    def __init__(self):\n        self.amp = torch.bfloat16\n"
    own += "    def run(self):\n        with torch.autocast('cuda', dtype=self.amp):\n"
    own += "            f()\n"
    assert not lowers_to_float16(own)


def test_one_float16_binding_of_the_variable_brings_both_hazards_back(tmp_path: Path) -> None:
    """``xfile/good_bfloat16_weight_dtype_variable`` with one binding of ``weight_dtype``
    made float16: the cast may now write float16, and the gate's ``-1e9`` (MPC301) and the
    norm's square (MPC302) are reported, resting on that cast."""
    case = tmp_path / "case"
    shutil.copytree(XFILE / "good_bfloat16_weight_dtype_variable", case)
    sample = case / "dit" / "sample.py"
    text = sample.read_text()
    sample.write_text(
        text.replace("weight_dtype = torch.float32\n", "weight_dtype = torch.float16\n")
    )
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json", "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    found = json.loads(done.stdout)
    assert {(f["code"], f["filename"].rpartition("/")[2]) for f in found} == {
        ("MPC301", "model.py"),
        ("MPC302", "norm.py"),
    }
    assert all('`unet.to("cpu", dtype=weight_dtype)`' in f["message"] for f in found)
