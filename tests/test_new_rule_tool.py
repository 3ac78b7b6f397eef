"""tools/new_rule.py writes a rule that loads, and fixtures that fail until it is written."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from mpcheck.ruleset.rule import Rule
from tests.support import expected_at

TOOL = Path(__file__).resolve().parent.parent / "tools" / "new_rule.py"


def load_tool(root: Path) -> object:
    spec = importlib.util.spec_from_file_location("new_rule", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT = root  # type: ignore[attr-defined]
    return module


def test_scaffold_loads_and_fails_until_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = load_tool(tmp_path)
    monkeypatch.setattr(sys, "argv", ["new_rule", "MPC399", "half-cumsum", 'A "cumsum" in fp16.'])
    assert tool.main() == 0  # type: ignore[attr-defined]
    rule_file = tmp_path / "rules" / "mpc399_half_cumsum.py"
    namespace: dict[str, object] = {}
    exec(compile(rule_file.read_text(), str(rule_file), "exec"), namespace)
    rule = namespace["HalfCumsum"]
    assert isinstance(rule, type) and issubclass(rule, Rule)
    assert (rule.code, rule.name, rule.summary) == ("MPC399", "half-cumsum", 'A "cumsum" in fp16.')
    bad = tmp_path / "fixtures" / "mpc399" / "bad_half_cumsum.py"
    assert expected_at(bad) == {(8, 5, "MPC399")}
    assert (tmp_path / "tests" / "test_mpc399.py").is_file()
    assert tool.main() == 2  # type: ignore[attr-defined]  # never overwrites
