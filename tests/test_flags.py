"""Constructor flags nothing sets (:mod:`mpcheck.project.flags`): the branches they guard
never run, and a project that may set one keeps it live."""

from __future__ import annotations

from pathlib import Path

from mpcheck.project.flags import FlagsPass, Unset, flags_of
from mpcheck.project.records import blank
from mpcheck.project.uncalled import attributes_of

BLOCK = b"""\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim, pre_norm=False, *, scale=None, width=4, act=0):
        super().__init__()
        self.pre_norm = pre_norm
        self.scale = scale
        self.width = width
        act = act or 1
        self.act = act

    def forward(self, x):
        if self.pre_norm:
            x = x.float()
        return x
"""


def test_candidates_are_false_defaults_stored_once() -> None:
    found, _, _ = flags_of(blank(BLOCK))
    assert found == (("Block", "pre_norm", 1), ("Block", "scale", -1))


def test_calls_count_positional_arguments_and_true_keywords() -> None:
    _, calls, _ = flags_of(b"a = Block(8, pre_norm=False)\nb = Block(8, scale=s)\nc = Net(*xs)\n")
    assert calls == (("Block", 1, ("scale",)), ("Net", -1, ()))


def _unset(
    run: bytes, *, other: bytes = b"", strings: tuple[str, ...] = (), side: tuple[Path, ...] = ()
) -> Unset:
    parts: dict[str, tuple[str, FlagsPass, int, tuple[str, ...]]] = {
        "m.py": ("m", flags_of(blank(BLOCK)), attributes_of(blank(BLOCK)), ()),
        "run.py": ("run", flags_of(run), attributes_of(run), strings),
    }
    if other:
        parts["other.py"] = ("other", flags_of(other), attributes_of(other), ())
    return Unset(parts, side)


def test_a_flag_no_call_hands_is_never_set() -> None:
    found = _unset(b"from m import Block\nnet = Block(8, pre_norm=False)\n")
    assert found.never_set("m.Block", "pre_norm") and found.never_set("m.Block", "scale")


def test_calls_splats_writes_and_names_keep_a_flag_live(tmp_path: Path) -> None:
    assert not _unset(b"net = Block(8, True)\n").never_set("m.Block", "pre_norm")
    assert _unset(b"net = Block(8, True)\n").never_set("m.Block", "scale")  # (keyword-only)
    assert not _unset(b"net = Block(8, scale=2.0)\n").never_set("m.Block", "scale")
    assert not _unset(b"net = Block(**cfg)\n").never_set("m.Block", "pre_norm")
    assert not _unset(b"net = Block(*args)\n").never_set("m.Block", "pre_norm")
    assert not _unset(b"net = Block(8)\nnet.pre_norm = True\n").never_set("m.Block", "pre_norm")
    assert not _unset(b"class Big(Block):\n    pass\n").never_set("m.Block", "pre_norm")
    assert not _unset(b"make = partial(Block, 8)\n").never_set("m.Block", "pre_norm")
    assert not _unset(b"", strings=("pre_norm",)).never_set("m.Block", "pre_norm")
    (tmp_path / "cfg.yaml").write_text("pre_norm: true\n")
    side = (tmp_path / "cfg.yaml",)
    assert not _unset(b"net = Block(8)\n", side=side).never_set("m.Block", "pre_norm")
