"""A half default dtype reaches what is built while it is set (issue 36, the premise).

``torch.set_default_dtype(torch.bfloat16)`` makes every floating parameter built after it
bfloat16, until the default is set back. Set and restored in one function (or by a context
manager, or by a helper returning the old default that each caller restores: transformers'
``_set_default_torch_dtype``), it reaches only the classes built in between: those are built
in half, and nothing else in the project is (no project-wide premise). Set without a restore
it may reach every class. The runtime proofs are the xfile cases ``*_default_dtype_extent``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mpcheck.cli import main
from mpcheck.project.models import forget_uses
from mpcheck.project.records import record_of
from tests.support import XFILE

GOOD = XFILE / "good_default_dtype_extent"

CASES = {
    "restored": (
        "import torch\nfrom .model import Net, Head\n"
        "def build():\n"
        "    old = torch.get_default_dtype()\n"
        "    torch.set_default_dtype(torch.bfloat16)\n"
        "    net = Net()\n"
        "    torch.set_default_dtype(old)\n"
        "    return net, Head()\n",
        False,
        ["pkg.model.Net"],
    ),
    "float32": ("import torch\ntorch.set_default_dtype(torch.float32)\n", False, []),
    "module-level": ("import torch\ntorch.set_default_dtype(torch.float16)\n", True, []),
    "never-restored": (
        "import torch\nfrom .model import Net\n"
        "def build(dtype):\n    torch.set_default_dtype(dtype)\n    return Net()\n",
        True,
        [],
    ),
    "tensor-type": (
        "import torch\nfrom .model import Net\n"
        "def main():\n"
        "    torch.set_default_tensor_type(torch.cuda.HalfTensor)\n"
        "    net = Net()\n"
        "    torch.set_default_tensor_type(torch.FloatTensor)\n"
        "    return net\n",
        False,
        ["pkg.model.Net"],
    ),
    "only-float32-or-saved": (
        "import torch\nfrom .layers import Head\n"
        "def build(fp32):\n"
        "    dtype = default = torch.get_default_dtype()\n"
        "    if fp32:\n        dtype = torch.float32\n"
        "    torch.set_default_dtype(dtype)\n"
        "    head = Head()\n"
        "    torch.set_default_dtype(default)\n"
        "    return head\n",
        False,
        [],
    ),
    "with-item": (
        "import torch\nfrom . import training\nfrom .model import Net, Other\n"
        "def setup(dtype):\n"
        '    with training.set_default_dtype(dtype), torch.device("meta"):\n'
        "        net = Net()\n"
        "    return net, Other()\n",
        False,
        ["pkg.model.Net"],
    ),
    "own-context-manager": (
        "import contextlib, torch\nfrom .model import Net, Other\n"
        "@contextlib.contextmanager\n"
        "def _default(dtype):\n"
        "    old = torch.get_default_dtype()\n"
        "    torch.set_default_dtype(dtype)\n"
        "    yield\n"
        "    torch.set_default_dtype(old)\n"
        "def get(cfg):\n"
        "    with _default(cfg.dtype):\n"
        "        net = Net()\n"
        "    return net, Other()\n",
        False,
        ["pkg.model.Net"],
    ),
    "context-manager-entered-unseen": (
        "import contextlib, torch\nfrom .model import Net\n"
        "@contextlib.contextmanager\n"
        "def local_dtype(dtype):\n"
        "    old = torch.get_default_dtype()\n"
        "    torch.set_default_dtype(dtype)\n"
        "    try:\n        yield\n"
        "    finally:\n        torch.set_default_dtype(old)\n"
        "def build(dtype):\n"
        "    contexts = [local_dtype(dtype)]\n"
        "    with contextlib.ExitStack() as stack:\n"
        "        for c in contexts:\n            stack.enter_context(c)\n"
        "        return Net()\n",
        True,
        [],
    ),
    "context-manager-used-elsewhere": (
        "import contextlib, torch\n"
        "@contextlib.contextmanager\n"
        "def local_dtype(dtype):\n"
        "    old = torch.get_default_dtype()\n"
        "    torch.set_default_dtype(dtype)\n"
        "    yield\n"
        "    torch.set_default_dtype(old)\n",
        True,
        [],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_default_reaches_what_its_extent_builds(name: str) -> None:
    source, project_wide, built = CASES[name]
    record = record_of(source.encode(), f"pkg/{name.replace('-', '_')}.py")
    assert record.default_dtype is project_wide
    assert [cast[0] for cast in record.casts] == built


def test_a_helper_returning_the_old_default_opens_its_callers_extents() -> None:
    """transformers' ``_set_default_torch_dtype``: set to the load's dtype, the old one
    returned and restored by the caller after ``cls(config)`` (the class or a subclass)."""
    source = (
        "import torch\nfrom torch import nn\n"
        "class Base(nn.Module):\n"
        "    @classmethod\n"
        "    def _set_default_torch_dtype(cls, dtype):\n"
        "        dtype_orig = torch.get_default_dtype()\n"
        "        torch.set_default_dtype(dtype)\n"
        "        return dtype_orig\n"
        "\n"
        "    @classmethod\n"
        "    def load(cls, config, torch_dtype):\n"
        "        dtype_orig = None\n"
        "        if torch_dtype is not None:\n"
        "            dtype_orig = cls._set_default_torch_dtype(torch_dtype)\n"
        "        model = cls(config)\n"
        "        if dtype_orig is not None:\n"
        "            torch.set_default_dtype(dtype_orig)\n"
        "        return model\n"
    )
    record = record_of(source.encode(), "pkg/base.py")
    assert record.default_dtype is False
    assert [owner for owner, _ in record.owned] == ["pkg.base.Base"]
    unrestored = source.replace("            torch.set_default_dtype(dtype_orig)\n", "")
    assert record_of(unrestored.encode(), "pkg/base.py").default_dtype is True


def test_a_default_never_restored_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """Without the restore the vocoder, built after the set, may be half: the source block's
    finding comes back (it is no longer only the teacher that the default reaches)."""
    copy = tmp_path / GOOD.name
    shutil.copytree(GOOD, copy)
    build = copy / "tts" / "build.py"
    build.write_text(build.read_text().replace("    torch.set_default_dtype(old)\n", ""))
    monkeypatch.chdir(copy)
    forget_uses()
    main(["check", "--no-cache", "--output-format", "json", "."])
    out = json.loads(capsys.readouterr().out)
    forget_uses()
    assert [(f["code"], f["filename"].endswith("blocks.py")) for f in out] == [("MPC101", True)]
