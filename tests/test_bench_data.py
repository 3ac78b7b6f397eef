"""The measurement data in ``bench/`` is well formed: a broken real-bug case or verdict would
silently drop out of the recall and precision figures of docs/real-world.md."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

from mpcheck.ruleset.rule import all_rules

# (the bench scripts read TOML with the standard library's parser: Python 3.11 and later)
tomllib = pytest.importorskip("tomllib")

BENCH = Path(__file__).resolve().parents[1] / "bench"
CODES = {rule.code for rule in all_rules()}
# Families of rules being built (issue 37): their real-bug cases land before the rules do.
PENDING_CODES: frozenset[str] = frozenset()
COMMIT = re.compile(r"[0-9a-f]{40}")
# the sealed batches (issue 36), each a corpus group
BATCHES = ("sealed", "sealed2", "sealed3", "sealed4", "sealed5", "sealed6", "sealed7")
# the hand-found hazards each batch holds at least
HAZARDS = {
    "sealed": 10,
    "sealed2": 12,
    "sealed3": 10,
    "sealed4": 10,
    "sealed5": 10,
    "sealed6": 10,
    "sealed7": 10,
}


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
        assert case.family in CODES | PENDING_CODES, case.id
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
        # (a file mpcheck cannot read at all, such as a 0-byte notebook, has no line to anchor)
        assert v["why"].strip() and (v["anchor"].strip() or v["rule"] == "MPC001"), v
        given[(v["rule"], v["path"], " ".join(v["anchor"].split()))].add(v["verdict"])
    # the same line reported twice in a file shares one verdict
    assert not [key for key, kinds in given.items() if len(kinds) > 1]


def _bench_module(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_sealed_corpora_run_only_when_asked() -> None:
    """Issue 36: the sealed corpora stay out of every tuning run, and --sealed runs only them."""
    precision = _bench_module("bench_precision", "precision.py")
    tuning = precision.load_corpora("all")
    sealed = precision.load_corpora("all", sealed=True)
    assert not any(c.sealed for c in tuning)
    # each sealed batch is a corpus group of its own
    assert all(c.sealed and c.group in BATCHES for c in sealed)
    for batch in BATCHES:
        assert len(precision.load_corpora(batch, sealed=True)) >= 8, batch
    assert len({c.repo for c in sealed}) == len(sealed), "a repository sits in one batch only"
    for corpus in sealed:
        assert COMMIT.fullmatch(corpus.commit), corpus.name
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", corpus.repo), corpus.name
    # never measured here before: neither a tuning corpus nor a real-bug case
    known = {c.repo for c in tuning} | {c.repo for c in _score_module().load_cases()}
    assert not known & {c.repo for c in sealed}


@pytest.mark.parametrize("batch", BATCHES)
def test_sealed_first_run_verdicts_are_well_formed(batch: str) -> None:
    sealed = _bench_module("bench_sealed_score", "sealed/score.py")
    names = {c.name for c in sealed.precision.load_corpora(batch, sealed=True)}
    given: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for v in sealed.load_verdicts(batch):
        assert v.rule in CODES and v.verdict in ("bug", "latent bug", "false alarm"), v
        assert v.why.strip() and v.anchor.strip() and v.path.split("/")[0] in names, v
        given[v.key].add(v.verdict)
    assert not [key for key, kinds in given.items() if len(kinds) > 1]


@pytest.mark.parametrize("batch", BATCHES)
def test_sealed_hazards_sit_at_the_pinned_commits(batch: str) -> None:
    sealed = _bench_module("bench_sealed_score", "sealed/score.py")
    pinned = {c.repo: c.commit for c in sealed.precision.load_corpora(batch, sealed=True)}
    hazards = sealed.load_hazards(batch)
    assert len(hazards) >= HAZARDS[batch] and len({h.id for h in hazards}) == len(hazards)
    for h in hazards:
        assert pinned.get(h.repo) == h.buggy, h.id
        assert h.path.endswith(".py") and h.family in CODES and h.note.strip(), h.id
        assert h.symptom in ("raises", "silent") and h.cross_file == bool(h.other_paths), h.id
        assert h.buggy_lines and all(1 <= lo <= hi for lo, hi in h.buggy_lines), h.id


@pytest.mark.parametrize("batch", BATCHES)
def test_a_sealed_batch_runs_only_its_own_corpora(
    batch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """score.py --batch (and precision.py --sealed --batch) run one batch, the first by default:
    adding a batch never changes the numbers of another."""
    sealed = _bench_module("bench_sealed_score", "sealed/score.py")
    precision = sealed.precision
    expected = [c.name for c in precision.load_corpora(batch, sealed=True)]
    assert expected and all(c.group == batch for c in precision.load_corpora(batch, sealed=True))
    ran: list[str] = []

    def unpacked(corpus: object, root: Path, mirrors: Path) -> None:
        ran.append(corpus.name)  # type: ignore[attr-defined]
        return None  # (as a missing mirror: nothing is checked)

    monkeypatch.setattr(precision, "materialise", unpacked)
    options = ["--dir", str(tmp_path), "--new-out", str(tmp_path / "new.toml")]
    assert sealed.main(options if batch == "sealed" else [*options, "--batch", batch]) == 0
    assert ran == expected
    ran.clear()
    sealed_run = ["--dir", str(tmp_path), "--sealed"]
    assert precision.main(sealed_run if batch == "sealed" else [*sealed_run, "--batch", batch]) == 0
    assert ran == expected
    assert precision.sealed_dir(batch) == BENCH / (
        "sealed" if batch == "sealed" else f"sealed/{batch}"
    )


def test_a_hazard_is_caught_only_by_its_family_at_its_lines() -> None:
    sealed = _bench_module("bench_sealed_score", "sealed/score.py")
    finding = sealed.precision.Finding
    hazard = sealed.realbugs.Case(
        id="h", repo="o/r", buggy="0" * 40, fixed="", path="m.py", buggy_lines=[[10, 12]],
        fixed_lines=[], family="MPC302", note="n",
    )  # fmt: skip
    assert sealed.caught(hazard, "c", [finding("MPC301", "c/m.py", 11, "x", "m")]) == (True, False)
    assert sealed.caught(hazard, "c", [finding("MPC302", "c/m.py", 12, "x", "m")]) == (True, True)
    assert sealed.caught(hazard, "c", [finding("MPC101", "c/m.py", 11, "x", "m")]) == (False, False)
    assert sealed.caught(hazard, "c", [finding("MPC302", "c/m.py", 13, "x", "m")]) == (False, False)
    assert sealed.caught(hazard, "c", [finding("MPC302", "d/m.py", 11, "x", "m")]) == (False, False)


def test_a_corpus_unpacks_without_the_blobs_its_mirror_lacks(tmp_path: Path) -> None:
    """A snapshot lacks its largest files; one of them must not stop the whole corpus."""
    precision = _bench_module("bench_precision", "precision.py")
    repo = tmp_path / "mirrors" / "o+r" / "repo"
    repo.mkdir(parents=True)
    (repo / "kept.py").write_text("x = 1\n")
    (repo / "big.ipynb").write_text('{"cells": []}\n')
    (repo / "notes.md").write_text("# lost\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    blob = subprocess.run([*git, "rev-parse", "HEAD:big.ipynb"], check=True, capture_output=True)
    oid = blob.stdout.decode().strip()
    (repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()  # as a snapshot without it
    words = subprocess.run([*git, "rev-parse", "HEAD:notes.md"], check=True, capture_output=True)
    oid = words.stdout.decode().strip()
    (repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()  # (its size reads ``BAD``)
    corpus = precision.Corpus("c", "sealed", repo="o/r", commit=commit.stdout.strip(), sealed=True)
    target = precision.materialise(corpus, tmp_path / "out", tmp_path / "mirrors")
    assert target is not None
    assert sorted(p.name for p in target.iterdir()) == [".mpcheck-corpus", "kept.py"]
    # the stamp names what was unpacked, as before: corpora unpacked earlier are not redone
    assert "sealed" not in json.loads((target / ".mpcheck-corpus").read_text())


def test_a_corpus_unpacks_as_a_checkout_with_its_words_but_not_its_data(tmp_path: Path) -> None:
    """Configurations, READMEs and packaging tell mpcheck what runs (a module named only in a
    YAML config): a corpus has them, as a user's checkout does; data and binaries stay out."""
    precision = _bench_module("bench_precision", "precision.py")
    repo = tmp_path / "mirrors" / "o+r" / "repo"
    (repo / "configs").mkdir(parents=True)
    (repo / "m.py").write_text("x = 1\n")
    (repo / "configs" / "train.yaml").write_text("target: m.Block\n")
    (repo / "pyproject.toml").write_text("[project]\nname = 'r'\n")
    (repo / "weights.bin").write_bytes(b"\0" * 64)
    (repo / "table.json").write_text("[" + "0," * precision.MAX_WORDS + "0]")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    corpus = precision.Corpus("c", "training", repo="o/r", commit=commit.stdout.strip())
    target = precision.materialise(corpus, tmp_path / "out", tmp_path / "mirrors")
    assert target is not None
    unpacked = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert unpacked == [".mpcheck-corpus", "configs/train.yaml", "m.py", "pyproject.toml"]


