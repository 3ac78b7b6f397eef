"""Methods nothing calls (:mod:`mpcheck.project.uncalled`) and branches that run only while
torch exports the model (:func:`mpcheck.engine.reachability.export_only`): their code gives
no finding."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from mpcheck.engine.reachability import eager_only, export_only
from mpcheck.knowledge.torch_api import MODULE_METHODS
from mpcheck.project.lines import headers
from mpcheck.project.models import uses_of_sources
from mpcheck.project.records import record_of
from mpcheck.project.uncalled import Uncalled, attributes_of, may_name, methods_of

MODEL = b"""\
from torch import nn


class Decoder(nn.Module):
    def forward(self, z):
        return self.tiled(z)

    def tiled(self, z):
        return z

    def lonely(self, z):
        return z

    @property
    def shown(self):
        return 1

    def __repr__(self):
        return "d"

    def extra_repr(self):
        return ""

    class Inner:
        def deep(self):
            pass


def top():
    pass
"""


def test_candidates_are_methods_the_file_writes_only_at_their_def() -> None:
    found = methods_of(MODEL, MODEL, headers(MODEL))
    assert found == ("Decoder.lonely", "Decoder.extra_repr")


def test_the_attribute_filter_holds_what_follows_a_dot() -> None:
    bits = attributes_of(b"vae.decode_tiled(z)\nx = self . blend\n")
    assert may_name(bits, "decode_tiled") and may_name(bits, "blend")
    assert not may_name(bits, "vae")


def _uncalled(
    parts: dict[str, tuple[str, tuple[str, ...], int, tuple[str, ...]]],
    bases: dict[str, tuple[str, ...]],
    side: tuple[Path, ...] = (),
    *,
    package: bool = False,
) -> Uncalled:
    return Uncalled(parts, bases, lambda b: b if b in bases else None, side, package=package)


def test_a_method_another_file_writes_is_called() -> None:
    parts = {
        "m.py": ("m", ("A.decode", "A.unused"), 0, ()),
        "run.py": ("run", (), attributes_of(b"a.decode(x)"), ()),
    }
    found = _uncalled(parts, {"m.A": ("torch.nn.Module",)})
    assert found.called("m.A.decode")
    assert not found.called("m.A.unused")


def test_strings_side_files_tests_and_packages_keep_methods() -> None:
    parts = {
        "m.py": ("m", ("A.by_name", "A.public", "A._private", "A.test_x"), 0, ("by_name",)),
        "tests/t.py": ("tests.t", ("T.check",), 0, ()),
    }
    found = _uncalled(parts, {"m.A": (), "tests.t.T": ()}, package=True)
    assert found.called("m.A.by_name")  # (``getattr(a, "by_name")``)
    assert found.called("m.A.public")  # (a package's users may call it)
    assert not found.called("m.A._private")
    assert found.called("m.A.test_x")
    assert found.called("tests.t.T.check")


def test_a_configuration_naming_a_method_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text("hook: on_epoch\n")
    parts = {"m.py": ("m", ("A.on_epoch", "A.other"), 0, ())}
    found = _uncalled(parts, {"m.A": ()}, (tmp_path / "cfg.yaml",))
    assert found.called("m.A.on_epoch")
    assert not found.called("m.A.other")


def test_a_library_base_anywhere_in_the_family_calls_by_name() -> None:
    parts = {"m.py": ("m", ("Mixin._init_weights", "Child.training_step", "Own.solo"), 0, ())}
    bases = {
        "m.Mixin": (),
        "m.Model": ("m.Mixin", "transformers.PreTrainedModel"),
        "m.Child": ("m.Parent",),
        "m.Parent": ("lightning.LightningModule",),
        "m.Own": ("torch.nn.Module",),
    }
    found = _uncalled(parts, bases)
    assert found.called("m.Mixin._init_weights")  # (an ancestor of a library subclass)
    assert found.called("m.Child.training_step")  # (a descendant of one)
    assert not found.called("m.Own.solo")


def test_the_project_answers_through_its_uses(tmp_path: Path) -> None:
    sources = {
        "pkg/__init__.py": b"",
        "pkg/model.py": MODEL,
        "pkg/run.py": b"from pkg.model import Decoder\nDecoder().half()(1)\n",
    }
    uses = uses_of_sources(sources).at("pkg.model")
    assert uses.method_reached("Decoder", "tiled")
    assert not uses.method_reached("Decoder", "lonely")
    assert record_of(MODEL, "pkg/model.py").methods == ("Decoder.lonely", "Decoder.extra_repr")


def _test(source: str) -> cst.BaseExpression:
    stmt = cst.parse_statement(f"if {source}:\n    pass\n")
    assert isinstance(stmt, cst.If)
    return stmt.test


def _resolve(expr: cst.BaseExpression) -> str | None:
    names = {"is_tracing": "torch.jit.is_tracing"}
    text = cst.Module([]).code_for_node(expr)
    return names.get(text, text)


@pytest.mark.parametrize(
    ("source", "exporting"),
    [
        ("torch.onnx.is_in_onnx_export()", True),
        ("torch.jit.is_scripting()", True),
        ("is_tracing()", True),
        ("torch.jit.is_tracing() or torch.jit.is_scripting()", True),
        ("x and torch.jit.is_tracing()", True),
        ("x or torch.jit.is_tracing()", False),
        ("torch.compiler.is_compiling()", False),  # (compiling runs the code)
        ("torch.jit.is_tracing", False),
    ],
)
def test_export_only_tests(source: str, exporting: bool) -> None:
    assert export_only(_test(source), _resolve) is exporting


def test_not_exporting_is_every_eager_run() -> None:
    assert eager_only(_test("not torch.jit.is_scripting()"), _resolve)
    assert not eager_only(_test("not x"), _resolve)


def test_module_methods_are_torch_modules_own() -> None:
    torch = pytest.importorskip("torch")
    own = {n for n in dir(torch.nn.Module) if not n.startswith("__")}
    assert own == MODULE_METHODS


def test_a_name_inside_a_longer_identifier_is_no_second_writing() -> None:
    code = b"""\
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return self.in_proj(x) + self.q_m

    def _proj(self, x):
        return x

    def _m(self, x):
        return x
"""
    assert methods_of(code, code, headers(code)) == ("Block._proj", "Block._m")
    called = code + b"\n\nBlock()._m(1)\n"
    assert methods_of(called, called, headers(called)) == ("Block._proj",)
