"""MPC404 deprecated-amp-api: every old spelling, the rewrite of its arguments, and lookalikes."""

from __future__ import annotations

import runpy
import textwrap
import warnings
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from tests.support import FIXTURES, check


def findings(source: str) -> list[Diagnostic]:
    return [d for d in check(textwrap.dedent(source)) if d.code == "MPC404"]


def fixed(source: str) -> str:
    text = textwrap.dedent(source)
    out, applied = apply_fixes(text, findings(source), unsafe=False)
    assert applied == len(findings(source))
    cst.parse_module(out)
    return out


def test_autocast_in_a_with_statement() -> None:
    (d,) = findings(
        """
        import torch
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            pass
        """
    )
    assert (d.start.row, d.start.column, d.end.row, d.end.column) == (3, 6, 3, 51)
    assert d.severity.value == "warning"
    assert d.message == (
        "`torch.cuda.amp.autocast` is deprecated since torch 2.4 and warns on every call "
        '(FutureWarning); use `torch.amp.autocast("cuda", ...)`'
    )
    assert d.fix is not None and d.fix.applicability == "safe"
    assert d.fix.message == 'Use `torch.amp.autocast("cuda", ...)`'
    name, arg = d.fix.edits  # the name and the first argument: the rest is left as written
    assert (name.start.row, name.start.column, name.end.column, name.content) == (
        3,
        6,
        29,
        "torch.amp.autocast",
    )
    assert (arg.start.row, arg.start.column, arg.end.column, arg.content) == (
        3,
        30,
        50,
        '"cuda", dtype=torch.bfloat16',
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")'),
        # positional arguments mean (enabled, dtype, cache_enabled) in the old API
        (
            "torch.cuda.amp.autocast(False, torch.float16)",
            'torch.amp.autocast("cuda", enabled=False, dtype=torch.float16)',
        ),
        ("torch.cpu.amp.autocast(enabled=use_amp)", 'torch.amp.autocast("cpu", enabled=use_amp)'),
        ("torch.cuda.amp.autocast(**amp_kwargs)", 'torch.amp.autocast("cuda", **amp_kwargs)'),
        # GradScaler's new first parameter is the device: positional arguments shift with it
        ("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'),
        (
            "torch.cuda.amp.GradScaler(2.0**16, growth_interval=100)",
            'torch.amp.GradScaler("cuda", 2.0**16, growth_interval=100)',
        ),
        ("torch.cpu.amp.GradScaler(enabled=False)", 'torch.amp.GradScaler("cpu", enabled=False)'),
        ("torch.cuda.amp.custom_fwd(fn)", 'torch.amp.custom_fwd(fn, device_type="cuda")'),
        ("torch.cuda.amp.custom_bwd()", 'torch.amp.custom_bwd(device_type="cuda")'),
        (
            "torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)",
            'torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)',
        ),
    ],
)
def test_call_rewrites(old: str, new: str) -> None:
    source = f"import torch\nfn = use_amp = amp_kwargs = None\nx = {old}\n"
    assert fixed(source) == f"import torch\nfn = use_amp = amp_kwargs = None\nx = {new}\n"


def test_rewrites_behave_like_the_old_calls() -> None:
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = torch.cpu.amp.autocast(False, torch.bfloat16)
        new = torch.amp.autocast("cpu", enabled=False, dtype=torch.bfloat16)
        assert (old.device, old.fast_dtype, old._enabled) == (
            new.device,
            new.fast_dtype,
            new._enabled,
        )
        old_scaler = torch.cpu.amp.GradScaler(2.0**10, growth_interval=7)
        new_scaler = torch.amp.GradScaler("cpu", 2.0**10, growth_interval=7)
        assert old_scaler.state_dict() == new_scaler.state_dict()


def test_decorators_bare_and_called() -> None:
    source = """
    import torch
    from torch.cuda.amp import custom_bwd, custom_fwd

    class Fn(torch.autograd.Function):
        @staticmethod
        @custom_fwd
        def forward(ctx, x):
            return x

        @staticmethod
        @custom_bwd
        def backward(ctx, g):
            return g

    @torch.cuda.amp.autocast(enabled=False)
    def evaluate(x):
        return x
    """
    fwd, bwd, evaluate = findings(source)
    assert (fwd.start.row, fwd.start.column, fwd.end.column) == (7, 6, 16)
    assert fwd.message == (
        "`custom_fwd` (`torch.cuda.amp.custom_fwd`) is deprecated since torch 2.4 and warns "
        "once, when the function is defined (FutureWarning); use "
        '`torch.amp.custom_fwd(..., device_type="cuda")`'
    )
    # a decorator runs (and warns) when the function is defined, not when it is called
    assert "warns once, when the function is defined" in bwd.message
    assert "warns once, when the function is defined" in evaluate.message
    assert evaluate.start.row == 16
    out = fixed(source)
    assert '    @torch.amp.custom_fwd(device_type="cuda")\n    def forward' in out
    assert '    @torch.amp.custom_bwd(device_type="cuda")\n    def backward' in out
    assert '@torch.amp.autocast("cuda", enabled=False)\ndef evaluate' in out


