"""One rule API: rule modules import only ``mpcheck.api`` (and libcst, the standard
library), and the hooks a rule may implement are the ones the engine dispatches."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from mpcheck import api
from mpcheck.ruleset.hooks import HOOKS
from mpcheck.ruleset.rule import Rule, all_rules
from tests.support import ROOT

RULE_FILES = sorted((ROOT / "rules").glob("mpc*.py"))
ALLOWED = {"mpcheck.api", "libcst", "__future__"}


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rule_imports_only_the_api(path: Path) -> None:
    outside = {
        name
        for name in imported(path)
        if name not in ALLOWED
        and not name.startswith("libcst.")
        and name.split(".")[0] not in sys.stdlib_module_names
    }
    assert outside == set(), f"{path.name} imports {sorted(outside)}; use mpcheck.api"


def test_every_hook_is_a_rule_method_and_every_rule_method_a_hook() -> None:
    methods = {name for name in vars(Rule) if name.startswith("check_")}
    assert methods == {hook.method for hook in HOOKS}


def test_a_rule_is_called_for_exactly_the_hooks_it_overrides() -> None:
    for rule in all_rules():
        overridden = {h.method for h in HOOKS if h.method in vars(rule)}
        inherited = {
            h.method
            for h in HOOKS
            for base in rule.__mro__[1:]
            if base is not Rule and h.method in vars(base)
        }
        assert rule.hooks() == frozenset(overridden | inherited), rule.code


def test_api_exports_what_it_lists() -> None:
    assert all(hasattr(api, name) for name in api.__all__)
    assert api.Fix is not None and api.Edit is not None and api.Rule is Rule
