"""A dtype frozen when a module is built (``self.dtype = dtype``, default float32) goes stale
once the module is cast; and a module of another file that runs its input through its own
layers takes that input in its dtype.

Each pattern is paired with its near misses, so a guard that stops working fails here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.project import summarise
from mpcheck.project.summarise import FileSummariser
from mpcheck.ruleset.rule import all_rules
from tests.support import check

# lines 1-3
HEADER = (
    "import torch\nfrom torch import nn\nfrom diffusers.models.modeling_utils import ModelMixin\n"
)

NET = """
    class Net({base}):
        def __init__(self, n{params}):
            super().__init__()
            self.dtype = {value}
            self.proj = nn.Linear(n, n{build})

        def forward(self, x):
            {forward}
    """
PLAIN = {
    "base": "nn.Module",
    "params": ", dtype=torch.float32",
    "value": "dtype",
    "build": "",
    "forward": "x = x.to(self.dtype)\n            return self.proj(x)",
}


def diagnostics(body: str, half: bool = True) -> list[Diagnostic]:
    source = HEADER + textwrap.dedent(body)
    if half:
        return check(source)
    options = Options(module_half_capable=False)
    return [d for d in check_source(source, "t.py", all_rules(), options) if not d.suppressed]


def codes(body: str, half: bool = True) -> list[tuple[str, int]]:
    return [(d.code, d.start.row) for d in diagnostics(body, half)]


def net(**change: str) -> str:
    return NET.format(**{**PLAIN, **change})


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"params": ", dtype=torch.float"},
        {"params": ", compute_dtype: torch.dtype = torch.float32", "value": "compute_dtype"},
        {"params": "", "value": "torch.get_default_dtype()"},
        # a class ``from_pretrained`` loads: an attribute of its own keeps the default too
        {"base": "ModelMixin", "params": ", dtype=torch.float32"},
    ],
)
def test_a_float32_dtype_fixed_at_construction_is_reported_where_it_meets_the_weights(
    change: dict[str, str],
) -> None:
    assert codes(net(**change)) == [("MPC101", 13)]


def test_the_message_says_where_the_float32_was_decided() -> None:
    (found,) = diagnostics(net())
    assert "`self.dtype` is fixed when the model is built, by the default " in found.message
    assert "`dtype=torch.float32` of `Net.__init__` at line 6" in found.message
    notes = [(r.start.row, r.message) for r in found.related]
    assert (6, "`self.dtype` is fixed when the model is built, by the default "
            "`dtype=torch.float32` of `Net.__init__` here") in notes  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {"build": ", dtype=dtype"},  # its parts follow the dtype it is built with
        {"build": ", dtype=self.dtype"},
        {"build": ").to(dtype"},
        {"params": ", dtype=None"},  # no float32 default
        {"params": ", dtype=torch.bfloat16"},
        {"params": ", dtype"},
        # ``from_pretrained`` builds under the load's default dtype
        {"base": "ModelMixin", "params": "", "value": "torch.get_default_dtype()"},
    ],
)
def test_a_dtype_the_parts_follow_or_that_is_not_float32_is_not_reported(
    change: dict[str, str],
) -> None:
    assert codes(net(**change)) == []


def test_an_attribute_something_else_updates_is_not_reported() -> None:
    updated = net() + "\n        def set_dtype(self, dtype):\n            self.dtype = dtype\n"
    assert codes(updated) == []
    applied = net() + (
        "\n        def _apply(self, fn, recurse=True):\n"
        "            setattr(self, 'dtype', fn(torch.zeros(())).dtype)\n"
        "            return super()._apply(fn, recurse)\n"
    )
    assert codes(applied) == []


def test_a_helper_init_calls_builds_at_construction_too() -> None:
    helper = "\n        def make(self, n):\n            return nn.Linear(n, n, dtype=self.dtype)\n"
    body = net().replace("nn.Linear(n, n)", "self.make(n)") + helper
    assert codes(body) == []
    assert codes(net() + helper.replace("self.dtype", "torch.float16")) == [("MPC101", 13)]


@pytest.mark.parametrize(
    "forward",
    [
        "x = x.to(self.proj.weight.dtype)\n            return self.proj(x)",  # the fix
        "return self.proj(x).to(self.dtype)",  # only the output: float32 on purpose
        "x = x.to(self.dtype)\n            return x * 2",  # meets no weight
        "with torch.autocast('cpu'):\n                return self.proj(x.to(self.dtype))",
    ],
)
def test_correct_uses_of_the_attribute_are_not_reported(forward: str) -> None:
    assert codes(net(forward=forward)) == []


def test_a_dtype_property_reading_the_weights_is_the_models_dtype() -> None:
    body = """
    class Net(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.proj = nn.Linear(n, n)

        @property
        def dtype(self):
            return self.proj.weight.dtype

        def forward(self, x):
            return self.proj(x.to(self.dtype))
    """
    assert codes(body) == []


def test_a_model_that_never_runs_in_half_is_not_reported() -> None:
    assert codes(net(), half=False) == []


# -- a module of another file that runs its input through its own layers ----------------

EMBED = """
import torch
from torch import nn


class PatchEmbed(nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.proj = nn.Conv2d(c, d, 2, stride=2)

    def forward(self, x):
        {body}
"""
MODEL = """
import torch
from torch import nn

from .embed import PatchEmbed


class Net(nn.Module):
    def __init__(self, c, d):
        super().__init__()
        self.embed = PatchEmbed(c, d)

    def forward(self, x):
        return self.embed({arg})
"""
FEEDS = "return self.proj(x).flatten(2)"


@pytest.fixture
def fresh() -> Iterator[None]:
    summarise.forget()
    yield
    summarise.forget()


def across(root: Path, body: str, arg: str) -> set[tuple[int, str]]:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "embed.py").write_text(EMBED.format(body=body))
    (root / "pkg" / "model.py").write_text(MODEL.format(arg=arg))
    path = root / "pkg" / "model.py"
    found = check_source(path.read_text(), str(path), all_rules(), Options(project_root=str(root)))
    return {(d.start.row, d.code) for d in found if not d.suppressed}


@pytest.mark.parametrize(
    ("body", "feeds"),
    [
        (FEEDS, True),
        ("x = torch.nn.functional.pad(x, (0, 1))\n        return self.proj(x)", True),
        ("return self.proj(x.to(self.proj.weight.dtype))", False),  # it casts what it gets
        ("return self.proj(x.float())", False),
        ("return x * 2", False),  # no weights
    ],
)
def test_the_summary_says_whether_forward_feeds_its_input_to_its_weights(
    tmp_path: Path, fresh: None, body: str, feeds: bool
) -> None:
    (tmp_path / "embed.py").write_text(EMBED.format(body=body))
    summary = FileSummariser(tmp_path).summarise(tmp_path / "embed.py", lambda *a: None)
    assert summary is not None
    assert summary.classes["PatchEmbed"].feeds_weights is feeds
    again = type(summary).from_json(summary.to_json())
    assert again is not None and again.classes["PatchEmbed"].feeds_weights is feeds


@pytest.mark.parametrize(
    ("body", "arg", "expected"),
    [
        (FEEDS, "x.float()", {(14, "MPC101")}),
        (FEEDS, "x", set()),
        ("return self.proj(x.to(self.proj.weight.dtype))", "x.float()", set()),
        ("return x * 2", "x.float()", set()),
    ],
)
def test_a_float32_input_to_such_a_module_of_another_file_is_reported(
    tmp_path: Path, fresh: None, body: str, arg: str, expected: set[tuple[int, str]]
) -> None:
    assert across(tmp_path, body, arg) == expected
