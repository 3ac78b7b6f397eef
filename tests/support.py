"""Shared test helpers: fixture expectations and running mpcheck in-process."""

from __future__ import annotations

import json
import re
import runpy
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import libcst as cst

from mpcheck.diagnostics import Diagnostic
from mpcheck.output.fixes import apply_fixes
from mpcheck.pipeline.one_file import check_source
from mpcheck.ruleset.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# `# expect: MPC101` (or `MPC101, MPC103`) on the line where a finding starts.
# ``# expect: MPC101:17`` (code and 1-based column; several per line, comma-separated)
EXPECT = re.compile(r"#\s*expect:\s*(MPC\d{3}(?::\d+)?(?:\s*,\s*MPC\d{3}(?::\d+)?)*)")
# `# runtime: raises RuntimeError "regex"`, `# runtime: ok`, `# runtime: wrong "regex"`,
# `# runtime: none (reason)` on the fixture's first lines.
RUNTIME = re.compile(r'#\s*runtime:\s*(raises|ok|wrong|none)\b\s*(\w+)?\s*(?:"(.*)")?')


@dataclass(frozen=True)
class Runtime:
    outcome: str  # raises | ok | wrong | none
    exception: str | None
    pattern: str | None


XFILE = FIXTURES / "xfile"  # multi-file packages, checked as a project (tests/test_xfile.py)


def fixture_files() -> list[Path]:
    """The single-file fixtures."""
    return sorted(p for p in FIXTURES.rglob("*.py") if p.is_file() and XFILE not in p.parents)


def expected_at(path: Path) -> set[tuple[int, int | None, str]]:
    """``(row, column, code)`` of every ``# expect:`` item (column None when not given)."""
    out: set[tuple[int, int | None, str]] = set()
    for row, line in enumerate(path.read_text().splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            for item in m.group(1).split(","):
                code, _, column = item.strip().partition(":")
                out.add((row, int(column) if column else None, code))
    return out


def expected(path: Path) -> set[tuple[int, str]]:
    return {(row, code) for row, _, code in expected_at(path)}


def runtime(path: Path) -> Runtime | None:
    for line in path.read_text().splitlines()[:15]:
        m = RUNTIME.search(line)
        if m:
            return Runtime(m.group(1), m.group(2), m.group(3))
    return None


def check(source: str, filename: str = "t.py") -> list[Diagnostic]:
    return [d for d in check_source(source, filename, all_rules()) if not d.suppressed]


def span(d: Diagnostic) -> tuple[int, int, int, int]:
    """A finding's ``(row, column, end row, end column)``, 1-based."""
    return (d.start.row, d.start.column, d.end.row, d.end.column)


@cache
def _checked(source: str, filename: str) -> tuple[Diagnostic, ...]:
    return tuple(check(source, filename))


def check_fixture(path: Path) -> list[Diagnostic]:
    """``check`` of a fixture file as it is on disk now. Several suites (expectations,
    snapshots, fix closure, rule docs) ask this of every fixture: the analysis is done once
    per process and per content (diagnostics are immutable)."""
    return list(_checked(path.read_text(), str(path)))


def found(path: Path) -> set[tuple[int, str]]:
    return {(d.start.row, d.code) for d in check_fixture(path)}


def found_at(path: Path) -> set[tuple[int, int | None, str]]:
    return {(d.start.row, d.start.column, d.code) for d in check_fixture(path)}


def run_fixed_fixture(code: str, path: Path, tmp_path: Path) -> None:
    """Apply every (unsafe) ``code`` fix to a bad fixture, then run it: fixes are not cosmetic.

    Needs torch; the fixed program must leave no ``code`` finding and run clean.
    """
    source = path.read_text()
    diags = [d for d in check(source, str(path)) if d.code == code]
    fixed, n = apply_fixes(source, diags, unsafe=True)
    assert n == len(diags) > 0
    assert not [d for d in check(fixed) if d.code == code]
    target = tmp_path / path.name
    target.write_text(fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runpy.run_path(str(target), run_name="__main__")


# A norm class that keeps float32 weights and does not cast its input: the cross-file tests
# import it from another module of a temporary project.
FP32_NORM_SOURCE = """
import torch
from torch import nn


class RMSNormFp32(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=torch.float32))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
"""


def every_node(root: cst.CSTNode) -> list[cst.CSTNode]:
    """Every node under ``root``, trivia included (``names.descendants`` leaves it out)."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.children)
    return out


def project_findings(
    tmp_path: Path, files: Mapping[str, str], codes: Collection[str] = ()
) -> set[tuple[str, int, str]]:
    """Write a small project (relative name -> dedented text) under ``tmp_path`` and check it
    with the CLI as a user would: (file name, row, code) of each finding (of ``codes`` only,
    when given)."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json", "."]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return {
        (Path(d["filename"]).name, d["location"]["row"], d["code"])
        for d in json.loads(done.stdout)
        if not codes or d["code"] in codes
    }
