"""The ``integration`` marker: what ``pytest -m "not integration"`` leaves out.

Integration tests start processes (flake8, pre-commit, the Action, ``python -m mpcheck``,
git) or prove fixtures under real torch. They are marked here in one place, by module for
the suites that are integration through and through, and by what a test's own code does
for the rest, so a new test that starts a process is never silently counted as a unit test.
CI runs everything; ``pytest -m "not integration"`` is the fast loop of the README.
"""

from __future__ import annotations

import inspect

import pytest

INTEGRATION_MODULES = {
    "test_action",
    "test_precommit",
    "test_flake8_plugin",
    "test_runtime_proof",
    "test_xfile",
    "test_run_parsing",
}
# What a test's code does when it leaves the process or runs torch.
INTEGRATION_SIGNS = (
    "subprocess",
    "sys.executable",
    "Popen",
    "runpy",
    "run_fixed_fixture",
    "require_torch",
    "_need_torch",
    'importorskip("torch")',
    'importorskip("flake8")',
)


def _starts_processes(function: object) -> bool:
    try:
        code = inspect.getsource(function) if function is not None else ""  # type: ignore[arg-type]
    except (OSError, TypeError):
        code = ""
    return any(sign in code for sign in INTEGRATION_SIGNS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    judged: dict[object, bool] = {}  # the parametrised cases of a test share its source
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        function = getattr(item, "function", None)
        if function not in judged:
            judged[function] = _starts_processes(function)
        if module in INTEGRATION_MODULES or judged[function]:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _cache_outside_the_tree(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs in tests write their cache to a temporary directory, never into fixtures/;
    tests of the cache's default location unset ``MPCHECK_CACHE_DIR`` themselves."""
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(tmp_path_factory.mktemp("mpcheck-cache")))


@pytest.fixture(autouse=True)
def _plain_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's or CI's FORCE_COLOR must not colour the output tests compare."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
