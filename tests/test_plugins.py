"""A third-party rule package: found through its ``mpcheck.rules`` entry point, run like a
built-in rule, and noticed when installed or removed although the entry-point list is cached."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

RULE = '''
"""An external rule, written against mpcheck.api only."""
from mpcheck.api import CallSite, Rule, Severity


class NoEmptyCache(Rule):
    code = "XMP900"
    name = "no-empty-cache"
    severity = Severity.WARNING
    summary = "`torch.cuda.empty_cache()` in a training step slows it down."
    bad = "torch.cuda.empty_cache()"
    good = "pass"

    def check_call(self, call: CallSite) -> None:
        if call.qualname == "torch.cuda.empty_cache":
            self.report(call.node, "empty_cache() in a step")
'''


def install(site: Path) -> Path:
    """A distribution as pip leaves it: the module and a dist-info with the entry point."""
    (site / "xmp_rules.py").write_text(RULE)
    info = site / "xmp_rules-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xmp-rules\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mpcheck.rules]\nxmp = xmp_rules\n")
    return info


def mpcheck(site: Path, cache: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "mpcheck", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_an_installed_rule_package_runs_and_its_removal_is_noticed(tmp_path: Path) -> None:
    site, cache, work = tmp_path / "site", tmp_path / "cache", tmp_path / "work"
    site.mkdir()
    work.mkdir()
    (work / "step.py").write_text("import torch\n\ntorch.cuda.empty_cache()\n")
    info = install(site)
    listed = mpcheck(site, cache, "rule", "--all", cwd=work)
    assert "XMP900" in listed.stdout
    found = mpcheck(site, cache, "check", "--no-cache", "--output-format", "concise", ".", cwd=work)
    assert found.returncode == 1 and "step.py:3:1: XMP900" in found.stdout
    assert list((cache / "mpcheck").glob("entry-points-*.json"))  # the list was kept
    assert "XMP900" in mpcheck(site, cache, "rule", "--all", cwd=work).stdout  # from the cache
    shutil.rmtree(info)  # pip uninstall: the site directory's time changes
    (site / "xmp_rules.py").unlink()
    after = mpcheck(site, cache, "rule", "--all", cwd=work)
    assert after.returncode == 0 and "XMP900" not in after.stdout


def test_a_broken_rule_package_is_named_and_the_others_still_run(tmp_path: Path) -> None:
    site, cache, work = tmp_path / "site", tmp_path / "cache", tmp_path / "work"
    site.mkdir()
    work.mkdir()
    (work / "step.py").write_text("import torch\n\ntorch.cuda.empty_cache()\n")
    install(site)
    (site / "broken_rules.py").write_text("import no_such_dependency_of_broken_rules\n")
    info = site / "broken_rules-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-rules\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mpcheck.rules]\nbroken = broken_rules\n")
    found = mpcheck(site, cache, "check", "--no-cache", "--output-format", "concise", ".", cwd=work)
    assert found.returncode == 1 and "step.py:3:1: XMP900" in found.stdout, found.stderr
    warnings = [line for line in found.stderr.splitlines() if "broken" in line]
    assert len(warnings) == 1 and "internal error" not in found.stderr
    assert warnings[0].startswith("mpcheck: warning: rule plugin `broken` (broken_rules)")
    assert (
        "ModuleNotFoundError: No module named 'no_such_dependency_of_broken_rules'" in warnings[0]
    )
