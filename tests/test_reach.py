"""Code nothing runs gives no finding (mpcheck/project/reach.py), and unknown means running.

Driven through the CLI on small projects: a copied module nothing imports, a top-level
function nothing names, and the ways a project may still load or call them (a loader by
computed name, a configuration naming the module, ``__all__``, a notebook, a decorator, a
test). The multi-file fixtures ``fixtures/xfile/*_vendored_module`` and
``*_spectrum_helper`` are the torch-proven pairs (tests/test_xfile.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

XT = """
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x + self.proj(h)
"""
MODEL = """
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)
"""
# (a second model comes from a hub loader, so that cast's class is unknown and every class
# the project runs may be on it: a hazard of ``vid/xt.py`` is then a premise warning, which the
# project asks for (``OPEN_WORLD``: a path mpcheck cannot follow); with only the cast naming
# ``vid.model.Encoder``, ``xt.Encoder`` would run in float32, issue 36)
RUN = """
import hub
import torch

from vid.model import Encoder
{extra}
if __name__ == "__main__":
    encoder = Encoder(8).to(torch.bfloat16)
    other = hub.load("weights").to(torch.bfloat16)
    print(encoder(torch.randn(2, 8, dtype=torch.bfloat16)).dtype, other)
"""
OPEN_WORLD = "open-world-premises = true\n"
SPEC = """
import torch


def frame_energy(frames):
    return frames.abs().mean(-1)


{decorator}def frame_power_rms(frames):
    return torch.sqrt(frames.pow(2).sum(-1) + 1e-6)
"""
SCORER = """
import torch
from torch import nn

from audio.spec import frame_energy


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return frame_energy(self.proj(x))


if __name__ == "__main__":
    print(Scorer().half()(torch.randn(2, 8, dtype=torch.float16)))