def test_spelling_follows_the_files_imports() -> None:
    as_th = "import torch as th\nwith th.cuda.amp.autocast():\n    pass\n"
    assert fixed(as_th) == 'import torch as th\nwith th.amp.autocast("cuda"):\n    pass\n'
    from_amp = (
        "import torch\nfrom torch import amp\n"
        "from torch.cuda.amp import GradScaler\ns = GradScaler()\n"
    )
    assert fixed(from_amp).endswith('s = amp.GradScaler("cuda")\n')


def test_no_fix_without_a_torch_name_or_with_star_args() -> None:
    (d,) = findings("from torch.cuda.amp import autocast\nwith autocast():\n    pass\n")
    assert d.fix is None
    assert d.message.endswith('use `torch.amp.autocast("cuda", ...)`')
    (d,) = findings("import torch\nargs = ()\nwith torch.cuda.amp.autocast(*args):\n    pass\n")
    assert d.fix is None


def test_multiline_call_keeps_its_layout() -> None:
    source = """
    import torch
    scaler = torch.cuda.amp.GradScaler(
        init_scale=1024.0,
        growth_interval=100,
    )
    """
    assert fixed(source) == textwrap.dedent(
        """
        import torch
        scaler = torch.amp.GradScaler(
            "cuda", init_scale=1024.0,
            growth_interval=100,
        )
        """
    )


def test_indented_multiline_calls_keep_their_indentation() -> None:
    source = """
    import torch

    def train(model, cast):
        scaler = torch.cuda.amp.GradScaler(
            init_scale=2.0**16,  # the old default
            growth_interval=2000,
        )
        with torch.cuda.amp.autocast(
            True,
            torch.bfloat16,
        ):
            pass

    class Fn(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(
            cast_inputs=torch.float32,
        )
        def forward(ctx, x):
            return x
    """
    assert fixed(source) == textwrap.dedent(
        """
        import torch

        def train(model, cast):
            scaler = torch.amp.GradScaler(
                "cuda", init_scale=2.0**16,  # the old default
                growth_interval=2000,
            )
            with torch.amp.autocast(
                "cuda", enabled=True,
                dtype=torch.bfloat16,
            ):
                pass

        class Fn(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(
                device_type="cuda", cast_inputs=torch.float32,
            )
            def forward(ctx, x):
                return x
        """
    )


def test_lookalikes_are_silent() -> None:
    assert not findings(
        """
        import torch
        from torch import amp
        from mylib import autocast, GradScaler

        with torch.amp.autocast("cuda"), torch.autocast("cpu"), amp.autocast("cuda"):
            pass
        with autocast():
            GradScaler()
        torch.amp.GradScaler("cuda")

        @torch.amp.custom_fwd(device_type="cuda")
        def f(ctx, x):
            return torch.is_autocast_enabled()
        """
    )


