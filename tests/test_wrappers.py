"""Mixed-precision wrappers as evidence (issue 36 item 3; :mod:`mpcheck.knowledge.wrappers`).

A model handed to a wrapper that autocasts (``accelerator.prepare`` under native mixed
precision, Lightning's ``"16-mixed"``, ``TrainingArguments(fp16=True)``) keeps float32
weights and runs its forward under autocast: no dtype-flow finding. One handed to a wrapper
that casts (Lightning's ``"bf16-true"``, a DeepSpeed config enabling bf16) is half: an error
naming the wrapper. Driven through ``mpcheck.cli.main`` on ``fixtures/xfile`` cases and
variants of them; the torch behaviour each wrapper applies is run below (accelerate,
Lightning and DeepSpeed are not installed here: their fixtures say ``# runtime: none``).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mpcheck.cli import main
from mpcheck.project.models import forget_uses, uses_of_sources
from mpcheck.project.records import record_of
from tests.support import FIXTURES, XFILE, check_fixture

ACCELERATE = XFILE / "good_accelerate_prepared_model"
LIGHTNING = XFILE / "bad_lightning_true_precision"
DEEPSPEED = XFILE / "bad_deepspeed_bf16_engine"
SHIPPED = XFILE / "bad_deepspeed_shipped_config"
FSDP1 = XFILE / "bad_fsdp_bf16_params"
FSDP2 = XFILE / "bad_fsdp2_input_positions"
COQUI = XFILE / "good_coqui_trainer_model"
OWN_TRAINER = XFILE / "bad_own_trainer_module"
BUILT = XFILE / "bad_wrapper_takes_built_module"
UNHANDED = XFILE / "good_wrapper_leaves_unhanded_module"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    forget_uses()
    yield
    forget_uses()


def findings(case: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> list[Any]:
    monkeypatch.chdir(case)
    forget_uses()
    code = main(["check", "--no-cache", "--output-format", "json", "."])
    out: list[Any] = json.loads(capsys.readouterr().out)
    assert code == (1 if out else 0)
    return out


def variant(tmp_path: Path, case: Path, path: str, old: str, new: str) -> Path:
    copy = tmp_path / case.name
    shutil.copytree(case, copy)
    target = copy / path
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new))
    return copy


ACCELERATOR = "Accelerator(mixed_precision=args.mixed_precision)"


def test_a_model_accelerate_prepares_keeps_float32_weights(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """The vocoder is built in float32 and prepared (a tuple target, then unwrapped); the
    project casts another model to half: prepare is no escape, and the source block's float32
    waves give nothing."""
    assert findings(ACCELERATE, capsys, monkeypatch) == []


@pytest.mark.parametrize(
    "setting",
    [
        'Accelerator(mixed_precision="fp16")',
        'Accelerator(mixed_precision="bf16")',
        'Accelerator(mixed_precision="no")',
        "Accelerator()",  # set at launch time
    ],
)
def test_every_accelerate_setting_keeps_the_weights(
    setting: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    case = variant(tmp_path, ACCELERATE, "tts/train.py", ACCELERATOR, setting)
    assert findings(case, capsys, monkeypatch) == []


def test_accelerate_under_deepspeed_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """Under DeepSpeed accelerate's prepare casts the model it takes: the take names the
    vocoder, so the finding stays, a warning stating that premise."""
    new = "Accelerator(mixed_precision=args.mixed_precision, deepspeed_plugin=ds)"
    case = variant(tmp_path, ACCELERATE, "tts/train.py", ACCELERATOR, new)
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "latent" in finding["message"]
    assert "(it takes `" in finding["message"]


def test_an_unknown_helper_is_a_premise_only_when_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A helper mpcheck does not know might cast the vocoder: a half path it cannot follow, so
    silent by default, and a warning stating its premise with ``open-world-premises``."""
    old, new = (
        "vocoder, optimizer = accelerator.prepare(vocoder, optimizer)",
        "vocoder = convert(vocoder)",
    )
    case = variant(tmp_path, ACCELERATE, "tts/train.py", old, new)
    assert findings(case, capsys, monkeypatch) == []
    (case / ".mpcheck.toml").write_text("open-world-premises = true\n")
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "a use of `" in finding["message"]


