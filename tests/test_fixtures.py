"""Every fixture yields exactly the findings marked in it with `# expect:` comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import FIXTURES, expected, expected_at, fixture_files, found_at, runtime


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_findings(path: Path) -> None:
    """Exactly the marked findings, each at its marked column (``# expect: MPC101:17``)."""
    marked = expected_at(path)
    assert all(column is not None for _, column, _ in marked), "pin the column: MPC101:17"
    assert found_at(path) == marked


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_declares_runtime(path: Path) -> None:
    """Each fixture says what it does under real torch (or why it cannot run here)."""
    assert runtime(path) is not None, "add a `# runtime: ...` header"


def test_every_rule_has_bad_and_good_fixtures() -> None:
    from mpcheck.ruleset.rule import all_rules

    engine_level = {"MPC001", "MPC002", "MPC100"}
    for rule in all_rules():
        if rule.code in engine_level:
            continue
        folder = FIXTURES / rule.code.lower()
        assert list(folder.glob("bad_*.py")), f"{rule.code}: no bad fixtures in {folder}"
        assert list(folder.glob("good_*.py")), f"{rule.code}: no good fixtures in {folder}"
        marked = {code for p in folder.glob("bad_*.py") for _, code in expected(p)}
        assert rule.code in marked, f"{rule.code}: bad fixtures mark no expected finding"
        for good in folder.glob("good_*.py"):
            assert rule.code not in {c for _, c in expected(good)}
