"""``models-run-in-half = true`` (issue 36, "What to build" 1): a project that is itself a
model library says so once, and its modules' dtype findings rest on that evidence (errors
naming the setting) instead of on the premise alone (latent warnings). Driven through the
CLI and through flake8, which read the same ``[tool.mpcheck]``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import XFILE

SETTING = "the configuration says every module runs in half (`models-run-in-half`)"


def _case(tmp_path: Path, config: str) -> Path:
    case = tmp_path / "case"
    shutil.copytree(XFILE / "warn_uncast_block", case)
    (case / "pyproject.toml").write_text(f"[tool.mpcheck]\n{config}")
    return case


def _check(case: Path) -> tuple[int, list[Any], str]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json", "."]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    found: list[Any] = json.loads(done.stdout) if done.stdout.strip() else []
    return done.returncode, found, done.stderr


def test_without_the_setting_the_block_is_a_latent_warning(tmp_path: Path) -> None:
    _, (finding,), _ = _check(_case(tmp_path, "models-run-in-half = false\n"))
    assert finding["severity"] == "warning"
    assert "latent: raises if `Block` runs in half" in finding["message"]


def test_the_setting_is_evidence_and_the_message_names_it(tmp_path: Path) -> None:
    rc, (finding,), _ = _check(_case(tmp_path, "models-run-in-half = true\n"))
    assert rc == 1
    assert finding["severity"] == "error"
    assert SETTING in finding["message"]
    assert "latent" not in finding["message"]


def test_the_setting_contradicting_module_half_capable_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    config = "models-run-in-half = true\nmodule-half-capable = false\n"
    rc, found, err = _check(_case(tmp_path, config))
    assert (rc, found) == (2, [])
    assert err.count("\n") == 1 and "'module-half-capable' is false" in err
    assert "Traceback" not in err


def test_flake8_reads_the_setting_from_tool_mpcheck(tmp_path: Path) -> None:
    case = _case(tmp_path, "models-run-in-half = true\n")
    cmd = [sys.executable, "-m", "flake8", "--select", "MPC", "--jobs=1", "--isolated", "dit"]
    done = subprocess.run(cmd, cwd=case, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    (line,) = done.stdout.splitlines()
    assert SETTING in line and "latent" not in line
