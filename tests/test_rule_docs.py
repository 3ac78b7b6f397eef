"""Every rule documents itself completely, and the rendered pages are current."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpcheck.ruleset.rule import Rule, all_rules
from tests.support import ROOT

ENGINE_LEVEL = {"MPC001", "MPC002", "MPC100"}


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_declares_its_specification(rule: type[Rule]) -> None:
    assert rule.code.startswith("MPC") and len(rule.code) == 6
    assert rule.name == rule.name.lower() and " " not in rule.name and "_" not in rule.name
    assert rule.summary and rule.why and rule.how_to_fix
    if rule.code not in ENGINE_LEVEL:
        assert rule.symptom, "say what the user sees when it goes wrong"
        assert rule.bad and rule.good, "show a bad and a good example"


def test_codes_and_names_are_unique() -> None:
    rules = all_rules()
    assert len({r.code for r in rules}) == len(rules)
    assert len({r.name for r in rules}) == len(rules)


def test_rendered_docs_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_rule_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_each_rule_declares_how_safe_its_fixes_are() -> None:
    """A page that says `--fix` must not hide fixes that only `--unsafe-fixes` applies."""
    from tests.support import check_fixture, fixture_files

    seen: dict[str, set[str]] = {}
    for path in fixture_files():
        for d in check_fixture(path):
            if d.fix is not None:
                seen.setdefault(d.code, set()).add(d.fix.applicability)
    rules = {r.code: r for r in all_rules()}
    assert set(seen) == {r.code for r in rules.values() if r.fixable}, "a fix per fixable rule"
    for code, applicabilities in seen.items():
        rule = rules[code]
        assert rule.fixable, code
        assert applicabilities == {rule.fix_applicability}, code
        if rule.fix_applicability == "unsafe":
            assert "`--fix --unsafe-fixes`" in rule.docs(), code
