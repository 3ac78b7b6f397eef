"""Every fixture's full text output (message, source frame, related locations, help), stored
next to it as ``<fixture>.snap`` and compared here, so a change in any message is a readable
diff in review.

Update them after an intended change with::

    MPCHECK_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py

and read ``git diff fixtures/`` before committing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mpcheck import __version__
from mpcheck.files.source import SourceFile
from mpcheck.output.reporters import render
from mpcheck.output.reporters.base import ReportContext
from mpcheck.ruleset.rule import all_rules
from tests.support import FIXTURES, check_fixture, fixture_files

UPDATE = os.environ.get("MPCHECK_UPDATE_SNAPSHOTS") == "1"


def snapshot_of(path: Path) -> Path:
    return path.with_name(path.name + ".snap")


def full_output(path: Path) -> str:
    source = path.read_text()
    lines = SourceFile.from_text(source).lines
    ctx = ReportContext(
        root=FIXTURES,
        rules={r.code: r.info() for r in all_rules()},
        source_lines=lambda _: lines,
        tool_version=__version__,
    )
    found = check_fixture(path)
    return render("full", found, ctx) if found else "(no findings)\n"


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_full_output_matches_the_snapshot(path: Path) -> None:
    snap = snapshot_of(path)
    actual = full_output(path)
    if UPDATE:
        snap.write_text(actual)
        return
    assert snap.exists(), f"no snapshot: run MPCHECK_UPDATE_SNAPSHOTS=1 pytest {__file__}"
    assert actual == snap.read_text(), f"{snap.name} differs (update it if this is intended)"


def test_no_snapshot_without_its_fixture() -> None:
    fixtures = {snapshot_of(p) for p in fixture_files()}
    stale = sorted(str(s.relative_to(FIXTURES)) for s in FIXTURES.rglob("*.snap"))
    assert [s for s in stale if FIXTURES / s not in fixtures] == []
