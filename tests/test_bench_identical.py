"""``bench/identical.py`` finds a changed finding, and only then: it is the gate that says an
engine change leaves the findings of every corpus, real-bug side and fixture as they were."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

# (the bench scripts read TOML with the standard library's parser: Python 3.11 and later)
pytest.importorskip("tomllib")

BENCH = Path(__file__).resolve().parents[1] / "bench"
MPCHECK = str(Path(sys.executable).with_name("mpcheck"))
DEPRECATED = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"  # one MPC404


def _identical() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_identical", BENCH / "identical.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up while building)
    spec.loader.exec_module(module)
    return module


identical = _identical()


@pytest.fixture
def trees(tmp_path: Path) -> dict[str, Path]:
    """A corpora root with two corpora, an empty real-bugs root, and a fixtures directory."""
    corpora = tmp_path / "corpora"
    (corpora / "alpha").mkdir(parents=True)
    (corpora / "alpha" / "train.py").write_text(DEPRECATED)
    (corpora / "beta").mkdir()
    (corpora / "beta" / "clean.py").write_text("x = 1\n")
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "bad.py").write_text(DEPRECATED)
    realbugs = tmp_path / "realbugs"
    realbugs.mkdir()
    return {"corpora": corpora, "fixtures": fixtures, "realbugs": realbugs, "root": tmp_path}


def _argv(trees: dict[str, Path], *extra: str) -> list[str]:
    return [
        *("--corpora", str(trees["corpora"]), "--realbugs", str(trees["realbugs"])),
        *("--fixtures", str(trees["fixtures"]), "--only", "corpora,fixtures", "--jobs", "1"),
        *extra,
    ]


@pytest.mark.integration
def test_one_install_against_itself_is_identical_and_saves_relative_reports(
    trees: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    saved = trees["root"] / "saved"
    argv = _argv(trees, "--before", MPCHECK, "--after", MPCHECK, "--save", str(saved))
    assert identical.main(argv) == 0
    out = capsys.readouterr().out
    assert "corpora/alpha: 1 -> 1 findings" in out and "corpora/beta: 0 -> 0 findings" in out
    assert "all 3 targets identical" in out
    report = json.loads((saved / "corpora" / "alpha.json").read_text())
    # relative to where the run started, so reports from other worktrees compare
    assert [(f["code"], f["filename"]) for f in report] == [("MPC404", "alpha/train.py")]
    index = json.loads((saved / "index.json").read_text())
    assert set(index) == {"corpora/alpha", "corpora/beta", "fixtures"}


@pytest.mark.integration
def test_a_finding_gone_from_the_stored_baseline_is_a_difference(
    trees: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    saved = trees["root"] / "saved"
    argv = _argv(trees, "--before", MPCHECK, "--save", str(saved), "--save-only")
    assert identical.main(argv) == 0
    assert identical.main(_argv(trees, "--before-dir", str(saved), "--after", MPCHECK)) == 0
    capsys.readouterr()
    # the install now reports a finding the baseline did not have
    (saved / "fixtures.json").write_text("[]\n")
    assert identical.main(_argv(trees, "--before-dir", str(saved), "--after", MPCHECK)) == 1
    out = capsys.readouterr().out
    assert "fixtures: 0 -> 1 findings" in out
    assert "+ bad.py:2:10 MPC404" in out
    assert "1 targets DIFFER: fixtures" in out


@pytest.mark.integration
def test_a_corpus_missing_on_either_side_is_a_difference(
    trees: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    saved = trees["root"] / "saved"
    argv = _argv(trees, "--before", MPCHECK, "--save", str(saved), "--save-only")
    assert identical.main(argv) == 0
    (trees["corpora"] / "gamma").mkdir()
    (trees["corpora"] / "gamma" / "g.py").write_text(DEPRECATED)
    (saved / "corpora" / "beta.json").unlink()
    shutil.rmtree(trees["corpora"] / "alpha")
    assert identical.main(_argv(trees, "--before-dir", str(saved), "--after", MPCHECK)) == 1
    out = capsys.readouterr().out
    assert "corpora/gamma: 1 findings, NO STORED REPORT" in out
    assert "corpora/alpha: stored, but not run now" in out
    assert "corpora/beta: 0 findings, NO STORED REPORT" in out
    assert "fixtures: 1 -> 1 findings" in out


def test_bad_input_is_one_line_and_exit_2(
    trees: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(trees["root"] / "no-such-mpcheck")
    assert identical.main(_argv(trees, "--before", missing, "--after", missing)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("identical: cannot run")
    with pytest.raises(SystemExit) as exit_:
        identical.main(_argv(trees, "--before-dir", str(trees["root"] / "nowhere")))
    assert exit_.value.code == 2
    assert "--before-dir: no directory" in capsys.readouterr().err
