"""MPC404 deprecated-amp-api: every old spelling, the rewrite of its arguments, and lookalikes."""

from __future__ import annotations

import textwrap
import warnings

import libcst as cst
import pytest

from mpcheck.diagnostics import Diagnostic
from mpcheck.fixes import apply_fixes
from tests.support import check


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
    (edit,) = d.fix.edits
    assert edit.content == 'torch.amp.autocast("cuda", dtype=torch.bfloat16)'


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
        "`custom_fwd` (`torch.cuda.amp.custom_fwd`) is deprecated since torch 2.4 and warns on "
        'every call (FutureWarning); use `torch.amp.custom_fwd(..., device_type="cuda")`'
    )
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
