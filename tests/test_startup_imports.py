"""A one-file check imports only what it uses (issue: start-up cost), checked in sys.modules
of a real run rather than timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import runpy, sys, json
sys.argv = ["mpcheck", "check", "--output-format", "concise", sys.argv[1]]
try:
    runpy.run_module("mpcheck", run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_one_file_run_loads_no_matchers_and_one_renderer(tmp_path: Path) -> None:
    sample = tmp_path / "one.py"
    sample.write_text("import torch\nx = torch.ones(3)\n")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(sample)], capture_output=True, text=True, check=False
    )
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "libcst.matchers" not in loaded
    renderers = {m for m in loaded if m.startswith("mpcheck.reporters.")} - {
        "mpcheck.reporters.base"
    }
    assert renderers == {"mpcheck.reporters.text"}