@pytest.mark.parametrize(
    "path", sorted((FIXTURES / "mpc404").glob("bad_*.py")), ids=lambda p: p.name
)
def test_fixed_fixtures_run_without_the_future_warning(path: Path, tmp_path: Path) -> None:
    """The bad fixtures raise the FutureWarning (runtime proof); after --fix they run clean."""
    pytest.importorskip("torch")
    out = tmp_path / path.name
    out.write_text(fixed(path.read_text()))
    assert not findings(out.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture turns FutureWarning into an error itself
        runpy.run_path(str(out), run_name="__main__")


def test_fallbacks_for_old_torch_are_silent() -> None:
    (d,) = findings(
        """
        import torch

        try:
            from torch.amp import custom_fwd
        except ImportError:  # torch < 2.4
            from torch.cuda.amp import custom_fwd

        class NativeScaler:
            def __init__(self, device="cuda"):
                try:
                    self.scaler = torch.amp.GradScaler(device=device)
                except AttributeError:
                    self.scaler = torch.cuda.amp.GradScaler()

        def autocast_for(new_api=hasattr(torch.amp, "autocast")):
            if new_api:
                return torch.amp.autocast("cuda")
            return torch.cuda.amp.autocast()

        def scaler_for(new_api):
            return torch.amp.GradScaler("cuda") if TORCH_2_4 else torch.cuda.amp.GradScaler()

        @custom_fwd(device_type="cuda")
        def forward(ctx, x):
            return x

        def train(amp):
            if amp:
                with torch.autocast("cuda"):
                    pass
            else:
                return torch.cuda.amp.GradScaler(enabled=False)
        """
    )
    # only the last: its other branch uses autocast, not the new GradScaler
    assert (d.start.row, d.start.column) == (33, 16)
    assert d.message.startswith("`torch.cuda.amp.GradScaler` is deprecated")


@pytest.mark.parametrize(
    "guard",
    [
        'hasattr(torch, "amp")',
        'hasattr(amp, "GradScaler")',
        'getattr(torch.amp, "GradScaler", None) is not None',
        'is_torch_version(">=", "2.3")',
        'is_torch_greater_or_equal("2.4")',
        'version.parse(torch.__version__) >= version.parse("2.4")',
        "parse(torch.__version__).release >= (2, 4)",
        'torch.__version__ >= "2.4"',
        'int(__version__.split(".")[0]) >= 2',
        "TORCH_2_4",
        "utils.TORCH_2_4 and device.type != 'mps'",
        "_TORCH_GREATER_EQUAL_2_4",
        "NEW_AMP",  # a name bound to a version test
        "not OLD_TORCH",
    ],
)
def test_version_guards_are_fallbacks(guard: str) -> None:
    """accelerate, ultralytics, transformers: a branch on the torch version."""
    source = f"""
        import torch
        from torch import __version__, amp
        from packaging import version
        from packaging.version import parse
        from ultralytics import utils

        NEW_AMP = hasattr(torch.amp, "GradScaler")
        OLD_TORCH = not NEW_AMP

        def make(device):
            if {guard}:
                scaler = torch.amp.GradScaler("cuda")
            else:
                scaler = torch.cuda.amp.GradScaler()
            if {guard}:
                return torch.amp.autocast("cuda")
            return torch.cuda.amp.autocast()

        def ternary(device):
            return amp.GradScaler("cuda") if {guard} else torch.cuda.amp.GradScaler()
        """
    assert findings(source) == []


@pytest.mark.parametrize(
    "handler", ["except:", "except Exception:", "except (KeyError, TypeError) as e:"]
)
def test_try_fallbacks_either_way(handler: str) -> None:
    source = f"""
        import torch

        try:
            scaler = torch.amp.GradScaler("cuda")
        {handler}
            scaler = torch.cuda.amp.GradScaler()
        try:  # the old spelling first, the new one where it is gone
            ctx = torch.cuda.amp.autocast()
        {handler}
            ctx = torch.amp.autocast("cuda")
        """
    assert findings(source) == []


def test_branches_on_other_things_are_not_fallbacks() -> None:
    """sentence-transformers' fit: the ``cuda`` branch takes the old spelling on every torch."""
    found = findings(
        """
        import torch

        def make_scaler(device_type, npu, amp):
            scaler = None
            if npu:
                scaler = torch.npu.amp.GradScaler()
            elif device_type == "cuda":
                scaler = torch.cuda.amp.GradScaler()
            else:
                scaler = torch.amp.GradScaler(device_type)
            if is_torch_npu_available() or not amp:
                return torch.amp.autocast("cpu")
            return torch.cuda.amp.autocast()

        def pick(use_new):
            return torch.amp.GradScaler("cuda") if use_new else torch.cuda.amp.GradScaler()

        try:
            scaler = torch.amp.GradScaler("cuda")
        except KeyError:  # not what a missing name raises
            scaler = torch.cuda.amp.GradScaler()
        """
    )
    assert [(d.start.row, d.start.column) for d in found] == [(9, 18), (14, 12), (17, 57), (22, 14)]


LEGACY = """\
import torch

scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast(dtype=torch.bfloat16):
    pass


class Twice(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd
    def forward(ctx, x):
        return x * 2
"""


def on_target(version: tuple[int, int] | None) -> tuple[list[Diagnostic], str]:
    from mpcheck.pipeline.one_file import Options, check_source
    from mpcheck.ruleset.rule import all_rules

    options = Options(target_torch_version=version)
    found = [d for d in check_source(LEGACY, "t.py", all_rules(), options) if d.code == "MPC404"]
    return found, apply_fixes(LEGACY, found, unsafe=False)[0]


def test_target_torch_2_1_recommends_only_what_torch_2_1_has() -> None:
    found, out = on_target((2, 1))
    (autocast,) = found  # torch 2.1 has no torch.amp.GradScaler (2.3) nor custom_fwd (2.4)
    assert autocast.message == (
        "`torch.cuda.amp.autocast` is deprecated since torch 2.4 and warns on every call "
        '(FutureWarning); use `torch.amp.autocast("cuda", ...)` (in torch 2.0 and later: '
        "the target is 2.1)"
    )
    assert "torch.amp.GradScaler" not in out and "torch.amp.custom_fwd" not in out
    assert 'with torch.amp.autocast("cuda", dtype=torch.bfloat16):' in out
    assert "scaler = torch.cuda.amp.GradScaler()" in out
    assert "@torch.cuda.amp.custom_fwd\n" in out


def test_target_before_torch_2_uses_torch_autocast() -> None:
    (autocast,), out = on_target((1, 12))
    assert 'use `torch.autocast("cuda", ...)` (in torch 1.10 and later' in autocast.message
    assert 'with torch.autocast("cuda", dtype=torch.bfloat16):' in out
    assert on_target((1, 9))[0] == []  # no device-generic autocast before 1.10


def test_target_torch_2_5_is_the_latest_advice() -> None:
    found, out = on_target((2, 5))
    assert [d.message for d in found] == [d.message for d in on_target(None)[0]]
    assert [d.start.row for d in found] == [3, 4, 10]
    assert "(in torch" not in found[0].message
    assert 'scaler = torch.amp.GradScaler("cuda")' in out
    assert '@torch.amp.custom_fwd(device_type="cuda")\n' in out
    assert "warns once, when the function is defined" in found[2].message
