"""A run without the cache checks a module once: when another file first needs its summary,
its findings are kept for its own turn (:mod:`mpcheck.pipeline.walked_once`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mpcheck.pipeline import walked_once
from mpcheck.project import summarise
from tests.test_cache import FIXTURES, copy_tree, run

ROPE = FIXTURES / "xfile" / "bad_rope_helper"


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Each walk of a file in the run: ("checked", name) or ("summarised", name)."""
    seen: list[tuple[str, str]] = []
    check = walked_once.analyse_source
    summarise_file = summarise.FileSummariser.summarise

    def checking(data: bytes, filename: str, *args: object, **kwargs: object) -> object:
        seen.append(("checked", Path(filename).name))
        return check(data, filename, *args, **kwargs)  # type: ignore[arg-type]

    def summarising(self: summarise.FileSummariser, path: Path, lookup: object) -> object:
        seen.append(("summarised", path.name))
        return summarise_file(self, path, lookup)  # type: ignore[arg-type]

    monkeypatch.setattr(walked_once, "analyse_source", checking)
    monkeypatch.setattr(summarise.FileSummariser, "summarise", summarising)
    return seen


def test_a_module_summarised_for_an_importer_is_checked_then_and_only_then(
    tmp_path: Path, walks: list[tuple[str, str]]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    uncached = run(tree, "--no-cache")
    # attention.py's check needs rope.py's summary: rope.py is checked there, not summarised
    assert walks == [("checked", "rope.py")]
    assert uncached[0] == 1
    assert {Path(d["filename"]).name for d in json.loads(uncached[1])} >= {"attention.py"}
    shutil.rmtree(tree / ".mpcheck_cache", ignore_errors=True)
    assert run(tree)[:2] == uncached[:2]  # what a cold run with the cache reports


def test_a_check_of_one_file_checks_nothing_else(
    tmp_path: Path, walks: list[tuple[str, str]]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    status, out, _ = run(tree, "--no-cache", "pkg/attention.py")
    assert walks == [("summarised", "rope.py")]  # not a file of the run: its summary only
    assert status == 1
    assert {Path(d["filename"]).name for d in json.loads(out)} == {"attention.py"}


def test_a_module_of_another_configuration_is_checked_at_its_own_turn(
    tmp_path: Path, walks: list[tuple[str, str]]
) -> None:
    """Its own check looks names up in the summaries its configuration makes, which may
    differ from the importer's: it is only summarised for the importer."""
    tree = copy_tree(ROPE, tmp_path / "rope")
    sub = tree / "pkg" / "sub"
    sub.mkdir()
    (tree / "pkg" / "rope.py").rename(sub / "rope.py")
    (sub / "__init__.py").write_text("")
    (sub / ".mpcheck.toml").write_text("module-half-capable = false\n")
    attention = tree / "pkg" / "attention.py"
    attention.write_text(attention.read_text().replace("from .rope", "from .sub.rope"))
    uncached = run(tree, "--no-cache")
    assert ("checked", "rope.py") not in walks
    assert ("summarised", "rope.py") in walks
    shutil.rmtree(tree / ".mpcheck_cache", ignore_errors=True)
    assert run(tree)[:2] == uncached[:2]
