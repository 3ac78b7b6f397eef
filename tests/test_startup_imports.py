"""A one-file check imports only what it uses (issue: start-up cost), checked in sys.modules
of a real run rather than timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    renderers = {m for m in loaded if m.startswith("mpcheck.output.reporters.")} - {
        "mpcheck.output.reporters.base"
    }
    assert renderers == {"mpcheck.output.reporters.text"}


# What a one-file check with nothing to fix, no notebook, no configuration file and no
# ``noqa`` comment must not import (each was made lazy for start-up time, issue 12).
NOT_LOADED = {
    "mpcheck.output.fixes": "fix machinery",
    "mpcheck.files.notebook": "notebooks",
    "mpcheck.output.noqa": "noqa tokenizing, only for files with a directive",
    "mpcheck.output.job_summary": "the GitHub step summary, only with GITHUB_STEP_SUMMARY",
    "mpcheck.output.baseline": "baselines",
    "mpcheck.pipeline.cache": "the cache, with --no-cache",
    "mpcheck.pipeline.incremental": "the cache, with --no-cache",
    "tomllib": "TOML, with no configuration file",
    "difflib": "diffs and did-you-mean suggestions",
    "tempfile": "temporary files (importlib.resources imports it too)",
    "importlib.resources": "package data is read with pkgutil",
    "importlib.metadata": "entry points are cached",
    "hashlib": "OpenSSL: BLAKE2b comes from _blake2",
    "concurrent.futures": "the parse thread is a plain thread",
    "logging": "imported by concurrent.futures",
    "traceback": "only --verbose prints one",
    "shutil": "argparse's help formatter measures the terminal with it; ours does not",
}


def test_one_file_run_without_cache_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    sample = tmp_path / "one.py"
    sample.write_text("import torch\nx = torch.ones(3)\ny = x.float() @ x\n")
    probe = PROBE.replace('"check",', '"check", "--no-cache",')
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")  # the entry points: looked up once, then kept
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", probe, str(sample)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env=env,
        )
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert {m: why for m, why in NOT_LOADED.items() if m in loaded} == {}


@pytest.mark.parametrize("columns", [None, "50", "0", "wide"])
def test_terminal_width_is_what_shutil_says(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    import shutil

    from mpcheck.cli.app import terminal_width

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == shutil.get_terminal_size().columns
