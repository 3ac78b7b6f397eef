"""Code that runs at construction is evidence of float32 (issue 36, item 3).

A module's ``__init__``, and a function only construction calls (``__init__`` bodies, class
bodies, the top level), compute their tables before any cast of the model: a finding whose
only half premise is "this module may run in half" gives nothing there. A function also
called from ``forward`` (or handed a dtype, or under a changed default dtype, or in a model a
library loader builds in the load dtype) keeps the premise. Driven through the CLI
(``mpcheck.cli.main``) on small projects, and through the per-file pass for the call sites.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mpcheck import cli
from mpcheck.project.construction import Construction, construction_of
from mpcheck.project.records import blank
from tests.support import FIXTURES

# (a case of its own: in this repository, other fixtures change the default dtype)
GOOD = (FIXTURES / "xfile" / "good_table_at_construction" / "model.py").read_text()
BAD = (FIXTURES / "mpc303" / "bad_sinusoid_table_also_in_forward.py").read_text()
TABLE_ROW = 15  # the phase product in ``sinusoids``


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], **files: str) -> list[Any]:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\n')
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    rc = cli.main(["check", "--no-cache", "--output-format", "json", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    found: list[Any] = json.loads(out)
    return [(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in found]


@pytest.fixture(autouse=True)
def _inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MPCHECK_OUTPUT_FORMAT", raising=False)


def test_a_table_built_in_a_function_only_init_calls_gives_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, capsys, model=GOOD) == []


def test_the_same_function_also_called_from_forward_is_still_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, capsys, model=BAD) == [("model.py", TABLE_ROW, "MPC303")]


def test_construction_under_a_half_default_dtype_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = "    model = AudioEncoder"
    source = GOOD.replace(built, "    torch.set_default_dtype(torch.bfloat16)\n" + built)
    assert check(tmp_path, capsys, model=source) == [("model.py", TABLE_ROW, "MPC303")]


def test_a_helper_handed_a_dtype_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``__init__(..., dtype=None)`` alone changes nothing (the helper makes its table from
    float32 defaults); handing the dtype to the helper does."""
    own = GOOD.replace("n_state: int) -> None:", "n_state: int, dtype=None) -> None:")
    assert check(tmp_path, capsys, model=own) == []
    handed = own.replace("sinusoids(n_ctx, n_state)", "sinusoids(n_ctx, n_state, dtype=dtype)")
    handed = handed.replace("max_timescale=10000.0):", "max_timescale=10000.0, dtype=None):")
    assert check(tmp_path, capsys, model=handed) == [("model.py", TABLE_ROW, "MPC303")]


def test_a_model_a_library_loader_builds_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``from_pretrained(torch_dtype=...)`` builds the model under the load dtype as the
    default dtype: construction itself may run in half."""
    loaded = GOOD.replace(
        "AudioEncoder(3000, 64).half()",
        "AudioEncoder.from_pretrained('x', torch_dtype=torch.float16)",
    )
    found = check(tmp_path, capsys, model=loaded)
    assert ("model.py", TABLE_ROW, "MPC303") in found


def callers(source: str, name: str) -> frozenset[str] | None:
    return Construction([construction_of(blank(source.encode()), "m")]).callers(name)


def test_the_pass_finds_construction_calls_through_helpers() -> None:
    source = """
def get_1d(d, pos):
    return pos

def get_2d(d, n):
    return get_1d(d, n)

class Embed(nn.Module):
    table = make_table()

    def __init__(self, d):
        super().__init__()
        self.pe = get_2d(
            d, 16
        )
        self._build()

    def _build(self):
        self.cache = self._freqs()

    def _freqs(self):
        return 1

    def forward(self, x):
        return x + self.pe
"""
    assert callers(source, "get_1d") == frozenset({"m.Embed"})
    assert callers(source, "_freqs") == frozenset({"m.Embed"})
    assert callers(source, "make_table") == frozenset({""})  # a class body: import time
    assert callers(source, "forward") is None  # nobody calls it by name: not construction


@pytest.mark.parametrize(
    "use",
    [
        "    def forward(self, x):\n        return helper(x)\n",  # called at run time
        "    def forward(self, x):\n        return self.fn(x)\n    fn = helper\n",  # a callback
        "    def __init__(self):\n        self.t = helper(8, dtype=torch.half)\n",  # a dtype
    ],
)
def test_any_other_use_keeps_the_premise(use: str) -> None:
    source = f"class A(nn.Module):\n    def __init__(self):\n        self.t = helper(8)\n\n{use}"
    assert callers(source, "helper") is None


def test_a_scripts_loop_and_a_class_built_in_a_function_are_no_construction() -> None:
    script = 'if __name__ == "__main__":\n    for x in data:\n        out = helper(x)\n'
    assert callers(script, "helper") is None
    # a bare ``main()`` at the top level runs the script (after its casts): no construction
    unguarded = "def main():\n    helper(model(x))\n\nmain()\nmodel.fit(helper2())\n"
    assert callers(unguarded, "helper") is None
    assert callers(unguarded, "helper2") is None
    assert callers("PE = make_table(1000, 64)\n", "make_table") == frozenset({""})
    inner = "def make():\n    class A:\n        def __init__(self):\n            helper(1)\n"
    assert callers(inner, "helper") is None


MIXIN = """
import torch
from sat.model.base_model import BaseMixin


class Rotary(BaseMixin):
    def __init__(self, n, dim, theta=10000):
        super().__init__()
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
        grid = torch.arange(n, dtype=torch.float32)
        self.freqs = torch.einsum("..., f -> ... f", grid, freqs).sin()

    def rotate(self, n, dim, theta=10000):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
        grid = torch.arange(n, dtype=torch.float32)
        return torch.einsum("..., f -> ... f", grid, freqs).sin()
"""


def test_a_constructor_of_a_class_of_unknown_kind_is_construction_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library base the engine cannot see (SAT's ``BaseMixin``): ``__init__`` runs when
    the object is built, not under a trainer's autocast; a method still may."""
    assert check(tmp_path, capsys, model=MIXIN) == [("model.py", 16, "MPC303")]
