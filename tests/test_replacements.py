"""A model's children replaced by parts built in their class's fixed half default
(``mpcheck.engine.replacements``): reported where the same routine rebuilds the child in the
dtype it reads from the model, quiet for every correct idiom of the family; the class's
default crosses files, import cycles included (a cycle partner's text-only view)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from mpcheck.engine.binding import fixed_default
from mpcheck.project.names import ImportTable
from mpcheck.project.summarise import FileSummariser

LAYERS = """
import torch
from torch import nn
from torch.nn import Parameter


class LinearLayer(nn.Module):
    def __init__(self, weight_shape=None, dtype={default}, weight=None, bias=None):
        super().__init__()
        if weight is not None:
            self.weight = weight
        else:
            self.weight = Parameter(torch.empty(weight_shape, dtype=dtype))

    def forward(self, x):
        return torch.matmul(x, self.weight.t())


class Normalize(nn.Module):
    def __init__(self, dim, dtype=torch.float, eps=1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps).to(dtype)
"""

LOADER = """
import torch
from torch import nn
{imports}


def load(module):
    for name, child in module.named_children():
        if isinstance(child, nn.LayerNorm):
            child = Normalize(child.weight.shape[-1], dtype={sibling})
            setattr(module, name, child)
        elif isinstance(child, nn.Linear):
            child = LinearLayer({args})
            setattr(module, name, child)
        {extra}
"""

ROW = 13  # the line of ``LinearLayer(...)`` in LOADER


# (the autouse fixture that forgets summaries between tests, and the project check)
from tests.test_project_classes import _fresh, findings  # noqa: E402, F401


def loader(
    default: str = "torch.half",
    args: str = "weight_shape=child.weight.shape",
    sibling: str = "child.weight.dtype",
    extra: str = "",
    imports: str = "from .layers import LinearLayer, Normalize",
) -> tuple[str, str]:
    layers = LAYERS.replace("{default}", default)
    text = LOADER.format(imports=imports, args=args, sibling=sibling, extra=extra)
    return layers, text


def check_both(tmp_path: Path, layers: str, text: str) -> tuple[set[int], set[int]]:
    """The MPC104 rows of the loader, across files and with the classes in the same file."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text(layers)
    (tmp_path / "pkg" / "loader.py").write_text(text)
    across = {r for r, c in findings(tmp_path, "pkg/loader.py") if c == "MPC104"}
    single = tmp_path / "single.py"
    own = layers.count("\n")
    single.write_text(layers + text.replace("from .layers import LinearLayer, Normalize", ""))
    alone = {r - own for r, c in findings(tmp_path, "single.py", False) if c == "MPC104"}
    return across, alone


@pytest.mark.parametrize("default", ["torch.half", "torch.float16", "torch.bfloat16"])
def test_replacement_in_a_fixed_half_default_is_reported(tmp_path: Path, default: str) -> None:
    across, alone = check_both(tmp_path, *loader(default=default))
    assert across == alone == {ROW}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"args": "weight_shape=child.weight.shape, dtype=child.weight.dtype"}, "passes dtype"),
        ({"args": "child.weight.shape, child.weight.dtype"}, "passes dtype by position"),
        ({"args": "weight=child.weight"}, "given its weights: the dtype path is not taken"),
        ({"args": "*shape"}, "may pass anything"),
        ({"default": "None"}, "follows the default dtype"),
        ({"default": "torch.get_default_dtype()"}, "follows the default dtype"),
        ({"default": "torch.float32"}, "a float32 default is not this fact"),
        ({"sibling": "torch.bfloat16"}, "no sibling reads the model's dtype"),
        ({"extra": "module.to(torch.bfloat16)"}, "the parent is cast in the routine"),
        ({"extra": "child.to(torch.bfloat16)"}, "the part is cast in the routine"),
    ],
)
def test_correct_idioms_are_quiet(tmp_path: Path, change: dict[str, str], why: str) -> None:
    across, alone = check_both(tmp_path, *loader(**change))
    assert across == alone == set(), why


