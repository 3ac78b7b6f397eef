"""MPC402 custom-function-without-custom-fwd: what makes a Function reportable, and what not."""

from __future__ import annotations

import textwrap

from mpcheck.diagnostics import Diagnostic
from tests.support import check

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"  # lines 1-3

LINEAR_FN = """
class LinearFn(torch.autograd.Function):
    @staticmethod{fwd}
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod{bwd}
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x
"""
USE = """
def step(x, w):
    with torch.autocast("cuda"):
        y = LinearFn.apply(x, w)
    y.sum().backward()
"""


def findings(body: str) -> list[Diagnostic]:
    return [d for d in check(HEADER + textwrap.dedent(body)) if d.code == "MPC402"]


def function(fwd: str = "", bwd: str = "") -> str:
    return LINEAR_FN.format(fwd=f"\n    {fwd}" if fwd else "", bwd=f"\n    {bwd}" if bwd else "")


def test_undecorated_linear_function_in_an_autocast_file() -> None:
    (d,) = findings(function() + USE)
    assert (d.start.row, d.start.column, d.end.row, d.end.column) == (5, 7, 5, 15)
    assert d.severity.value == "error"
    assert d.message == (
        "autograd Function `LinearFn` has no `@torch.amp.custom_fwd` on `forward` or "
        "`@torch.amp.custom_bwd` on `backward`, and autocast is used in this file (line 17): "
        "`backward` runs outside autocast, so the half-precision gradient of `x @ weight.t()` "
        "meets the float32 tensors saved in `forward` at `grad @ weight`"
    )
    assert [(r.start.row, r.message) for r in d.related] == [
        (9, "autocast runs this in half precision in `forward`"),
        (14, "`backward` mixes the half gradient with saved float32 tensors here"),
        (17, "Autocast is used"),
    ]
    assert d.fix is None


def test_forward_decorated_backward_not() -> None:
    (d,) = findings(function(fwd='@torch.amp.custom_fwd(device_type="cuda")') + USE)
    assert "has no `@torch.amp.custom_bwd` on `backward`, and autocast" in d.message


def test_both_decorated_in_any_spelling_is_fine() -> None:
    assert not findings(
        function(
            '@torch.amp.custom_fwd(device_type="cuda")', '@torch.amp.custom_bwd(device_type="cuda")'
        )
        + USE
    )
    assert not findings(
        "from torch.cuda.amp import custom_bwd, custom_fwd\n"
        + function("@custom_fwd(cast_inputs=torch.float32)", "@custom_bwd")
        + USE
    )


def test_forward_with_autocast_disabled_is_fine() -> None:
    assert not findings(function('@torch.autocast("cuda", enabled=False)') + USE)


def test_forward_with_cast_inputs_needs_no_custom_bwd() -> None:
    """``cast_inputs`` runs forward in one dtype with autocast off: measured to backprop fine."""
    assert not findings(
        function('@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)') + USE
    )
    # ``cast_inputs=None`` is the default: forward still runs under autocast
    (d,) = findings(function('@torch.amp.custom_fwd(device_type="cuda", cast_inputs=None)') + USE)
    assert "has no `@torch.amp.custom_bwd` on `backward`" in d.message


def test_matmul_of_forward_in_a_disabled_region_is_fine() -> None:
    disabled = function().replace(
        "        return x @ weight.t()",
        '        with torch.autocast("cuda", enabled=False):\n'
        "            return x.float() @ weight.float().t()",
    )
    assert not findings(disabled + USE)
    # a backward in a disabled region still mixes the half gradient with float32 tensors
    mixed = function().replace(
        "        return grad @ weight, grad.t() @ x",
        '        with torch.autocast("cuda", enabled=False):\n'
        "            return grad @ weight, grad.t() @ x",
    )
    (d,) = findings(mixed + USE)
    assert (d.start.row, d.start.column) == (5, 7)
    assert [r.start.row for r in d.related] == [9, 15, 18]


def test_other_autocast_signals() -> None:
    scaler = "\nscaler = torch.amp.GradScaler('cuda')\n"
    (d,) = findings(function() + scaler)
    assert "and a GradScaler is used in this file (line 16)" in d.message
    sibling = function().replace("LinearFn", "Other") + function(
        '@torch.amp.custom_fwd(device_type="cuda")', '@torch.amp.custom_bwd(device_type="cuda")'
    )
    (d,) = findings(sibling)
    assert d.message.startswith("autograd Function `Other` has no")
    assert "`custom_fwd`/`custom_bwd` is used in this file" in d.message


def test_function_base_through_imports_and_local_subclasses() -> None:
    body = (
        "from torch.autograd import Function\n"
        + function().replace("torch.autograd.Function", "Function")
        + "\nclass Derived(LinearFn):\n    pass\n"
        + USE
    )
    (d,) = findings(body)  # Derived has no forward/backward of its own
    assert d.message.startswith("autograd Function `LinearFn`")


def test_silent_without_autocast_or_without_matmuls() -> None:
    assert not findings(function())  # no autocast anywhere in the file
    elementwise = """
    class Swish(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * torch.sigmoid(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            s = torch.sigmoid(x)
            return grad * s * (1 + x * (1 - s))
    """
    assert not findings(elementwise + USE.replace("LinearFn", "Swish"))
    forward_only = """
    class Project(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return x @ w
    """
    assert not findings(forward_only + USE)


def test_decorators_kept_in_variables_are_not_second_guessed() -> None:
    body = (
        'fwd_fp32 = torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\n'
        + function("@fwd_fp32", "@torch.autograd.function.once_differentiable")
        + USE
    )
    assert not findings(body)
    # a torch decorator that is not custom_bwd does not stand in for it
    (d,) = findings(function("", "@torch.autograd.function.once_differentiable") + USE)
    assert d.message.startswith("autograd Function `LinearFn` has no `@torch.amp.custom_fwd`")


def test_the_message_names_what_the_target_torch_has() -> None:
    from mpcheck.pipeline.one_file import Options, check_source
    from mpcheck.ruleset.rule import all_rules

    def message(target: tuple[int, int] | None) -> str:
        options = Options(target_torch_version=target)
        found = check_source(function() + USE, "t.py", all_rules(), options)
        (d,) = [d for d in found if d.code == "MPC402"]
        return d.message

    assert message((2, 1)).startswith(
        "autograd Function `LinearFn` has no `@torch.cuda.amp.custom_fwd` on `forward` or "
        "`@torch.cuda.amp.custom_bwd` on `backward`"
    )
    assert message((2, 4)) == message(None)
    assert "`@torch.amp.custom_fwd` on `forward`" in message(None)
