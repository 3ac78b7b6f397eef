"""The DeepSpeed configurations a checkout ships: whether they run its engine in half.

``deepspeed.initialize`` builds a ``DeepSpeedEngine``, which casts the module it is handed
with ``module.half()`` when the configuration's ``fp16`` block is enabled and with
``module.bfloat16()`` when its ``bf16`` block is (``DeepSpeedEngine._configure_distributed_model``):
every parameter and floating buffer, a rotary ``inv_freq`` included. When the calling file
does not write the configuration (it comes from ``--deepspeed_config ds.json`` on the command
line, ``args.deepspeed_config`` or a path handed as ``config=``), the configurations the
checkout ships are what it runs: one of them enabling half (a literal ``true``) is the
project's own word that the engine's model runs in half. ``"auto"`` (transformers fills it in
from its own flags) and ``false`` say nothing of the kind.

A configuration is a JSON or YAML file (``ds_config.json``, gpt-neox's ``configs/125M.yml``)
that names a key only DeepSpeed reads (``zero_optimization``, ``train_batch_size``,
``train_micro_batch_size_per_gpu``) and holds a half block, in flow style (``"fp16": {
"enabled": true, ...}``) or block style (``fp16:`` over an indented ``enabled: true``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from mpcheck.knowledge.wrappers import DEEPSPEED_HALF_KEYS

__all__ = ["ShippedDeepSpeed"]

_SUFFIXES = (".json", ".yaml", ".yml")
_MAX = 2 * 1024 * 1024  # bytes: a larger file is data, never a configuration
# Keys only a DeepSpeed configuration holds (a trainer's YAML has ``bf16: true``, never these).
_DEEPSPEED_KEY = re.compile(
    r"""(?m)(?:^[ \t]*|["'])(?:zero_optimization|train_batch_size|train_micro_batch_size_per_gpu)"""
    r"""["']?[ \t]*:"""
)
_KEYS = "|".join(DEEPSPEED_HALF_KEYS)
# ``"fp16": {"loss_scale": 0, "enabled": true`` (no nested block before ``enabled``)
_FLOW = re.compile(
    r"""["']?(""" + _KEYS + r""")["']?[ \t]*:[ \t]*\{[^{}]*?["']?enabled["']?[ \t]*:[ \t]*"""
    r"""(?:true|True)\b"""
)
# ``fp16:`` alone on its line, then its indented lines
_BLOCK = re.compile(r"""(?m)^([ \t]*)["']?(""" + _KEYS + r""")["']?[ \t]*:[ \t]*(?:#.*)?$""")
_ENABLED = re.compile(r"""^["']?enabled["']?[ \t]*:[ \t]*(?:true|True)\b""")


class ShippedDeepSpeed:
    """The first shipped DeepSpeed configuration enabling half, read once per project."""

    def __init__(self, side: Iterable[Path], root: Path | None = None) -> None:
        self._side = [p for p in side if p.suffix in _SUFFIXES]
        self._root = root
        self._found: tuple[str, int, str] | None | bool = False  # False: not read yet

    def half(self) -> tuple[str, int, str] | None:
        """(the file as shown, the line of the half block, its key), or None: no shipped
        configuration enables half."""
        if self._found is False:
            self._found = next(filter(None, map(self._half_in, sorted(self._side))), None)
        assert self._found is not True
        return self._found

    def _half_in(self, path: Path) -> tuple[str, int, str] | None:
        try:
            if path.stat().st_size > _MAX:
                return None
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if _DEEPSPEED_KEY.search(text) is None:
            return None
        found = half_block(text)
        if found is None:
            return None
        line, key = found
        shown = path.as_posix()
        if self._root is not None and path.is_relative_to(self._root):
            shown = path.relative_to(self._root).as_posix()
        return shown, line, key


def half_block(text: str) -> tuple[int, str] | None:
    """The line (1-based) and key of the first half block of ``text`` that is enabled."""
    found: list[tuple[int, str]] = []
    flow = _FLOW.search(text)
    if flow is not None:
        found.append((flow.start(1), flow.group(1)))
    block = next((b for b in _BLOCK.finditer(text) if _enabled_below(text, b)), None)
    if block is not None:
        found.append((block.start(2), block.group(2)))
    if not found:
        return None
    at, key = min(found)
    return text.count("\n", 0, at) + 1, key


def _enabled_below(text: str, block: re.Match[str]) -> bool:
    """Whether the lines indented under the block style key ``block`` say ``enabled: true``."""
    indent = len(block.group(1).expandtabs())
    for line in text[block.end() :].splitlines()[1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(line.expandtabs()) - len(line.expandtabs().lstrip()) <= indent:
            return False  # (the block ended)
        if _ENABLED.match(stripped):
            return True
    return False
