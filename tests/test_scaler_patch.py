"""A GradScaler told to take float16 gradients, and the runs on which a flag decides it.

torch's GradScaler refuses float16 gradients only through ``_unscale_grads_(..., allow_fp16)``;
a project that replaces that method by one passing ``allow_fp16=True`` (sd-scripts'
``--full_fp16`` patch) trains float16 parameters through it, on the runs where the patch ran.
``model.requires_grad_(flag)`` leaves the model no gradients on the runs without the flag, and
``assert args.mixed_precision == "bf16"`` makes the rest of a branch bfloat16-only. The whole
case, proven under torch, is ``fixtures/xfile/*_scaler_patch_*`` (tests/test_xfile.py); here
each piece is varied through the CLI on small projects."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from mpcheck.engine.scaler_patch import fp16_unscale_params
from tests.support import project_findings

PATCH = """
import torch


def patch(scaler: torch.amp.GradScaler):
    original = scaler._unscale_grads_

    def replacement(optimizer, inv_scale, found_inf, allow_fp16):
        return original(optimizer, inv_scale, found_inf, {allow})

    scaler._unscale_grads_ = replacement
"""

TRAIN = """
import torch
from torch import nn

{helper}


def train(args):
    weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
    model = nn.Linear(4, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.full_fp16:
        model.to(weight_dtype)
    scaler = torch.amp.GradScaler("cpu")
    {call}
    loss = model(torch.randn(2, 4, dtype=weight_dtype)).float().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


def findings(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    """The scaler's errors only (a half model draws other findings too)."""
    return project_findings(tmp_path, files, codes={"MPC201"})


def step_row(text: str) -> int:
    lines = textwrap.dedent(text).lstrip().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "scaler.step(" in line)


def function(text: str) -> cst.FunctionDef:
    module = cst.parse_module(textwrap.dedent(text))
    return next(node for node in module.body if isinstance(node, cst.FunctionDef))


@pytest.mark.parametrize(
    ("text", "positions"),
    [
        (PATCH.format(allow="True"), (0,)),
        (PATCH.format(allow="allow_fp16"), ()),  # passes the caller's choice on
        (PATCH.format(allow="False"), ()),
        ("def p(a, b):\n    b.scaler._unscale_grads_ = lambda *g: f(*g, allow_fp16=True)", (1,)),
        ("def p(b):\n    other.scaler._unscale_grads_ = lambda *g: f(*g[:3], True)", ()),
    ],
    ids=["positional-true", "passed-on", "false", "accelerator-keyword", "not-a-parameter"],
)
def test_which_parameters_a_function_patches(text: str, positions: tuple[int, ...]) -> None:
    assert fp16_unscale_params(function(text)) == positions


@pytest.mark.parametrize("apart", [False, True], ids=["same-file", "other-file"])
@pytest.mark.parametrize(
    ("call", "reported"),
    [
        ("", True),  # float16 on the full_fp16 runs, no patch
        ("if args.full_fp16:\n        patch(scaler)", False),  # the same runs
        ("patch(scaler)", False),  # every run
        ("if args.other:\n        patch(scaler)", True),  # other runs
    ],
    ids=["none", "same-flag", "always", "other-flag"],
)
def test_a_patched_scaler_takes_float16_on_its_runs(
    tmp_path: Path, apart: bool, call: str, reported: bool
) -> None:
    if apart:
        train = TRAIN.format(helper="from helpers import patch", call=call)
        files = {"train.py": train, "helpers.py": PATCH.format(allow="True")}
    else:
        train = TRAIN.format(helper=PATCH.format(allow="True"), call=call)
        files = {"train.py": train}
    expected = {("train.py", step_row(train), "MPC201")} if reported else set()
    assert findings(tmp_path, files) == expected


FROZEN = """
import torch
from torch import nn


def train(args):
    weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
    model = nn.Linear(4, 4)
    model.requires_grad_({requires})
    if not args.train_model:
        model.to(weight_dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cpu")
    loss = model(torch.randn(2, 4, dtype=weight_dtype)).float().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(
    ("requires", "reported"),
    [("args.train_model", False), ("True", True), ("not args.train_model", True)],
    ids=["same-flag", "always", "opposite-flag"],
)
def test_a_model_cast_where_it_is_frozen(tmp_path: Path, requires: str, reported: bool) -> None:
    train = FROZEN.format(requires=requires)
    expected = {("train.py", step_row(train), "MPC201")} if reported else set()
    assert findings(tmp_path, {"train.py": train}) == expected


BF16 = """
import torch
from torch import nn


def train(args):
    weight_dtype = torch.float16 if args.mixed_precision == "fp16" else torch.float32
    model = nn.Linear(4, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.full_bf16:
        {check}
        model.to(weight_dtype)
    scaler = torch.amp.GradScaler("cpu")
    loss = model(torch.randn(2, 4)).float().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(
    ("check", "reported"),
    [('assert args.mixed_precision == "bf16"', False), ("pass", True)],
    ids=["asserted-bf16", "unchecked"],
)
def test_an_asserted_bf16_branch_casts_to_bfloat16(
    tmp_path: Path, check: str, reported: bool
) -> None:
    train = BF16.format(check=check)
    expected = {("train.py", step_row(train), "MPC201")} if reported else set()
    assert findings(tmp_path, {"train.py": train}) == expected
