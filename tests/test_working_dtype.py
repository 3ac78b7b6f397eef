"""A tensor cast to the run's working dtype outside a module is half on half runs, and a layer
built on its own in float32 refuses it (MPC102): the engine's fact through the analysis,
the finding through the CLI (seed incident (b): OneTrainer's erode kernel, PR 409)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from mpcheck import cli
from mpcheck.engine.analysis import FileAnalysis
from mpcheck.engine.facts import Cause, Fact, Prec
from mpcheck.engine.sites import CallSite
from mpcheck.project.names import ImportTable
from tests.support import FIXTURES


def cast_results(source: str) -> dict[str, Fact]:
    """What each ``<x>.to(...)`` call of ``source`` makes, by its code."""
    module = cst.parse_module(textwrap.dedent(source))
    made: dict[str, Fact] = {}

    class Casts:
        def wants(self, kind: str) -> bool:
            return kind == "calls"

        def deliver(self, kind: str, site: object) -> None:
            if isinstance(site, CallSite) and site.method == "to":
                made[module.code_for_node(site.node)] = site.result

    walk = FileAnalysis(module, ImportTable.of(module), Casts(), source=source.encode())
    walk.run()
    return made


def test_a_sampler_casting_to_a_dtype_it_does_not_spell_makes_the_models_dtype() -> None:
    made = cast_results(
        """
        import torch

        class Sampler:
            def sample(self, mask, args):
                weight_dtype = prepare_dtype(args)
                a = mask.to(dtype=self.model.train_dtype.torch_dtype())
                b = mask.to(weight_dtype)
                c = mask.to("cuda")
                return a, b, c
        """
    )
    for code in ("mask.to(dtype=self.model.train_dtype.torch_dtype())", "mask.to(weight_dtype)"):
        fact = made[code]
        assert fact.prec is Prec.MODEL and fact.cause is Cause.CAST, code
        assert fact.origin is not None and "working dtype" in fact.origin.text
    assert made['mask.to("cuda")'].prec is Prec.UNKNOWN  # a move, not a cast


def test_in_a_module_such_a_dtype_may_be_any_parts_own() -> None:
    made = cast_results(
        """
        import torch
        from torch import nn

        class Block(nn.Module):
            def forward(self, x):
                return x.to(self.compute_dtype)
        """
    )
    assert made["x.to(self.compute_dtype)"].prec is Prec.UNKNOWN


def run_json(capsys: pytest.CaptureFixture[str], *paths: Path) -> list[dict[str, object]]:
    rc = cli.main(["check", "--no-cache", "--output-format", "json", *map(str, paths)])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    data: list[dict[str, object]] = json.loads(out)
    return data


def test_the_float32_erode_kernel_is_reported_where_it_is_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = FIXTURES / "mpc102" / "bad_standalone_erode_kernel.py"
    (d,) = run_json(capsys, bad)
    assert (d["code"], d["location"]) == ("MPC102", {"row": 19, "column": 18})  # nn.Conv2d(...)
    assert d["message"] == (
        "`kernel` is a `Conv2d` built in float32 (the default) at line 19 and never cast; it "
        "is fed `mask` (cast to the working dtype `self.train_dtype` (half when that is "
        "float16 or bfloat16) at line 27) at line 29, and its float32 weights refuse that "
        "input when it is half"
    )


def test_a_kernel_built_in_the_mask_dtype_a_float32_one_fed_float32_and_a_norm_are_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_json(capsys, FIXTURES / "mpc102" / "good_standalone_erode_kernel.py") == []


def test_a_layer_of_a_model_is_left_to_mpc104(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``model.head = nn.Linear(...)`` after the cast is a part cast apart (MPC104's)."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn

            def main(weight_dtype):
                model = nn.Sequential(nn.Linear(4, 4)).to(weight_dtype)
                model.head = nn.Linear(4, 4)
                x = torch.randn(2, 4).to(weight_dtype)
                return model.head(x)
            """
        )
    )
    assert [d["code"] for d in run_json(capsys, script) if d["code"] == "MPC102"] == []


def test_a_container_of_layers_built_in_their_own_dtype_is_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``nn.Sequential(nn.Linear(..., dtype=torch.bfloat16))``: the container has no dtype
    of its own; its layers were built in bfloat16."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn

            def main():
                model = nn.Sequential(nn.Linear(4, 4, dtype=torch.bfloat16))
                return model(torch.ones(1, 4, dtype=torch.bfloat16))
            """
        )
    )
    assert run_json(capsys, script) == []


def test_a_project_class_named_like_a_torch_layer_is_no_standalone_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A project's ``Linear(base)`` (peft's shape: a wrapper around a bfloat16 base layer)
    is no ``nn.Linear`` built in float32: its parts have their own dtype."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn

            class Linear(nn.Module):
                def __init__(self, base):
                    super().__init__()
                    self.base_layer = base

                def forward(self, x):
                    return self.base_layer(x)

            def main():
                layer = Linear(nn.Linear(4, 4).to(torch.bfloat16))
                return layer(torch.ones(1, 4, dtype=torch.bfloat16))
            """
        )
    )
    assert [d["code"] for d in run_json(capsys, script) if d["code"] == "MPC102"] == []


def test_a_layer_handed_to_a_function_that_may_cast_it_is_no_longer_float32(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``quantize_(proj)`` is handed the layer itself and casts it in place."""
    good = FIXTURES / "mpc102" / "good_standalone_layer_handed_to_quantizer.py"
    assert run_json(capsys, good) == []


def test_a_layer_handed_to_torch_or_looked_at_stays_float32(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``checkpoint(proj, x)`` runs it as it is; ``print(proj)`` only looks at it."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn
            from torch.utils.checkpoint import checkpoint

            def main(config):
                proj = nn.Linear(4, 4)
                print(proj)
                x = torch.randn(2, 4).to(dtype=config.train_dtype)
                return checkpoint(proj, x, use_reentrant=False)
            """
        )
    )
    assert [(d["code"], d["location"]["row"]) for d in run_json(capsys, script)] == [("MPC102", 6)]
