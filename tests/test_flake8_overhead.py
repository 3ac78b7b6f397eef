"""The flake8 plugin costs nothing when flake8 will not report MPC codes (``--select E,F``)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from flake8.api import legacy

from mpcheck.flake8_plugin import MpcheckPlugin, _reports_mpc

ENGINE = (
    "libcst",
    "mpcheck.pipeline.one_file",
    "mpcheck.ruleset.rule",
    "mpcheck.settings.resolver",
    "mpcheck.settings.config",
)
SOURCE = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def loaded_after(code: str, cwd: Path) -> list[str]:
    """The engine modules a fresh interpreter has loaded after running ``code``."""
    probe = (
        f"import sys\n{code}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] == 'libcst' or m in {ENGINE!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if line.startswith("[")][-1:]


def test_importing_the_plugin_does_not_import_the_engine() -> None:
    """In this process: the plugin imported afresh, with no mpcheck or libcst loaded."""
    saved = dict(sys.modules)
    try:
        for name in list(sys.modules):
            if name.split(".")[0] in ("mpcheck", "libcst"):
                del sys.modules[name]
        importlib.import_module("mpcheck.flake8_plugin")
        loaded = [m for m in sys.modules if m.split(".")[0] == "libcst" or m in ENGINE]
    finally:
        sys.modules.clear()
        sys.modules.update(saved)
    assert loaded == []


@pytest.mark.integration
def test_importing_the_plugin_in_a_fresh_interpreter(tmp_path: Path) -> None:
    assert loaded_after("import mpcheck.flake8_plugin", tmp_path) == ["[]"]


@pytest.mark.integration
def test_flake8_select_e_f_never_imports_the_engine(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SOURCE)
    run = (
        "from flake8.main.cli import main\n"
        "try:\n    main(['--jobs', '1', '--select', '{select}', 'train.py'])\n"
        "except SystemExit:\n    pass\n"
    )
    assert loaded_after(run.format(select="E,F"), tmp_path) == ["[]"]
    checked = loaded_after(run.format(select="E,F,MPC"), tmp_path)
    assert checked != ["[]"] and "libcst" in checked[0]


@pytest.mark.parametrize(
    ("kwargs", "reports"),
    [
        ({}, True),  # flake8's defaults include every plugin's codes
        ({"select": ["E", "F"]}, False),
        ({"select": ["E"], "extend_select": ["MPC4"]}, True),
        ({"select": ["MPC101"]}, True),
        ({"select": ["M"]}, True),
        ({"ignore": ["MPC"]}, False),
        ({"ignore": ["MPC"], "extend_select": ["MPC404"]}, True),
        ({"extend_ignore": ["MPC1"]}, True),
    ],
)
def test_reports_mpc_follows_flake8s_decision(
    kwargs: dict[str, list[str]], reports: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the legacy API sets these options after plugins parsed theirs: the plugin stays on)
    monkeypatch.setattr(MpcheckPlugin, "reports_mpc", True)
    guide = legacy.get_style_guide(**kwargs)
    assert _reports_mpc(guide.options) is reports