"""


def project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def findings(root: Path, *paths: str) -> set[tuple[str, str]]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json"]
    done = subprocess.run(
        [*cmd, *(paths or ".")], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return {
        (Path(d["filename"]).resolve().relative_to(root.resolve()).as_posix(), d["code"])
        for d in json.loads(done.stdout)
    }


def vendored(root: Path, run: str = "", **more: str) -> Path:
    files = {
        "README.md": "# vid\n",
        ".mpcheck.toml": OPEN_WORLD,
        "vid/__init__.py": "",
        "vid/xt.py": XT,
        "vid/model.py": MODEL,
    }
    return project(root, {**files, "vid/run.py": RUN.format(extra=run), **more})


def test_a_module_nothing_imports_gives_nothing_and_alone_the_same(tmp_path: Path) -> None:
    root = vendored(tmp_path)
    assert findings(root) == set()
    assert findings(root, "vid/xt.py") == set()  # the editor's one-file run


def test_sources_copied_without_docs_or_configs_keep_every_module(tmp_path: Path) -> None:
    # what names a file for a tool that runs it by name is in the files that are not here
    root = vendored(tmp_path)
    (root / "README.md").unlink()
    assert findings(root) == {("vid/xt.py", "MPC101")}


def test_mpchecks_own_configuration_is_no_checkout_doc(tmp_path: Path) -> None:
    # it says how to check the code, never what runs it: sources copied with only it (here
    # ``.mpcheck.toml`` and ``mpcheck.toml``) stay unknown
    root = vendored(tmp_path)
    (root / "README.md").unlink()
    (root / "mpcheck.toml").write_text(OPEN_WORLD)
    assert findings(root) == {("vid/xt.py", "MPC101")}


def test_a_module_an_entry_imports_is_checked(tmp_path: Path) -> None:
    root = vendored(tmp_path, run="from vid import xt  # noqa: F401\n")
    assert findings(root) == {("vid/xt.py", "MPC101")}


def test_a_module_only_dead_code_imports_is_dead_too(tmp_path: Path) -> None:
    root = vendored(tmp_path, **{"vid/old.py": "from vid.xt import Encoder\n"})
    assert findings(root) == set()


@pytest.mark.parametrize(
    "loader",
    [
        # a plugin folder's files, found by listing it: any file may be loaded
        "import importlib, os\n"
        "def load(d):\n"
        "    return [importlib.import_module('vid.' + n[:-3]) for n in os.listdir(d)]\n",
        # a name written in a string of the project
        "import importlib\nPLUGINS = {'x': 'vid.xt'}\n"
        "def load(k):\n    return importlib.import_module(PLUGINS[k])\n",
    ],
    ids=["listed-directory", "named-in-a-string"],
)
def test_a_module_a_loader_may_load_is_checked(tmp_path: Path, loader: str) -> None:
    root = vendored(tmp_path, **{"vid/plugins.py": loader})
    assert findings(root) == {("vid/xt.py", "MPC101")}


CONFIG_LOADER = (
    "import importlib\n"
    "def instantiate_from_config(config):\n"
    "    module, cls = config['target'].rsplit('.', 1)\n"
    "    return getattr(importlib.import_module(module), cls)(**config.get('params', {}))\n"
)


def test_configuration_files_decide_what_a_config_loader_loads(tmp_path: Path) -> None:
    root = vendored(tmp_path, **{"vid/util.py": CONFIG_LOADER})
    # the configurations a loader reads are not here: unknown, so running
    assert findings(root) == {("vid/xt.py", "MPC101")}
    (root / "configs").mkdir()
    (root / "configs" / "model.yaml").write_text("model:\n  target: vid.model.Encoder\n")
    assert findings(root) == set()
    (root / "configs" / "old.yaml").write_text("model:\n  target: vid.xt.Encoder\n")
    assert findings(root) == {("vid/xt.py", "MPC101")}


def helper(root: Path, decorator: str = "", **more: str) -> Path:
    files = {"audio/__init__.py": "", "audio/run.py": SCORER}
    return project(root, {**files, "audio/spec.py": SPEC.format(decorator=decorator), **more})


def test_a_function_nothing_names_gives_nothing(tmp_path: Path) -> None:
    root = helper(tmp_path)
    assert findings(root) == set()
    assert findings(root, "audio/spec.py") == set()


@pytest.mark.parametrize(
    ("decorator", "more"),
    [
        ("@torch.jit.script\n", {}),
        ("", {"audio/spec_all.py": "__all__ = ['frame_power_rms']\n"}),
        ("", {"demo.ipynb": json.dumps({"cells": [{"source": "frame_power_rms(x)"}]})}),
        ("", {"tests/test_spec.py": "from audio import spec\nspec.frame_power_rms\n"}),
        ("", {"audio/cli.py": "import audio.spec\n\ndef f(x):\n    return x\n"}),
    ],
    ids=["decorated", "in-a-string", "in-a-notebook", "through-its-module", "module-only"],
)
def test_a_function_something_may_name_is_checked(
    tmp_path: Path, decorator: str, more: dict[str, str]
) -> None:
    root = helper(tmp_path, decorator, **more)
    expected = set() if "cli.py" in "".join(more) else {("audio/spec.py", "MPC302")}
    assert findings(root) == expected


def test_a_test_files_functions_are_run_by_name(tmp_path: Path) -> None:
    test = SPEC.format(decorator="").replace("frame_power_rms", "test_power_rms")
    root = helper(tmp_path, **{"tests/test_power.py": test})
    assert ("tests/test_power.py", "MPC302") in findings(root)


def test_a_library_keeps_everything(tmp_path: Path) -> None:
    # nothing builds a model outside class bodies: its users do, and may call anything
    scorer = SCORER.split("if __name__")[0]
    root = helper(tmp_path, **{"audio/run.py": scorer})
    assert findings(root) == {("audio/spec.py", "MPC302")}


def test_a_packaged_project_exports_its_modules_and_public_functions(tmp_path: Path) -> None:
    # ``pip install .`` makes every module of its packages importable by its users
    setup = "from setuptools import setup\nsetup(name='audio', packages=['audio'])\n"
    root = helper(tmp_path, **{"setup.py": setup})
    assert findings(root) == {("audio/spec.py", "MPC302")}
    private = SPEC.format(decorator="").replace("frame_power_rms", "_frame_power_rms")
    (root / "audio" / "spec.py").write_text(private)
    assert findings(root) == set()
    vendored(root / "v", **{"setup.py": setup.replace("audio", "vid")})
    assert findings(root / "v") == {("vid/xt.py", "MPC101")}
