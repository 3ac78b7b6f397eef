"""``-j`` workers share the summaries they make (a cache private to the run when there is no
persistent one): the findings are those of a run in one process, and nothing is left over."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mpcheck.runner import POOL_THRESHOLD

HELPER = "import torch\n\n\ndef emb(t):\n    return torch.arange(8)[None] * t[:, None].float()\n"
USER = """import torch
from torch import nn

from .helpers import emb


class Net{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, t):
        return self.proj(x + emb(t))
"""


def run(root: Path, jobs: str) -> tuple[list[tuple[str, int, str]], str]:
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json"]
    done = subprocess.run([*cmd, "-j", jobs, "."], cwd=root, capture_output=True, text=True)
    found = [(d["filename"], d["location"]["row"], d["code"]) for d in json.loads(done.stdout)]
    return sorted(found), done.stderr


def test_workers_find_what_one_process_finds(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPER)
    for i in range(POOL_THRESHOLD + 6):
        (pkg / f"net{i}.py").write_text(USER.format(i=i))
    before = set(Path(tempfile.gettempdir()).glob("mpcheck-run-*"))
    alone, _ = run(tmp_path, "1")
    shared, err = run(tmp_path, "2")
    assert len(alone) == POOL_THRESHOLD + 6, err
    assert shared == alone
    assert set(Path(tempfile.gettempdir()).glob("mpcheck-run-*")) == before
    assert not (tmp_path / ".mpcheck_cache").exists()
