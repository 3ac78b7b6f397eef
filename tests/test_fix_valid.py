"""An offered fix is valid for what it edits (issue 38, item 6).

On public repositories fixes wrote ``.weight`` on an ``nn.Sequential`` (which has none) and
``dtype=`` into ``torch.where`` (which takes none). Each case goes through the CLI's
``--fix --unsafe-fixes`` and the fixed file runs under torch.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpcheck.cli.app import main
from tests.support import ROOT

CASES = ROOT / "tests" / "data" / "fix_valid"


def _fix_and_run(name: str, tmp_path: Path) -> tuple[str, str, subprocess.CompletedProcess[str]]:
    pytest.importorskip("torch")
    target = tmp_path / name
    shutil.copy(CASES / name, target)
    before = target.read_text()
    main(["check", str(target), "--fix", "--unsafe-fixes", "--no-cache", "--quiet"])
    done = subprocess.run(
        [sys.executable, str(target)], capture_output=True, text=True, check=False, timeout=120
    )
    return before, target.read_text(), done


@pytest.mark.parametrize(
    ("name", "cast"),
    [
        ("sequential.py", "h.to(next(self.head.parameters()).dtype)"),  # no ``.weight`` there
        ("layer.py", "h.to(self.head.weight.dtype)"),
    ],
)
def test_a_cast_reads_the_dtype_the_module_has(name: str, cast: str, tmp_path: Path) -> None:
    before, after, done = _fix_and_run(name, tmp_path)
    assert after == before.replace("self.head(h)", f"self.head({cast})")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch.float16"


def test_no_dtype_keyword_goes_to_a_function_without_one(tmp_path: Path) -> None:
    before, after, done = _fix_and_run("where.py", tmp_path)
    assert "TypeError" not in done.stderr
    assert after == before
