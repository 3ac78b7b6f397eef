"""Names resolve through the file's own imports, whatever the spelling."""

from __future__ import annotations

import libcst as cst
import pytest

from mpcheck.names import ImportTable


def resolve(imports: str, expr: str) -> str | None:
    module = cst.parse_module(imports)
    return ImportTable.of(module).resolve(cst.parse_expression(expr))


@pytest.mark.parametrize(
    ("imports", "expr", "expected"),
    [
        ("import torch", "torch.nn.functional.linear", "torch.nn.functional.linear"),
        ("import torch.nn.functional as F", "F.linear", "torch.nn.functional.linear"),
        ("from torch import nn", "nn.Linear", "torch.nn.Linear"),
        ("from torch.nn import functional as F", "F.gelu", "torch.nn.functional.gelu"),
        (
            "from torch.nn.functional import scaled_dot_product_attention as sdpa",
            "sdpa",
            "torch.nn.functional.scaled_dot_product_attention",
        ),
        ("import torch.nn.functional", "torch.nn.functional.conv2d", "torch.nn.functional.conv2d"),
        ("import torch as th", "th.float16", "torch.float16"),
        ("from torch.cuda.amp import autocast", "autocast", "torch.cuda.amp.autocast"),
        ("from torch.amp import autocast", "autocast", "torch.autocast"),
        ("import torch", "torch.nn.functional.softmax", "torch.softmax"),
        (
            "def f():\n    import torch.nn.functional as F\n",
            "F.linear",
            "torch.nn.functional.linear",
        ),
        ("if x:\n    pass\nelse:\n    from torch import nn\n", "nn.Conv2d", "torch.nn.Conv2d"),
        (
            "match kind:\n    case 'a':\n        pass\n    case _:\n        import torch as th\n",
            "th.float16",
            "torch.float16",
        ),
    ],
)
def test_resolves(imports: str, expr: str, expected: str) -> None:
    assert resolve(imports, expr) == expected


@pytest.mark.parametrize(
    ("imports", "expr"),
    [
        ("import torch", "F.linear"),  # F was never imported
        ("from . import torch", "torch.ones"),  # relative import: not the real torch
        ("import torch", "x.float"),
        ("import torch", "f()(1)"),
    ],
)
def test_does_not_resolve(imports: str, expr: str) -> None:
    assert resolve(imports, expr) is None
