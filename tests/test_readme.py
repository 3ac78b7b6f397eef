"""The README opens with the two commands that work on a fresh clone; CI runs the second."""

from __future__ import annotations

import re

from tests.support import ROOT, check


def first_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_two_commands() -> None:
    install_and_run, test = first_commands()
    assert "mpcheck check examples/" in install_and_run
    assert "pytest" in test and ".[test]" in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, test = first_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci


def test_every_bundled_example_has_a_finding() -> None:
    """The README promises the examples are buggy on purpose: each one must be caught."""
    examples = sorted((ROOT / "examples").glob("*.py"))
    assert examples
    for path in examples:
        codes = {d.code for d in check(path.read_text(), str(path))}
        assert codes - {"MPC001", "MPC002"}, f"{path.name}: no finding"
