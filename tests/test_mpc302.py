"""MPC302 half-precision-variance: reported where a float16 mean square reaches a root or a
division, quiet for losses, distances, upcast and fused norms, and under CUDA autocast."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import FIXTURES, check, run_fixed_fixture

HEADER = (
    "import torch\nimport torchaudio\nfrom torch import nn\n\n\n"
    "class Norm(nn.Module):\n    def forward(self, x, y):\n"
)


def found(body: str) -> list[int]:
    source = HEADER + "".join(f"        {line}\n" for line in body.splitlines())
    return [d.start.row - 7 for d in check(source) if d.code == "MPC302"]


@pytest.mark.parametrize(
    "body",
    [
        "v = x.pow(2).mean(-1, keepdim=True)\nreturn x * torch.rsqrt(v + 1e-6)",
        "v = (x * x).mean(-1, keepdim=True)\nreturn x / torch.sqrt(v + 1e-6)",
        "v = x.square().sum(-1, keepdim=True)\nreturn x * (v + 1e-6).rsqrt()",
        "v = torch.mean(x ** 2, dim=-1, keepdim=True)\nreturn x * torch.rsqrt(v.clamp(min=1e-6))",
        "v = torch.var(x, -1, keepdim=True)\nreturn x / torch.sqrt(v + 1e-5)",
        "return x / x.pow(2).sum(-1, keepdim=True)",
    ],
)
def test_mean_square_reaching_a_root_or_division_is_reported(body: str) -> None:
    assert found(body) == [1]


def test_mean_square_minus_squared_mean_is_a_variance() -> None:
    """Batch norm by hand (detectron2's NaiveSyncBatchNorm): E[x²] - E[x]² reaches the root."""
    body = (
        "m = torch.mean(x, dim=[0, 2, 3])\n"
        "meansqr = torch.mean(x * x, dim=[0, 2, 3])\n"
        "var = meansqr - m * m\n"
        "return x * torch.rsqrt(var + 1e-5)"
    )
    assert found(body) == [2]
    timm = (  # timm's _layer_norm_cf_sqm, a subtraction in brackets, then a clamp
        "u = x.mean(dim=1, keepdim=True)\n"
        "s = ((x * x).mean(dim=1, keepdim=True) - (u * u)).clamp(0)\n"
        "return (x - u) * torch.rsqrt(s + 1e-6)"
    )
    assert found(timm) == [2]


@pytest.mark.parametrize(
    "body",
    [
        "return (x - y).pow(2).mean()",  # an MSE loss: no root, no division
        "d = x.pow(2).sum(1, keepdim=True) - 2 * x @ y.t()\nreturn d.argmin(1)",  # a distance
        "v = x.float().pow(2).mean(-1, keepdim=True)\nreturn x * torch.rsqrt(v + 1e-6)",
        "h = x.to(torch.float32)\nreturn h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)",
        "return x / x.norm(dim=-1, keepdim=True)",
        "z = 1 - x.pow(2).sum(-1, keepdim=True)\nreturn torch.sqrt(z.clamp(min=0))",
        # a branch only float32 runs take
        (
            "if x.dtype == torch.float32:\n"
            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
            "return y"
        ),
        # a scale-invariant log loss (GLPN's SiLog): a mean square minus a scaled square
        "return torch.sqrt(torch.pow(x, 2).mean() - 0.5 * torch.pow(x.mean(), 2))",
        "return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)",
        "x = x.to(torch.bfloat16)\nreturn x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
        (
            "with torch.autocast('cuda', dtype=torch.float16):\n"
            "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)"
        ),
    ],
)
def test_safe_forms_are_quiet(body: str) -> None:
    assert found(body) == []


def test_mul_is_not_upcast_by_cuda_autocast() -> None:
    body = (
        "with torch.autocast('cuda', dtype=torch.float16):\n"
        "    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)"
    )
    assert found(body) == [2]


def test_script_tensor_of_unknown_dtype_is_quiet() -> None:
    source = "import torch\n\nx = torch.load('x.pt')\ny = x * torch.rsqrt(x.pow(2).mean(-1) + 1)\n"
    assert [d for d in check(source) if d.code == "MPC302"] == []


def test_the_fix_makes_the_norm_survive_outliers(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    run_fixed_fixture("MPC302", FIXTURES / "mpc302" / "bad_rmsnorm_one_expression.py", tmp_path)


def test_no_fix_when_the_variance_is_a_variable() -> None:
    source = (
        HEADER
        + "        v = x.pow(2).mean(-1, keepdim=True)\n        return x * torch.rsqrt(v + 1)\n"
    )
    (diag,) = [d for d in check(source) if d.code == "MPC302"]
    assert diag.fix is None


def spans(body: str) -> list[tuple[int, int, int]]:
    source = HEADER + "".join(f"        {line}\n" for line in body.splitlines())
    found = [d for d in check(source) if d.code == "MPC302"]
    return [(d.start.row - 7, d.start.column, d.end.column) for d in found]


@pytest.mark.parametrize(
    "body",
    [
        "kv = x.transpose(-1, -2) @ y\nout = x @ kv\nreturn out[..., :-1] / (out[..., -1:] + 1e-6)",
        "kv = torch.matmul(x.transpose(-2, -1), y)\nz = torch.matmul(x, kv)\n"
        "return z[..., :-1] / z[..., -1:].clamp(min=1e-6)",
        "kv = x.mT @ y\nreturn (x @ kv) / (x @ kv).sum(-1, keepdim=True).float()",
    ],
)
def test_linear_attention_context_divided_by_its_sum_is_reported(body: str) -> None:
    first = body.splitlines()[0]
    start = first.index("=") + 2
    assert spans(body) == [(1, start + 9, len(first) + 9)]  # 8 columns of indentation


@pytest.mark.parametrize(
    "body",
    [
        "return (x @ y.transpose(-2, -1)).softmax(-1) @ y",  # ordinary attention
        "a = x.transpose(-2, -1) @ y\nreturn (y @ a.softmax(-1)) / 8.0",  # channel attention
        "kv = x.transpose(-1, -2) @ y\nout = x @ kv\nreturn out / out.norm(dim=-1)",
        "kv = x.float().transpose(-1, -2) @ y.float()\nout = x.float() @ kv\n"
        "return out[..., :-1] / out[..., -1:]",
        "g = x.transpose(-1, -2) @ x\nreturn g",  # a Gram matrix nobody divides by
    ],
)
def test_matmuls_that_are_not_linear_attention_are_quiet(body: str) -> None:
    assert spans(body) == []


@pytest.mark.parametrize(
    "body",
    [
        # values the engine bounds (mpcheck/engine/ranges.py): their squares fit float16
        "g = torch.tanh(x)\nreturn g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + 1e-6)",
        "p = x.softmax(-1)\nreturn p / torch.sqrt(p.var(-1, keepdim=True) + 1e-6)",
        "s = torch.sin(x) * 0.5 + 0.5\nreturn s / (s * s).mean(-1, keepdim=True).sqrt()",
        "c = x.clamp(-150.0, 150.0)\nreturn c * torch.rsqrt(c.pow(2).mean(-1) + 1e-6)",
        "i = (y.to(torch.uint8).half() / 255.0) * 2 - 1\n"
        "return i * torch.rsqrt(i.flatten(1).square().mean(-1) + 1e-6)",
        "w, sr = torchaudio.load('a.wav')\nw = w.half()\n"
        "return w / w.pow(2).mean(dim=-1, keepdim=True).sqrt()",
        # one path tanh, the other sigmoid: bounded by 1 after the join
        "g = torch.tanh(x) if y else torch.sigmoid(x)\n"
        "return g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)",
    ],
)
def test_bounded_values_are_quiet(body: str) -> None:
    assert found(body) == []


@pytest.mark.parametrize(
    "body",
    [
        # a bound above 256 does not help: 300² overflows float16
        "c = x.clamp(-300.0, 300.0)\nreturn c * torch.rsqrt(c.pow(2).mean(-1) + 1e-6)",
        # the bound is lost on one path of a join
        "g = torch.tanh(x) if y else x\nreturn g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)",
        # a sum over a size the engine does not know: bounded squares, unbounded sum
        "g = torch.tanh(x)\nreturn g / g.pow(2).sum(-1, keepdim=True)",
        # a product with an unbounded tensor is unbounded
        "g = torch.tanh(x) * y\nreturn g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)",
        # a division by a tensor (it may be tiny) is unbounded
        "g = torch.tanh(x) / y\nreturn g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)",
    ],
)
def test_unbounded_or_too_wide_values_are_still_reported(body: str) -> None:
    assert found(body) != []


def test_a_bound_a_loop_grows_is_widened_away() -> None:
    """``g = g * 2`` in a loop: one walked round would say |g| <= 2; the loop head drops the
    bound, so the mean of squares inside and after the loop is reported."""
    body = (
        "g = torch.tanh(x)\n"
        "for _ in range(20):\n"
        "    g = g * 2\n"
        "    y = g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)\n"
        "return g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)"
    )
    assert found(body) == [4, 5]
    bounded = "g = torch.tanh(x)\nfor _ in range(20):\n    g = torch.tanh(g * 2)\n"
    assert found(bounded + "return g * torch.rsqrt(g.pow(2).mean(-1) + 1e-6)") == []