def test_new_sealed_findings_are_written_ready_for_a_verdict() -> None:
    """New findings never reach the screen: they go to a file in first-run.toml's own schema."""
    sealed = _bench_module("bench_sealed_score", "sealed/score.py")
    found = sealed.precision.Finding("MPC102", 'c/a "b".py', 7, "x = torch.zeros(3)", "m", "error")
    entries = tomllib.loads(sealed._new_findings([found]))["verdict"]
    assert [sealed.Verdict(**e).key for e in entries] == [
        ("MPC102", 'c/a "b".py', "x = torch.zeros(3)")
    ]
    assert entries[0]["verdict"] == "" and entries[0]["severity"] == "error"


def test_a_real_bug_checkout_is_what_a_user_checks_out(tmp_path: Path) -> None:
    # the code with the docs, configurations and packaging that say what runs it; data past
    # the size bound left out; ``--python-only`` keeps the earlier harness's ``.py`` files
    work = tmp_path / "work"
    files = {
        "pkg/model.py": b"import torch\n",
        "pyproject.toml": b"[project]\nname = 'pkg'\n",
        "configs/ds.json": b'{"fp16": {"enabled": true}}\n',
        "weights.bin": b"\0" * (_score_module().MAX_FILE + 1),
    }
    for name, data in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    score = _score_module()

    def listed(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

    full = score.checkout(work / ".git", head, tmp_path / "out")
    assert listed(full) == {*files} - {"weights.bin"} | {".mpcheck-realbug"}
    assert (full / "configs/ds.json").read_bytes() == files["configs/ds.json"]
    alone = score.checkout(work / ".git", head, tmp_path / "out", python_only=True)
    assert listed(alone) == {"pkg/model.py", ".mpcheck-realbug"}
