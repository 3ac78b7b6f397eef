"""The measurement data in ``bench/`` is well formed: a broken real-bug case or verdict would
silently drop out of the recall and precision figures of docs/real-world.md."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

from mpcheck.rule import all_rules

# (the bench scripts read TOML with the standard library's parser: Python 3.11 and later)
tomllib = pytest.importorskip("tomllib")

BENCH = Path(__file__).resolve().parents[1] / "bench"
CODES = {rule.code for rule in all_rules()}
COMMIT = re.compile(r"[0-9a-f]{40}")


def _score_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("realbugs_score", BENCH / "realbugs/score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up while building)
    spec.loader.exec_module(module)
    return module


def test_every_real_bug_case_has_usable_coordinates() -> None:
    cases = _score_module().load_cases()
    ids = [case.id for case in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    for case in cases:
        assert COMMIT.fullmatch(case.buggy) and COMMIT.fullmatch(case.fixed), case.id
        assert case.buggy != case.fixed, case.id
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", case.repo), case.id
        assert case.path.endswith(".py"), case.id
        assert case.family in CODES, case.id
        assert case.symptom in ("raises", "silent"), case.id
        assert case.source == "" or case.source.startswith("https://"), case.id
        assert case.cross_file == bool(case.other_paths), case.id
        for ranges in (case.buggy_lines, case.fixed_lines):
            assert ranges, case.id
            assert all(len(r) == 2 and 1 <= r[0] <= r[1] for r in ranges), case.id
        assert case.note.strip(), case.id


def test_every_verdict_is_one_of_the_three_and_says_why() -> None:
    verdicts = tomllib.loads((BENCH / "verdicts.toml").read_text())["verdict"]
    given: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for v in verdicts:
        assert v["rule"] in CODES, v
        assert v["verdict"] in ("bug", "latent bug", "real", "false alarm"), v
        assert v["why"].strip() and v["anchor"].strip(), v
        given[(v["rule"], v["path"], " ".join(v["anchor"].split()))].add(v["verdict"])
    # the same line reported twice in a file shares one verdict
    assert not [key for key, kinds in given.items() if len(kinds) > 1]