def test_a_caller_casting_the_whole_model_keeps_it_quiet(tmp_path: Path) -> None:
    layers, text = loader()
    caller = "\n\ndef build(model):\n    load(model)\n    return model.to(torch.bfloat16)\n"
    assert check_both(tmp_path, layers, text + caller) == (set(), set())


def test_another_slot_is_no_sibling(tmp_path: Path) -> None:
    """The sibling must replace the same child (``setattr(module, name, ...)``)."""
    layers, text = loader()
    sibling = "setattr(module, name, child)\n        elif"
    text = text.replace(sibling, sibling.replace("module", "other"))
    assert check_both(tmp_path, layers, text) == (set(), set())


def test_import_cycle_partner_sees_the_class_default(tmp_path: Path) -> None:
    """``layers.py`` importing the package whose ``__init__`` imports the loader: a cycle.
    The loader still learns the default, from ``layers.py``'s text alone."""
    layers, text = loader()
    layers = layers.replace("import torch\n", "import torch\nimport pkg\n", 1)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .loader import load\n")
    (tmp_path / "pkg" / "layers.py").write_text(layers)
    (tmp_path / "pkg" / "loader.py").write_text(text)
    assert {r for r, c in findings(tmp_path, "pkg/loader.py") if c == "MPC104"} == {ROW}


def test_partner_view_holds_only_what_the_text_decides(tmp_path: Path) -> None:
    layers, _ = loader()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "layers.py").write_text(layers)
    view = FileSummariser(tmp_path).partner(tmp_path / "pkg" / "layers.py")
    assert view is not None and set(view.classes) == {"LinearLayer"}  # not the float32 norm
    cls = view.classes["LinearLayer"]
    assert cls.is_module and not cls.methods and not cls.attrs
    assert cls.dtype_default is not None
    position, place, dtype, guards = cls.dtype_default
    assert (position, place.line, place.text, dtype, guards) == (
        1,
        8,
        "torch.half",
        "float16",
        ((2, "weight"),),
    )


def test_partner_view_of_a_file_without_half_dtypes_is_its_imports_alone(tmp_path: Path) -> None:
    """No text names a half dtype, so no class can have a half default: CPython's parser
    reads the re-exports (libcst's parse would cost many times more)."""
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "norms.py"
    path.write_text(
        "import torch\nfrom torch.nn import LayerNorm\n\n\n"
        "class Norm(torch.nn.Module):\n"
        "    def __init__(self, n, dtype=torch.float32):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.ones(n, dtype=dtype))\n"
    )
    view = FileSummariser(tmp_path).partner(path)
    assert view is not None and not view.classes
    assert view.reexports["LayerNorm"][0] == "torch.nn.LayerNorm"


@pytest.mark.parametrize(
    ("init", "expected"),
    [
        ("def __init__(self, n, dtype=torch.half):\n    self.w = torch.zeros(n, dtype=dtype)", ()),
        (
            "def __init__(self, n, w=None, dtype=torch.half):\n"
            "    if w is None:\n        w = torch.zeros(n, dtype=dtype)\n    self.w = w",
            ((1, "w"),),
        ),
        (
            "def __init__(self, n, w=None, dtype=torch.half):\n"
            "    if w is None:\n        w = torch.zeros(n, dtype=dtype)\n"
            "    self.b = torch.zeros(n, dtype=dtype)",
            (),
        ),
    ],
)
def test_guards_are_the_names_tested_around_every_use(
    init: str, expected: tuple[tuple[int, str], ...]
) -> None:
    module = cst.parse_module("import torch\n" + init + "\n")
    fn = module.body[1]
    assert isinstance(fn, cst.FunctionDef)
    found = fixed_default(fn, ImportTable.of(module).resolve)
    assert found is not None and found.dtype == "float16" and found.guards == expected
