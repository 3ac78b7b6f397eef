"""mpcheck.autocast_ops and the generated table behind it (tools/gen_autocast_ops.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mpcheck.autocast_ops import lower_precision_ops, policy

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "mpcheck" / "data" / "autocast_ops.json"
GENERATOR = REPO / "tools" / "gen_autocast_ops.py"
REFERENCE = Path(__file__).resolve().parents[2] / "shared/reference/autocast_ops.json"
POLICIES = ("lower_precision", "fp32", "promote", "banned")


def _committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


def _need_torch() -> ModuleType:
    """Import torch, or skip (fail when MPCHECK_REQUIRE_TORCH=1, e.g. in CI)."""
    if importlib.util.find_spec("torch") is None:
        if os.environ.get("MPCHECK_REQUIRE_TORCH") == "1":
            pytest.fail("torch is not installed but MPCHECK_REQUIRE_TORCH=1")
        pytest.skip("torch is not installed")
    import torch

    return torch


# ---------------------------------------------------------------- (a) vs the reference


# Lists compared with the reference's ``installed`` (what torch 2.13.0 actually uses). The
# reference keeps overload suffixes (``softmax.int``) and two Dimname overloads that the
# 2.13.0 binary no longer has (``index_copy.dimname``, ``prod.dim_Dimname``); as base names
# these collapse into ops already listed, so no difference remains. The reference has no
# cpu banned list: the probe finds none (CPU autocast runs binary_cross_entropy in fp32).
REFERENCE_LISTS = [
    ("cuda", "lower_precision"),
    ("cuda", "fp32"),
    ("cuda", "promote"),
    ("cuda", "banned"),
    ("cpu", "lower_precision"),
    ("cpu", "fp32"),
    ("cpu", "promote"),
]
KNOWN_DIFFERENCES: dict[str, dict[str, list[str]]] = {}


def test_matches_reference_installed_lists() -> None:
    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} not present")
    ref = json.loads(REFERENCE.read_text())["installed"]
    ours = _committed()
    assert ours["torch_version"] == ref["torch_version"].split("+", 1)[0]
    diffs: dict[str, dict[str, list[str]]] = {}
    for device, pol in REFERENCE_LISTS:
        theirs = {name.split(".", 1)[0] for name in ref[f"{device}_{pol}"]}
        mine = set(ours[device][pol])
        if mine != theirs:
            diffs[f"{device}_{pol}"] = {
                "only_ours": sorted(mine - theirs),
                "only_reference": sorted(theirs - mine),
            }
    assert diffs == KNOWN_DIFFERENCES
    assert ours["cpu"]["banned"] == []


def test_table_shape() -> None:
    data = _committed()
    assert data["generated_by"] == "tools/gen_autocast_ops.py"
    for device in ("cuda", "cpu"):
        assert set(data[device]) == set(POLICIES)
        seen: set[str] = set()
        for pol in POLICIES:
            ops = data[device][pol]
            assert ops == sorted(set(ops)), f"{device} {pol} not sorted/unique"
            assert not any("." in op or "::" in op for op in ops)
            assert not seen & set(ops), f"{device}: op in two policies"
            seen |= set(ops)


# ---------------------------------------------------------------- (b) generator --check


def test_generator_check_passes() -> None:
    _need_torch()
    proc = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generator_check_detects_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _need_torch()
    spec = importlib.util.spec_from_file_location("gen_autocast_ops", GENERATOR)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stale = _committed()
    stale["cuda"]["fp32"].remove("softmax")
    out = tmp_path / "mpcheck" / "data" / "autocast_ops.json"
    out.parent.mkdir(parents=True)
    out.write_text(json.dumps(stale, indent=2) + "\n")
    monkeypatch.setattr(gen, "REPO", tmp_path)
    monkeypatch.setattr(gen, "OUT", out)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    # The version deltas are re-encoded against the base they were stored with: a base edited
    # by hand (softmax dropped) changes them, so only the base must come back as committed.
    base = {k: v for k, v in _committed().items() if k not in ("versions", "versions_format")}
    regenerated = json.loads(out.read_text())
    assert {k: v for k, v in regenerated.items() if k in base} == base


def test_probe_agrees_with_real_cpu_autocast() -> None:
    """The generator's storage-less probe vs actually running ops under CPU autocast."""
    torch = _need_torch()
    f = torch.nn.functional
    x = torch.randn(4, 4)
    low = x.bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        runs = {
            "linear": f.linear(x, x).dtype,  # fp32 in -> low out
            "mm": torch.mm(x, x).dtype,
            "cdist": torch.cdist(low, low).dtype,  # low in -> fp32 out
            "mse_loss": f.mse_loss(low, low).dtype,
            "softmax": torch.softmax(low, 0).dtype,  # left alone
            "layer_norm": f.layer_norm(low, (4,)).dtype,
            "cat": torch.cat([low, x]).dtype,
        }
    expected = {torch.bfloat16: "lower_precision", torch.float32: "fp32"}
    for op, dtype in runs.items():
        pol = policy(op, "cpu")
        if pol in ("promote", None):
            continue
        assert expected[dtype] == pol, op
    assert runs["softmax"] == runs["layer_norm"] == torch.bfloat16
    assert policy("softmax", "cpu") is None and policy("layer_norm", "cpu") is None
    assert policy("cat", "cpu") == "promote" and runs["cat"] == torch.float32


# ---------------------------------------------------------------- (c) API spot checks


@pytest.mark.parametrize(
    ("op", "device", "expected"),
    [
        ("linear", "cuda", "lower_precision"),
        ("matmul", "cuda", "lower_precision"),
        ("conv2d", "cpu", "lower_precision"),
        ("scaled_dot_product_attention", "cpu", "lower_precision"),
        ("scaled_dot_product_attention", "cuda", "lower_precision"),
        ("cudnn_convolution", "cuda", "lower_precision"),
        ("softmax", "cuda", "fp32"),
        ("softmax", "cpu", None),
        ("layer_norm", "cuda", "fp32"),
        ("layer_norm", "cpu", None),
        ("norm", "cuda", "fp32"),
        ("upsample_bilinear2d", "cuda", "fp32"),
        ("cross_entropy_loss", "cpu", "fp32"),
        ("binary_cross_entropy", "cuda", "banned"),
        ("binary_cross_entropy", "cpu", "fp32"),
        ("cat", "cpu", "promote"),
        ("cat", "cuda", None),
        ("index_put", "cuda", "promote"),
        ("index_put", "cpu", None),
        ("add", "cuda", None),
        ("batch_norm", "cpu", None),
        ("no_such_op", "cuda", None),
    ],
)
def test_policy(op: str, device: str, expected: str | None) -> None:
    assert policy(op, device) == expected


def test_policy_accepts_qualified_names_and_device_indices() -> None:
    assert policy("aten::softmax.int", "cuda:0") == "fp32"
    assert policy("aten::linear", "cpu") == "lower_precision"


def test_other_devices_use_cuda_lists() -> None:
    for device in ("xpu", "mps", "privateuseone"):
        assert policy("binary_cross_entropy", device) == "banned"
        assert policy("softmax", device) == "fp32"
        assert lower_precision_ops(device) == lower_precision_ops("cuda")


def test_lower_precision_ops() -> None:
    cpu, cuda = lower_precision_ops("cpu"), lower_precision_ops("cuda")
    assert isinstance(cpu, frozenset)
    assert {"linear", "conv2d", "bmm", "scaled_dot_product_attention"} <= cpu & cuda
    assert "mv" in cuda and "mv" not in cpu
    assert cpu == {op for op in _committed()["cpu"]["lower_precision"]}
