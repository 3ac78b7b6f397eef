"""torch.nn's classes spelled by the module that defines them are torch.nn's (issue 36).

``from torch.nn.parameter import Parameter`` (a vocoder's Snake activation) and ``from
torch.nn.modules.conv import Conv1d`` name the objects ``torch.nn`` exports: a parameter of
the model, a layer cast with it. The mapping is checked against torch itself, and the two
fixtures through the CLI (``mpcheck.cli.main``) as a project of their own.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from pathlib import Path
from typing import Any

import pytest

from mpcheck import cli
from mpcheck.project.names import canonical
from tests.support import FIXTURES

BAD = FIXTURES / "mpc101" / "bad_conv_from_defining_module.py"
GOOD = FIXTURES / "mpc102" / "good_snake_parameter_import.py"


def _defined_classes(torch_module: Any) -> list[tuple[str, str, type]]:
    """(module, name, class) for each public class torch.nn's files define."""
    nn = torch_module.nn
    names = ["torch.nn.parameter", "torch.nn.modules"]
    names += [f"torch.nn.modules.{m.name}" for m in pkgutil.iter_modules(nn.modules.__path__)]
    found = []
    for name in names:
        module = importlib.import_module(name)
        for leaf, obj in vars(module).items():
            if inspect.isclass(obj) and leaf[:1].isupper() and obj.__module__.startswith(name):
                found.append((name, leaf, obj))
    return found


def test_a_defining_module_spelling_is_torch_nn_exactly_when_torch_nn_exports_it() -> None:
    torch_module = pytest.importorskip("torch")
    classes = _defined_classes(torch_module)
    assert len(classes) > 100  # the walk saw torch.nn's files
    for module, leaf, obj in classes:
        exported = getattr(torch_module.nn, leaf, None) is obj
        spelled = canonical(f"{module}.{leaf}")
        assert (spelled == f"torch.nn.{leaf}") == exported, (module, leaf)


@pytest.mark.parametrize(
    "qual", ["torch.nn.modules.utils._pair", "torch.nn.functional.linear", "mylib.nn.Linear"]
)
def test_other_names_keep_their_spelling(qual: str) -> None:
    assert canonical(qual) == qual


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: Path) -> list[Any]:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\n')
    (tmp_path / source.name).write_text(source.read_text())
    rc = cli.main(["check", "--no-cache", "--output-format", "json", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    return [(f["location"]["row"], f["code"], f["severity"]) for f in json.loads(out)]


@pytest.fixture(autouse=True)
def _inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MPCHECK_OUTPUT_FORMAT", raising=False)


def test_a_parameter_imported_from_torch_nn_parameter_is_the_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a float32 ``torch.zeros`` meeting the half activation: ``.half()`` casts it."""
    assert check(tmp_path, capsys, GOOD) == []


def test_a_conv_imported_from_its_defining_module_is_cast_with_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, capsys, BAD) == [(19, "MPC101", "error")]
