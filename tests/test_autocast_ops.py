"""mpcheck.knowledge.autocast_ops and the generated table behind it (tools/gen_autocast_ops.py)."""

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

from mpcheck.knowledge.autocast_ops import lower_precision_ops, policy

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


# ---------------------------------------------------------------- (d) per-version tables


def _generator() -> ModuleType:
    _need_torch()
    spec = importlib.util.spec_from_file_location("gen_autocast_ops", GENERATOR)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_version_entries_are_minimal_deltas() -> None:
    data = _committed()
    assert data["versions"], "no older torch measured"
    assert "2.1" in data["versions"]
    base_ops = {d: {op: p for p in POLICIES for op in data[d][p]} for d in ("cuda", "cpu")}
    for key, entry in data["versions"].items():
        assert key == ".".join(entry["torch_version"].split(".")[:2])
        for device in ("cuda", "cpu"):
            assert list(entry[device]) == sorted(entry[device])
            for op, pol in entry[device].items():
                assert pol in (*POLICIES, None)
                assert base_ops[device].get(op) != pol, f"{key} {device} {op}: no change stored"


def test_delta_round_trips() -> None:
    gen = _generator()
    data = _committed()
    for key, entry in data["versions"].items():
        full = gen.apply_delta(data, entry)
        delta = gen.encode_delta(data, full)
        assert delta == {d: entry[d] for d in ("cuda", "cpu")}, key
        # the runtime reads the same tables as the generator wrote
        version = tuple(int(x) for x in key.split("."))
        for device in ("cuda", "cpu"):
            expected = {op: p for p in POLICIES for op in full[device][p]}
            ops = set(expected) | set(_committed()[device]["fp32"])
            assert {op: policy(op, device, version) for op in ops} == {
                op: expected.get(op) for op in ops
            }
            assert lower_precision_ops(device, version) == set(full[device]["lower_precision"])
    # a made-up base and version: added, removed and changed ops survive the trip
    base = {"cuda": {p: [] for p in POLICIES}, "cpu": {p: [] for p in POLICIES}}
    base["cuda"]["fp32"] = ["a", "b"]
    other = {"cuda": {p: [] for p in POLICIES}, "cpu": {p: [] for p in POLICIES}}
    other["cuda"].update(fp32=["a"], promote=["b"], lower_precision=["c"])
    delta = gen.encode_delta(base, other)
    assert delta == {"cuda": {"b": "promote", "c": "lower_precision"}, "cpu": {}}
    assert gen.apply_delta(base, delta) == other
    assert gen.encode_delta(base, gen.apply_delta(base, {"cuda": {"a": None}})) == {
        "cuda": {"a": None},
        "cpu": {},
    }


def test_rebase_keeps_every_version_when_the_base_changes() -> None:
    gen = _generator()
    data = _committed()
    newer = {k: v for k, v in data.items() if k not in ("versions", "versions_format")}
    newer["cuda"] = {**newer["cuda"], "fp32": [op for op in newer["cuda"]["fp32"] if op != "pow"]}
    rebased = gen.rebase(data, newer)
    for key, entry in data["versions"].items():
        assert gen.apply_delta(rebased, rebased["versions"][key]) == gen.apply_delta(data, entry)
    assert gen.rebase(data, gen.rebase(data, newer)) == gen.rebase(data, newer)


def test_nearest_measured_version_at_or_below() -> None:
    from mpcheck.knowledge import autocast_ops

    measured = autocast_ops.measured_versions()
    base = autocast_ops.base_version()
    assert base == (2, 13) and base in measured and (2, 1) in measured
    assert autocast_ops.table_version(None) == base
    assert autocast_ops.table_version((1, 13)) == (2, 1)  # older than any: the oldest
    assert autocast_ops.table_version((2, 0)) == (2, 1)
    for version in measured:
        assert autocast_ops.table_version(version) == version
    assert autocast_ops.table_version((2, 99)) == measured[-1]
    gaps = [(a, b) for a, b in zip(measured, measured[1:], strict=False) if b[1] > a[1] + 1]
    for below, above in gaps:  # an unmeasured minor in between: the older one answers
        assert autocast_ops.table_version((below[0], below[1] + 1)) == below
        assert above != autocast_ops.table_version((above[0], above[1] - 1))


@pytest.mark.parametrize(
    ("op", "device", "old", "new"),
    [
        # CPU autocast gained SDPA (2.2) and linalg_vecdot; CUDA ran upsampling in the input's
        # dtype until the fp32 list took the upsample_* ops.
        ("scaled_dot_product_attention", "cpu", None, "lower_precision"),
        ("linalg_vecdot", "cpu", None, "lower_precision"),
        ("upsample_nearest2d", "cuda", None, "fp32"),
        ("linear", "cuda", "lower_precision", "lower_precision"),
        ("binary_cross_entropy", "cuda", "banned", "banned"),
    ],
)
def test_policy_of_torch_2_1(op: str, device: str, old: str | None, new: str | None) -> None:
    assert policy(op, device, (2, 1)) == old
    assert policy(op, device, (2, 0)) == old  # before the oldest measured: 2.1's lists
    assert policy(op, device) == new == policy(op, device, (2, 13))


def test_target_torch_changes_a_finding() -> None:
    """CPU autocast leaves SDPA alone in torch 2.1 (it raises on mixed dtypes there)."""
    from mpcheck.pipeline.one_file import Options, check_source
    from mpcheck.ruleset.rule import all_rules

    source = (
        "import torch\n"
        "import torch.nn.functional as F\n"
        "from torch import nn\n"
        "\n"
        "class Attention(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.qkv = nn.Linear(dim, 3 * dim)\n"
        "\n"
        "    def forward(self, x, cos):\n"
        '        with torch.autocast("cpu"):\n'
        "            q, k, v = self.qkv(x).chunk(3, dim=-1)\n"
        "            q = q.float() * cos\n"
        "            return F.scaled_dot_product_attention(q, k, v)\n"
    )

    def found(target: tuple[int, int] | None) -> list[str]:
        options = Options(target_torch_version=target)
        diagnostics = check_source(source, "t.py", all_rules(), options)
        return [d.message for d in diagnostics if d.code == "MPC103"]

    assert found(None) == [] == found((2, 2)) == found((2, 13))
    (message,) = found((2, 1))
    assert "`k` is bfloat16 (computed in bfloat16 by autocast (torch 2.1) at line 12)" in message
    assert message.endswith("(autocast (torch 2.1) does not recast its inputs)")


def test_cited() -> None:
    from mpcheck.knowledge.autocast_ops import cited

    assert cited(None) == "autocast"
    assert cited((2, 1)) == "autocast (torch 2.1)"


def test_version_delta_refuses_the_base_minor() -> None:
    gen = _generator()
    with pytest.raises(SystemExit, match="base table's minor"):
        gen.main(["--version-delta"])  # CI's torch is the base: its entry would be empty