def test_a_model_coqui_trainer_takes_keeps_float32_weights(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """coqui-ai's ``trainer.Trainer`` runs its steps under autocast and never casts the model
    it takes: the float32 vocoder's waves give nothing (the frozen teacher is half)."""
    assert findings(COQUI, capsys, monkeypatch) == []


def test_a_project_trainer_module_shadows_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """An application's own ``trainer.py`` is what ``from trainer import Trainer`` imports:
    the model it is handed follows that class (which casts it), not coqui-ai's row; so does
    one in a sub-directory the scripts import it from."""
    (finding,) = findings(OWN_TRAINER, capsys, monkeypatch)
    assert finding["code"] == "MPC101" and "latent" in finding["message"]
    copy = tmp_path / "nested"
    shutil.copytree(OWN_TRAINER, copy)
    (copy / "scripts").mkdir()
    (copy / "trainer.py").rename(copy / "scripts" / "trainer.py")
    (finding,) = findings(copy, capsys, monkeypatch)
    assert finding["code"] == "MPC101"


PLACING = """from accelerate import dispatch_model, infer_auto_device_map
from accelerate.hooks import add_hook_to_module


def place(model, zero3):
    if zero3.is_deepspeed_zero3_enabled():
        return model
    return dispatch_model(model, infer_auto_device_map(model))
"""


@pytest.mark.parametrize(
    ("imports", "warned"),
    [
        ("", False),  # accelerate's placing utilities build no Accelerator
        ("from accelerate.utils import DistributedType\n", True),
    ],
    ids=["placing-only", "accelerator-state"],
)
def test_deepspeed_named_beside_accelerate_placing_hands_nothing_to_it(
    imports: str,
    warned: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: Any,
) -> None:
    """A file naming DeepSpeed that uses only accelerate's big-model utilities (a vendored
    ``modeling_utils``) hands no prepared model to DeepSpeed; one using accelerate's state
    may (the launch configuration decides), so the premise stays."""
    copy = tmp_path / ACCELERATE.name
    shutil.copytree(ACCELERATE, copy)
    (copy / "tts" / "hub.py").write_text(imports + PLACING)
    out = findings(copy, capsys, monkeypatch)
    assert [f["severity"] for f in out] == (["warning"] if warned else [])


def test_lightning_true_precision_casts_the_module(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    (finding,) = findings(LIGHTNING, capsys, monkeypatch)
    assert finding["severity"] == "error"
    assert (
        '`L.Trainer(precision="bf16-true", max_epochs=1)` at asr/train.py:26'
        in (finding["message"])
    )
    assert "it takes `Recognizer` at asr/train.py:27" in finding["message"]
    assert finding["location"]["row"] == 15


@pytest.mark.parametrize("precision", ['"bf16-mixed"', '"16-mixed"', "16", '"32-true"'])
def test_lightning_mixed_or_full_precision_keeps_the_weights(
    precision: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    case = variant(tmp_path, LIGHTNING, "asr/train.py", '"bf16-true"', precision)
    assert findings(case, capsys, monkeypatch) == []


FIT = 'L.Trainer(precision="bf16-true", max_epochs=1)'
MAIN = "def main() -> None:\n"


@pytest.mark.parametrize(
    ("option", "severity"),
    [
        ('default="bf16-mixed"', None),
        ('default="bf16-true"', "error"),
        ('default="16-mixed", choices=["16-mixed", "bf16-mixed", "32"]', None),
        ('default="bf16-mixed", choices=("bf16-mixed", "bf16-true")', "error"),
        ("type=str", "warning"),  # (no default, no choices: unknown)
    ],
)
def test_a_precision_from_the_command_line_takes_its_options_values(
    option: str,
    severity: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: Any,
) -> None:
    """``precision=args.precision``: the values its ``add_argument`` allows (its choices,
    else its default) decide, a cast among them winning."""
    case = variant(tmp_path, LIGHTNING, "asr/train.py", FIT, "L.Trainer(precision=args.precision)")
    train = case / "asr" / "train.py"
    parser = "    parser = argparse.ArgumentParser()\n"
    parser += f"    parser.add_argument('--precision', {option})\n"
    parser += "    args = parser.parse_args()\n"
    text = (
        train.read_text()
        .replace(MAIN, MAIN + parser)
        .replace("import lightning", "import argparse\n\nimport lightning")
    )
    train.write_text(text)
    out = findings(case, capsys, monkeypatch)
    assert [f["severity"] for f in out] == ([severity] if severity else [])


@pytest.mark.parametrize(
    ("configs", "severity"),
    [
        (["precision: bf16-mixed", "precision: 16-mixed"], None),
        (["precision: bf16-mixed", "  precision: bf16-true"], "error"),
        (["precision: fp16"], "warning"),  # (not a Lightning value: unknown)
        ([], "warning"),  # (no configuration here)
    ],
)
def test_a_precision_from_a_configuration_takes_the_values_its_files_give(
    configs: list[str],
    severity: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: Any,
) -> None:
    """``precision=cfg["train"]["precision"]``: the values the project's configuration files
    give that key decide; a value the table does not map leaves it unknown."""
    new = 'L.Trainer(precision=cfg["train"]["precision"])'
    case = variant(tmp_path, LIGHTNING, "asr/train.py", FIT, new)
    train = case / "asr" / "train.py"
    train.write_text(train.read_text().replace(MAIN, MAIN + "    cfg = load()\n"))
    (case / "configs").mkdir()
    for i, line in enumerate(configs):
        (case / "configs" / f"run{i}.yaml").write_text(f"train:\n  epochs: 1\n  {line.strip()}\n")
    out = findings(case, capsys, monkeypatch)
    assert [f["severity"] for f in out] == ([severity] if severity else [])


def test_deepspeed_bf16_config_casts_the_module(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    (finding,) = findings(DEEPSPEED, capsys, monkeypatch)
    assert finding["severity"] == "error"
    assert "`GatedMLP` is cast to half by `deepspeed.initialize(model=model," in finding["message"]


def test_deepspeed_without_a_config_it_can_read_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    case = variant(tmp_path, DEEPSPEED, "lm/train.py", '"bf16": {"enabled": True},', "")
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "latent" in finding["message"]


def test_deepspeed_config_the_checkout_ships_casts_the_module(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """``deepspeed.initialize(args=args, ...)`` reads the file named by ``--deepspeed_config``;
    the checkout ships one enabling ``fp16``: the engine runs the module in float16, and the
    finding is an error naming the call and the configuration's line."""
    (finding,) = findings(SHIPPED, capsys, monkeypatch)
    assert finding["severity"] == "error"
    assert (
        "`CausalAttention` is cast to half by `deepspeed.initialize(args=args,"
        in (finding["message"])
    )
    assert "run with `fp16` enabled in configs/ds_fp16.json:5" in finding["message"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"enabled": true', '"enabled": "auto"'),  # (transformers fills it in from its flags)
        ('"enabled": true', '"enabled": false'),
    ],
    ids=["auto", "disabled"],
)
def test_a_shipped_config_that_enables_no_half_is_no_cast(
    old: str, new: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """Without a shipped DeepSpeed configuration enabling half the engine's setting is unread:
    the finding keeps its premise (the engine may cast what it is handed), a warning."""
    case = variant(tmp_path, SHIPPED, "configs/ds_fp16.json", old, new)
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "latent" in finding["message"]
    assert "run with" not in finding["message"]


def test_a_half_block_in_a_file_no_deepspeed_key_names_is_no_deepspeed_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A trainer's YAML may say ``bf16: enabled: true`` of its own: only a file naming a key
    DeepSpeed alone reads (``zero_optimization``, ``train_batch_size``, ...) is its config."""
    case = variant(tmp_path, SHIPPED, "train.sh", "ds_fp16.json", "trainer.yaml")
    (case / "configs" / "ds_fp16.json").unlink()
    (case / "configs" / "trainer.yaml").write_text("epochs: 3\nbf16:\n  enabled: true\n")
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "run with" not in finding["message"]


def test_a_yaml_config_in_block_style_casts_the_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    case = variant(tmp_path, SHIPPED, "train.sh", "ds_fp16.json", "ds.yaml")
    (case / "configs" / "ds_fp16.json").unlink()
    (case / "configs" / "ds.yaml").write_text(
        "train_batch_size: 16\nbf16:\n  # the engine's module in bfloat16\n  enabled: true\n"
    )
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "error"
    assert "run with `bf16` enabled in configs/ds.yaml:2" in finding["message"]


def test_a_config_written_in_the_calling_file_outranks_the_shipped_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """The calling file writes its own half block, enabled by a value it reads: that block is
    what the engine runs with, whatever the checkout ships (unknown: a premise)."""
    case = variant(
        tmp_path,
        SHIPPED,
        "gpt/train.py",
        "args=args, model=model,",
        'args=args, config={"fp16": {"enabled": args.fp16}}, model=model,',
    )
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "run with" not in finding["message"]


def test_fsdp_half_param_dtype_casts_the_module(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """FSDP's ``MixedPrecision(param_dtype=torch.bfloat16)`` runs the forward with bfloat16
    parameters: the float32 gate meeting them is an error naming the wrapper."""
    (finding,) = findings(FSDP1, capsys, monkeypatch)
    assert finding["severity"] == "error"
    assert (
        "`GatedMLP` is cast to half by `FSDP(model, mixed_precision=policy," in (finding["message"])
    )


_FSDP1_POLICY = "param_dtype=torch.bfloat16, reduce_dtype=torch.float32"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (_FSDP1_POLICY, "param_dtype=torch.float32, reduce_dtype=torch.bfloat16"),
        (_FSDP1_POLICY, "param_dtype=None, reduce_dtype=torch.bfloat16"),
        ("model = FSDP(model, mixed_precision=policy,", "model = FSDP(model,"),
    ],
    ids=["float32", "none", "no-policy"],
)
def test_fsdp_float32_params_keep_the_module_float32(
    old: str, new: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A policy whose ``param_dtype`` is float32 or None (its reductions may be half), or no
    policy, is no half evidence: the model only built in float32 stays so."""
    case = variant(tmp_path, FSDP1, "lm/train.py", old, new)
    assert findings(case, capsys, monkeypatch) == []


def test_fsdp_policy_from_elsewhere_keeps_the_premise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A policy this project builds where mpcheck cannot read it (handed in) might cast."""
    old = "policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)"
    case = variant(tmp_path, FSDP1, "lm/train.py", old, "policy = make_policy()")
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "latent" in finding["message"]


def test_fsdp2_input_cast_is_the_premise_of_half_phases(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """FSDP2's policy casts the root's floating inputs (``cast_forward_inputs``): in a project
    that never autocasts, phases computed in the dtype of handed-in coordinates are half,
    and the finding names the policy's place (the root's ``fully_shard``)."""
    (finding,) = findings(FSDP2, capsys, monkeypatch)
    assert finding["code"] == "MPC303" and finding["severity"] == "warning"
    assert "`fully_shard(model, mp_policy=mp_policy)` at video/train.py:23" in (finding["message"])
    assert "cast_forward_inputs" in finding["message"]


@pytest.mark.parametrize(
    "new",
    [
        "MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32)",
        "MixedPrecisionPolicy(param_dtype=param_dtype, cast_forward_inputs=False)",
        "MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)",
    ],
    ids=["float32", "inputs-kept", "params-kept"],
)
def test_fsdp2_policy_that_leaves_inputs_float32_gives_nothing(
    new: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    old = "MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)"
    case = variant(tmp_path, FSDP2, "video/train.py", old, new)
    assert findings(case, capsys, monkeypatch) == []


def test_fsdp_policies_are_read_as_torch_defines_them() -> None:
    """FSDP1 casts the root's inputs by default, FSDP2 every sharded module's; an aliased
    ``FSDP`` and a policy in ``**config`` are read; float32 parameters cast nothing."""
    script = (
        "import torch\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision\n"
        "from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard\n"
        "from net import Net\n\n"
        "def one(dtype):\n"
        "    model = Net()\n"
        "    cfg = {'mp_policy': MixedPrecisionPolicy(param_dtype=dtype)}\n"
        "    fully_shard(model, **cfg)\n"
    )
    record = record_of(script.encode(), "run.py")
    assert [(w[0].rpartition(".")[2], w[2]) for w in record.wrappers] == [
        ("fully_shard", "unknown")
    ]
    assert len(record.inputs) == 1
    fsdp1 = script.replace(
        "    cfg = {'mp_policy': MixedPrecisionPolicy(param_dtype=dtype)}\n"
        "    fully_shard(model, **cfg)\n",
        "    FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.float16,"
        " cast_root_forward_inputs={root}))\n",
    )
    record = record_of(fsdp1.format(root="True").encode(), "run.py")
    assert [w[2] for w in record.wrappers] == ["cast"] and len(record.inputs) == 1
    assert ("net.Net", "torch") in {(c, lib) for c, _, lib in record.wrapped}
    record = record_of(fsdp1.format(root="False").encode(), "run.py")
    assert [w[2] for w in record.wrappers] == ["cast"] and record.inputs == ()
    kept = fsdp1.format(root="True").replace("torch.float16", "torch.float32")
    record = record_of(kept.encode(), "run.py")
    assert [w[2] for w in record.wrappers] == ["full"] and record.inputs == ()


TRAINER = """
import torch
from transformers import Trainer, TrainingArguments

from net import Net


def main():
    args = TrainingArguments(output_dir="out", {flags})
    model = Net()
    Trainer(model=model, args=args).train()
    other = torch.nn.Linear(4, 4).half()
"""
NET = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x.float())
"""


@pytest.mark.parametrize(
    ("flags", "kind"),
    [
        ("fp16=True", "autocast"),
        ("bf16=args.bf16", "autocast"),
        ("fp16=True, fp16_full_eval=True", "cast"),
        ("deepspeed=ds_config", None),  # unknown: the premise
    ],
)
def test_transformers_trainer_takes_its_arguments_precision(flags: str, kind: str | None) -> None:
    uses = uses_of_sources({"run.py": TRAINER.format(flags=flags).encode(), "net.py": NET.encode()})
    reach = uses.at("net").of("Net")
    assert (reach.kind if reach is not None else None) == kind


def test_autocasting_settings_and_half_named_sizes_are_no_half_mention() -> None:
    """A project whose only mentions of precision are an autocasting wrapper's settings, and
    whose sizes are called ``half_dim``, never runs a module in half: a model built in a
    helper and put in a container (no per-model evidence) is float32 all the same."""
    script = (
        "from accelerate import Accelerator\nfrom net import Net\n\n"
        "def build(dim):\n    half_dim = dim // 2\n    return dict(net=Net(half_dim))\n\n"
        "accelerator = Accelerator(mixed_precision=args.mixed_precision)\n"
    )
    record = record_of(script.encode(), "run.py")
    assert record.half is False
    assert record.wrappers == (
        (
            "accelerate.Accelerator",
            (8, 15, "`Accelerator(mixed_precision=args.mixed_precision)`"),
            "autocast",
        ),
    )
    reach = uses_of_sources({"run.py": script.encode(), "net.py": NET.encode()}).at("net").of("Net")
    assert reach is not None and reach.kind == "autocast"  # (weights float32, autocast at most)
    assert "mixed precision here only comes from `Accelerator(" in reach.place.text
    half = script.replace("half_dim = dim // 2", "x = y.half()")
    assert record_of(half.encode(), "run.py").half is True


@pytest.mark.parametrize(
    ("use", "kept"),
    [
        ("model, opt = accelerator.prepare(model, opt)", True),
        ("model, = accelerator.prepare(model)", True),
        ("loader = DataLoader(\n        model, batch_size=2)", False),  # an argument's line
    ],
)
def test_a_tuple_target_is_a_rebinding_and_an_argument_line_is_not(use: str, kept: bool) -> None:
    source = "from accelerate import Accelerator\nfrom net import Net\n\ndef main(opt):\n"
    source += f"    model = Net()\n    {use}\n"
    (build,) = [b for b in record_of(source.encode(), "run.py").builds if b[0] == "net.Net"]
    assert build[2] is kept


def test_a_name_imported_in_two_functions_resolves_at_each_build() -> None:
    script = (
        "def build(kind):\n    if kind == 1:\n        from a import Decoder\n"
        "        d = Decoder()\n    else:\n        from b import Decoder\n        d = Decoder()\n"
    )
    built = [b[0] for b in record_of(script.encode(), "run.py").builds]
    assert built == ["a.Decoder", "b.Decoder"]


def test_the_single_file_fixtures_follow_the_wrapper() -> None:
    (bad,) = check_fixture(FIXTURES / "mpc101" / "bad_lightning_true_precision_encoder.py")
    assert bad.severity.value == "error" and "bf16-true" in bad.message


# -- what the wrappers do, under torch ------------------------------------------------------
def _module(case: Path, name: str) -> Any:
    sys.path.insert(0, str(case))
    try:
        return __import__(name, fromlist=["_"])
    finally:
        sys.path.remove(str(case))


def test_prepare_runs_the_float32_vocoder_under_autocast_and_a_half_one_raises() -> None:
    """What ``Accelerator.prepare_model`` does with native mixed precision (CPU: bfloat16):
    the forward wrapped in autocast, the weights untouched; cast to half, the block raises."""
    torch = pytest.importorskip("torch")
    vocoder = _module(ACCELERATE, "tts.model").Vocoder(8)
    f0 = torch.rand(2, 8)
    vocoder.forward = torch.autocast("cpu", dtype=torch.bfloat16)(vocoder.forward)
    assert vocoder(f0).dtype == torch.bfloat16
    assert next(vocoder.parameters()).dtype == torch.float32
    half = _module(ACCELERATE, "tts.model").Vocoder(8).to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        half(f0.to(torch.bfloat16))


def test_coqui_trainer_step_runs_the_float32_vocoder_under_autocast() -> None:
    """What ``trainer.Trainer`` (v0.0.36) does with ``mixed_precision`` on: each step under
    ``torch.autocast`` (CPU: bfloat16), the weights untouched; cast to half, the block raises."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    vocoder = _module(COQUI, "tts.model").Vocoder(8)
    f0 = torch.rand(2, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert vocoder(f0).dtype == torch.bfloat16
    assert next(vocoder.parameters()).dtype == torch.float32
    half = _module(COQUI, "tts.model").Vocoder(8).to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        half(f0.to(torch.bfloat16))


@pytest.mark.parametrize(
    ("case", "name", "cls"),
    [
        (LIGHTNING, "asr.blocks", "Encoder"),
        (DEEPSPEED, "lm.layers", "GatedMLP"),
        (BUILT, "denoise.blocks", "MaskedBlock"),
        (UNHANDED, "restore.blocks", "SpareBlock"),
    ],
)
def test_a_module_cast_to_half_raises_and_under_autocast_runs(
    case: Path, name: str, cls: str
) -> None:
    """``precision="bf16-true"`` and a DeepSpeed bf16 engine cast the module's weights
    (``module.to(torch.bfloat16)``): the float32 input raises; ``"bf16-mixed"`` keeps float32
    weights under autocast and runs."""
    torch = pytest.importorskip("torch")
    module = getattr(_module(case, name), cls)(8)
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert module(x).dtype == torch.bfloat16
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype"):
        module.to(torch.bfloat16)(x)


def test_fsdp2_int_positions_by_buffer_frequencies_give_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """FSDP casts neither int tensors nor buffers: integer positions (by their name) times a
    float32 ``inv_freq`` buffer stay a float32 product under the policy."""
    case = variant(
        tmp_path,
        FSDP2,
        "video/model.py",
        "        self.phases = torch.empty(0)\n",
        "        self.phases = torch.empty(0)\n"
        "        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2) / dim))\n"
        '        self.register_buffer("inv_freq", inv_freq, persistent=False)\n',
    )
    model = case / "video/model.py"
    model.write_text(
        model.read_text().replace(
            "phases = rope(ids, self.dim)", "phases = torch.outer(ids, self.inv_freq)"
        )
    )
    assert findings(case, capsys, monkeypatch) == []


def test_fsdp_policy_computing_in_float32_is_no_half_mention() -> None:
    """A policy whose parameters (and buffers) stay float32 reduces gradients in bfloat16 at
    most: the project's only mention of half is no premise that its modules run in half.
    FSDP1's half ``buffer_dtype`` casts the buffers, so it still counts."""
    script = (
        "import torch\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision\n\n"
        "policy = MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.bfloat16)\n\n\n"
        "def wrap(model):\n    return FSDP(model, mixed_precision=policy)\n"
    )
    record = record_of(script.encode(), "run.py")
    assert record.half is False
    assert [w[2] for w in record.wrappers] == ["full"]
    buffers = record_of(script.replace("reduce_dtype", "buffer_dtype").encode(), "run.py")
    assert buffers.half is True
    assert [w[2] for w in buffers.wrappers] == ["unknown"]


def test_a_policy_changed_in_another_file_reaches_a_cached_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """The FSDP input cast is project-wide evidence: a cached run of the model's file is
    stale once the trainer's policy starts casting the inputs."""
    old = "MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)"
    kept = "MixedPrecisionPolicy(param_dtype=param_dtype, cast_forward_inputs=False)"
    case = variant(tmp_path, FSDP2, "video/train.py", old, kept)
    monkeypatch.chdir(case)
    forget_uses()
    assert main(["check", "--output-format", "json", "."]) == 0
    capsys.readouterr()
    train = case / "video/train.py"
    train.write_text(train.read_text().replace(kept, old))
    forget_uses()
    assert main(["check", "--output-format", "json", "."]) == 1
    (finding,) = json.loads(capsys.readouterr().out)
    assert finding["code"] == "MPC303"


KEPT = XFILE / "good_fsdp2_float32_rotary_buffer"
CAST_BUFFERS = XFILE / "bad_fsdp_bf16_rotary_buffer"


def test_fsdp_casts_parameters_and_leaves_buffers_as_built(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """FSDP2's ``param_dtype=torch.bfloat16`` casts no buffer: the rotary ``inv_freq`` stays
    float32 and so do its phases (silent). FSDP1 with ``buffer_dtype=torch.bfloat16`` casts
    every buffer: the phases are bfloat16, reported naming the wrapper."""
    assert findings(KEPT, capsys, monkeypatch) == []
    (finding,) = findings(CAST_BUFFERS, capsys, monkeypatch)
    assert finding["code"] == "MPC303"
    assert "`FSDP(model, mixed_precision=policy" in finding["message"]


def test_another_cast_of_the_model_casts_its_buffers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """``.to(torch.bfloat16)`` before sharding casts every floating buffer: FSDP's leaving
    them alone no longer keeps ``inv_freq`` float32."""
    case = variant(tmp_path, KEPT, "lm/train.py", "model = TinyLM()", "model = TinyLM().bfloat16()")
    found = [f for f in findings(case, capsys, monkeypatch) if f["code"] == "MPC303"]
    assert [f["location"]["row"] for f in found] == [17]


def test_fsdp1_policy_records_whether_it_casts_buffers() -> None:
    """FSDP1 casts buffers only to a ``buffer_dtype`` given; FSDP2 has none: the record
    keeps the difference (``+buffers``) for the project's evidence."""
    script = (
        "import torch\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision\n\n"
        "policy = MixedPrecision(param_dtype=torch.bfloat16)\n\n\n"
        "def wrap(model):\n    return FSDP(model, mixed_precision=policy)\n"
    )
    assert [w[2] for w in record_of(script.encode(), "run.py").wrappers] == ["cast"]
    both = script.replace("bfloat16)", "bfloat16, buffer_dtype=torch.bfloat16)")
    assert [w[2] for w in record_of(both.encode(), "run.py").wrappers] == ["cast+buffers"]
    unknown = script.replace("bfloat16)", "bfloat16, buffer_dtype=dtype)")
    assert [w[2] for w in record_of(unknown.encode(), "run.py").wrappers] == ["cast+buffers"]


HELPER = XFILE / "bad_fsdp2_policy_in_helper"


def test_a_model_handed_to_a_sharding_helper_takes_its_policy(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """``apply_fsdp(model)`` of another file shards what it is given with a bfloat16 policy:
    the model's float32 gate is an error naming that wrapper (no premise). A helper whose
    policy computes in float32 keeps the model float32 (silent)."""
    (finding,) = findings(HELPER, capsys, monkeypatch)
    assert (finding["code"], finding["severity"]) == ("MPC101", "error")
    assert "`fully_shard(model, mp_policy=policy)` at lm/sharding.py:10" in finding["message"]
    assert findings(XFILE / "good_fsdp2_float32_policy_in_helper", capsys, monkeypatch) == []


def test_a_function_sharding_its_argument_is_recorded_and_keeps_nothing() -> None:
    """The record names the function wrapping (not a keeper: it may cast what it is given);
    one whose policy computes in float32 wraps nothing that matters."""
    code = (HELPER / "lm/sharding.py").read_bytes()
    record = record_of(code, "lm/sharding.py")
    assert [(f, s[0]) for f, s in record.wrapping] == [("lm.sharding.apply_fsdp", 10)]
    assert record.keepers == ()
    full = record_of(code.replace(b"param_dtype=torch.bfloat16", b"param_dtype=None"), "x.py")
    assert full.wrapping == ()


def test_a_module_built_in_the_take_is_cast_by_the_wrapper(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """``trainer.fit(Denoiser(), data)`` hands the trainer a module built in the call: a
    ``"bf16-true"`` trainer casts it, and its block's float32 mask is an error naming the
    wrapper (no premise)."""
    (finding,) = findings(BUILT, capsys, monkeypatch)
    assert (finding["code"], finding["severity"]) == ("MPC101", "error")
    assert '`L.Trainer(precision="bf16-true", max_epochs=1)`' in finding["message"]
    assert "it takes `Denoiser` at denoise/train.py:27" in finding["message"]


def test_a_wrapper_casts_only_the_models_handed_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A wrapper casts only the models handed to it and the parts they build: a block no
    handed model builds keeps float32 weights (silent). A take handing a model of unknown
    class (a parameter) may hand it any class: the world opens, and the block's float32 mask
    is a warning naming the wrapper and that take, unless nothing runs the take."""
    assert findings(UNHANDED, capsys, monkeypatch) == []
    old, new = "trainer.fit(Denoiser(), data)", "trainer.fit(model or Denoiser(), data)"
    case = variant(tmp_path, UNHANDED, "restore/train.py", old, new)
    path = case / "restore/train.py"
    path.write_text(path.read_text().replace("def main()", "def main(model=None)"))
    assert findings(case, capsys, monkeypatch) == []  # (a path mpcheck cannot follow)
    (case / ".mpcheck.toml").write_text("open-world-premises = true\n")
    (finding,) = findings(case, capsys, monkeypatch)
    assert finding["severity"] == "warning" and "`SpareBlock`" in finding["message"]
    assert "handed a model of unknown class at restore/train.py:27" in finding["message"]
    # (a take in a function nothing runs hands nothing: the world stays closed)
    legacy = "import lightning as L\n\n\ndef run_legacy(trainer: L.Trainer, net) -> None:\n"
    (case / "restore/train.py").write_text((UNHANDED / "restore/train.py").read_text())
    (case / "restore/legacy.py").write_text(f"{legacy}    trainer.fit(net)\n")
    assert findings(case, capsys, monkeypatch) == []


def test_the_handed_block_cast_like_the_wrapper_runs() -> None:
    """The good case's handed block casts its float32 mask to the weights' dtype: cast to
    bfloat16 as ``"bf16-true"`` casts it, it runs; the spare block runs in float32."""
    torch = pytest.importorskip("torch")
    blocks = _module(UNHANDED, "restore.blocks")
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    assert blocks.MaskedBlock(8).to(torch.bfloat16)(x).dtype == torch.bfloat16
    assert blocks.SpareBlock(8)(x.float()).dtype == torch.float32


def test_a_take_records_the_classes_it_is_handed() -> None:
    """Each take records the classes of the models handed to it (bound, built in the call),
    no model for an optimizer, a data loader or a scheduler (``prepare`` takes those too),
    and each take of a model of unknown class: a parameter, ``*models``, and any take by a
    value named for a wrapper object in a file that does not import its library."""
    code = b"""
from accelerate import Accelerator
import torch
from .model import Net

def main(args, other, models):
    accelerator = Accelerator()
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    loader = build_dataloader(args)
    scheduler = get_scheduler("cosine", optimizer)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    net = accelerator.prepare(Net().to("cpu"))
    accelerator.prepare_model(other)
    accelerator.prepare(*models)
    accelerator.unwrap_model(other)
"""
    record = record_of(code, "app/train.py")
    assert [(c, s[0]) for c, s, _ in record.wrapped] == [
        ("app.model.Net", 12),
        ("torch.optim.AdamW", 12),
        ("app.model.Net", 13),
    ]
    assert [(lib, s[0]) for lib, s in record.takes] == [("accelerate", 14), ("accelerate", 15)]
    loop = record_of(
        b"def fit(accelerator, model):\n    return accelerator.prepare(model)\n", "l.py"
    )
    assert [(lib, s[0]) for lib, s in loop.takes] == [("accelerate", 2)]
    lightning = b"""
import lightning as L
from .model import Lit

def main(dm):
    trainer = L.Trainer(precision="bf16-true")
    dm.setup("fit")
    trainer.fit(Lit(), datamodule=dm)
    trainer.test(ckpt_path="best")
"""
    record = record_of(lightning, "app/run.py")
    assert [(c, s[0]) for c, s, _ in record.wrapped] == [("app.model.Lit", 8)]
    assert record.takes == ()


def test_an_annotated_binding_hands_its_class() -> None:
    """``model: Lit = Lit(cfg)`` binds ``model`` as ``model = Lit(cfg)`` does (PEP 526): the
    take ``trainer.fit(model)`` hands ``Lit``, not a model of unknown class."""
    code = b"""
import lightning as L
from .model import Lit

def main(cfg):
    trainer: L.Trainer = L.Trainer(precision="bf16-true")
    model: Lit = Lit(cfg)
    trainer.fit(model)
"""
    record = record_of(code, "app/run.py")
    assert [(c, s[0]) for c, s, _ in record.wrapped] == [("app.model.Lit", 8)]
    assert record.takes == ()
    plain = record_of(code.replace(b"model: Lit = ", b"model = "), "app/run.py")
    assert plain.wrapped == record.wrapped


def test_a_mask_filled_past_float16s_range_raises_once_the_engine_casts_the_module() -> None:
    """What the DeepSpeed engine does under ``"fp16": {"enabled": true}`` (``module.half()``):
    ``bad_deepspeed_shipped_config``'s attention runs in float32 and raises in float16."""
    torch = pytest.importorskip("torch")
    module = _module(SHIPPED, "gpt.layers").CausalAttention(8)
    x = torch.randn(2, 4, 8)
    assert module(x).dtype == torch.float32
    with pytest.raises(
        RuntimeError, match="cannot be converted to type c10::Half without overflow"
    ):
        module.half()(x.half())
