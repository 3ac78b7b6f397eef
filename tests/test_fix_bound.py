"""An offered fix runs: it reads no name before that name is bound (issue 34, item 8).

Each case is the shape of a public repository's finding (transformers' nystromformer and
chmv2, timm's repghost) where ``--fix --unsafe-fixes`` wrote ``dtype=<name>.dtype`` above
the line that binds ``<name>``, and the model then raised UnboundLocalError. The fix goes
through the CLI and the fixed file runs under torch.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpcheck.cli.app import main
from tests.support import ROOT

CASES = ROOT / "tests" / "data" / "fix_bound"


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


@pytest.mark.parametrize("name", ["assigned_later.py", "one_branch.py", "loop.py"])
def test_no_fix_reads_a_name_before_it_is_bound(name: str, tmp_path: Path) -> None:
    before, after, done = _fix_and_run(name, tmp_path)
    assert "UnboundLocalError" not in done.stderr
    assert after == before  # no other name is bound there: no fix is offered


def test_a_name_bound_before_the_edit_is_used(tmp_path: Path) -> None:
    before, after, done = _fix_and_run("bound_before.py", tmp_path)
    assert after == before.replace("device=x.device)", "device=x.device, dtype=t.dtype)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch.float16"
