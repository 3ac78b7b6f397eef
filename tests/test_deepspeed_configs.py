"""Which lines of a shipped DeepSpeed configuration enable half (project.deepspeed_configs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcheck.project.deepspeed_configs import ShippedDeepSpeed, half_block


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{\n  "train_batch_size": 8,\n  "fp16": {\n    "enabled": true\n  }\n}', (3, "fp16")),
        ('{"fp16": {"loss_scale": 0,\n "enabled": true}}', (1, "fp16")),  # (enabled later)
        ("zero_optimization:\n  stage: 2\nbf16:\n  # the module\n\n  enabled: true\n", (3, "bf16")),
        ('   "bf16": {\n     "enabled": True,\n   },\n', (1, "bf16")),  # (gpt-neox's YAML)
        ('{"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}', None),
        ("fp16:\n  enabled: false\nbf16:\n  enabled: auto\n", None),
        ("bf16:\n  loss_scale: 0\nenabled: true\n", None),  # (``enabled`` of no half block)
        ('{"fp16": {"opts": {"x": 1}, "enabled": true}}', None),  # (a nested block: unread)
        ("bf16: true\n", None),  # (a trainer's flag, no DeepSpeed block)
    ],
)
def test_half_block(text: str, found: tuple[int, str] | None) -> None:
    assert half_block(text) == found


def test_only_a_file_naming_a_deepspeed_key_is_a_configuration(tmp_path: Path) -> None:
    trainer = tmp_path / "a_trainer.yaml"
    trainer.write_text("epochs: 3\nbf16:\n  enabled: true\n")
    (tmp_path / "conf").mkdir()
    ds = tmp_path / "conf" / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 2},\n "bf16": {"enabled": true}}')
    big = tmp_path / "data.json"
    big.write_text('{"train_batch_size": 1, "fp16": {"enabled": true}}' + " " * (2 * 1024 * 1024))
    shipped = ShippedDeepSpeed([trainer, big, ds, tmp_path / "gone.json"], tmp_path)
    assert shipped.half() == ("conf/ds.json", 2, "bf16")
    assert ShippedDeepSpeed([trainer, big]).half() is None
