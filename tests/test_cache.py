"""The persistent cache: warm results equal cold ones, and it re-analyses exactly what changed.

Runs happen in this process (``-j 1``), so the analyses a run performs can be counted by
wrapping :func:`mpcheck.pipeline.incremental.analyse_source`.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from mpcheck.cli import app as cli
from mpcheck.pipeline import incremental
from mpcheck.pipeline import pool as runner
from mpcheck.pipeline.cache import FORMAT

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The files each run analyses (rather than taking from the cache), in order."""
    seen: list[str] = []
    real = incremental.analyse_source

    def counting(data: bytes, filename: str, *args: object, **kwargs: object) -> object:
        seen.append(Path(filename).name)
        return real(data, filename, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(incremental, "analyse_source", counting)
    yield seen


# An edit of ``bad_rope_helper``'s ``rope.py`` that changes what ``apply_rope`` returns (its
# summary) and nothing its own calls hand: what a call hands is part of the project-wide
# evidence (the callers pass), so an edit of that rechecks every file by design.
RETURNED = "return q * cos + rotate_half(q) * sin"
RETURNED_HALF = "return (q * cos + rotate_half(q) * sin).half()"


def run(tree: Path, *args: str) -> tuple[int, str, str]:
    """``mpcheck check`` in ``tree``, JSON out, in this process."""
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = cli.main(["check", "--output-format", "json", "-j", "1", *args])
    finally:
        os.chdir(cwd)
    return status, out.getvalue(), err.getvalue()


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".mpcheck_cache", "__pycache__"))
    return dst


def test_warm_run_is_byte_identical_and_analyses_nothing(
    tmp_path: Path, analysed: list[str]
) -> None:
    tree = copy_tree(FIXTURES, tmp_path / "fixtures")
    cold = run(tree)
    assert cold[0] == 1 and analysed
    analysed.clear()
    warm = run(tree)
    assert warm == cold
    assert analysed == []
    assert run(tree, "--no-cache")[1] == cold[1]


def test_a_new_selection_or_format_needs_no_analysis(tmp_path: Path, analysed: list[str]) -> None:
    tree = copy_tree(FIXTURES / "mpc301", tmp_path / "mpc301")
    run(tree, "--select", "MPC301")
    analysed.clear()
    for args in (["--select", "MPC101"], ["--ignore", "MPC1"], ["--output-format", "sarif"]):
        warm = run(tree, *args)
        assert analysed == [], args
        assert warm == run(tree, "--no-cache", *args)


def test_editing_one_file_reanalyses_that_file_only(tmp_path: Path, analysed: list[str]) -> None:
    tree = copy_tree(FIXTURES / "mpc301", tmp_path / "mpc301")
    run(tree)
    victim = tree / "bad_mask_argument_masked_fill.py"
    assert victim.is_file()
    victim.write_text(victim.read_text() + "\n# an edit\n")
    analysed.clear()
    warm = run(tree)
    assert analysed == ["bad_mask_argument_masked_fill.py"]
    assert warm == run(tree, "--no-cache")


ROPE = FIXTURES / "xfile" / "bad_rope_helper"
# Enough for the cache's own mechanics (entries, damage, location, warnings): findings with
# related locations and fixes, and a file without any.
SMALL = ("bad_rmsnorm_block.py", "bad_script_half_model.py", "good_upcast_idioms.py")


def small_tree(dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in SMALL:
        shutil.copy2(FIXTURES / "mpc101" / name, dst / name)
    return dst


def test_a_helper_whose_summary_changes_rechecks_its_importers(
    tmp_path: Path, analysed: list[str]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    status, before, _ = run(tree)
    assert status == 1 and "MPC103" in before
    rope = tree / "pkg" / "rope.py"
    rope.write_text(rope.read_text().replace(RETURNED, RETURNED_HALF))
    analysed.clear()
    status, after, _ = run(tree)
    assert sorted(analysed) == ["attention.py", "rope.py"]
    assert status == 0 and after == run(tree, "--no-cache")[1]


def test_a_helper_edit_that_keeps_its_summary_rechecks_only_the_helper(
    tmp_path: Path, analysed: list[str]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    cold = run(tree)
    rope = tree / "pkg" / "rope.py"
    rope.write_text(rope.read_text() + "\n# a comment: no line of the summary moves\n")
    analysed.clear()
    warm = run(tree)
    assert analysed == ["rope.py"]
    assert warm == cold


STAR = FIXTURES / "xfile" / "bad_star_imported_torch"


def test_a_star_exporter_whose_public_names_change_rechecks_its_star_importers(
    tmp_path: Path, analysed: list[str]
) -> None:
    """``detect.py`` gets ``torch`` only by ``from utils.utils import *``: an ``__all__`` that
    leaves it out re-checks the files that star-import it, and the finding goes."""
    tree = copy_tree(STAR, tmp_path / "star")
    status, before, _ = run(tree)
    assert status == 1 and "MPC102" in before
    utils = tree / "utils" / "utils.py"
    utils.write_text(utils.read_text() + '\n__all__ = ["select_device", "ConvBN", "nn"]\n')
    analysed.clear()
    status, after, _ = run(tree)
    assert sorted(analysed) == ["detect.py", "models.py", "utils.py"]
    assert status == 0 and after == run(tree, "--no-cache")[1]


def test_a_star_exporter_edit_that_keeps_its_summary_rechecks_only_it(
    tmp_path: Path, analysed: list[str]
) -> None:
    tree = copy_tree(STAR, tmp_path / "star")
    cold = run(tree)
    utils = tree / "utils" / "utils.py"
    utils.write_text(utils.read_text() + "\n# a comment: no line of the summary moves\n")
    analysed.clear()
    assert run(tree) == cold
    assert analysed == ["utils.py"]


def test_checking_one_file_uses_the_cached_summaries_of_its_imports(
    tmp_path: Path, analysed: list[str]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    run(tree)
    attention = tree / "pkg" / "attention.py"
    attention.write_text(attention.read_text() + "\n")
    analysed.clear()
    status, out, _ = run(tree, "pkg/attention.py")
    assert analysed == ["attention.py"]  # rope.py's summary came from the cache, unwalked
    assert status == 1 and "MPC103" in out


def test_breaking_an_import_cycle_rechecks_the_partner_that_saw_it(
    tmp_path: Path, analysed: list[str]
) -> None:
    """A module sees its import-cycle partners as unknown; once an edit of the partner breaks
    the cycle, it sees the partner's summary, so its entry must not hold."""
    tree = copy_tree(ROPE, tmp_path / "rope")
    rope = tree / "pkg" / "rope.py"
    text = rope.read_text()
    rope.write_text(text.replace("import torch\n", "import torch\n\nfrom . import attention\n"))
    status, cycle, _ = run(tree)
    assert status == 0  # the helper is attention's cycle partner: unknown to it
    rope.write_text(text)
    analysed.clear()
    status, after, _ = run(tree)
    assert sorted(analysed) == ["attention.py", "rope.py"]
    assert status == 1 and after == run(tree, "--no-cache")[1]


XFILE_VARIANTS = {
    "pkg/rope.py": ["q = q.float()", "q = q", "q = q.to(torch.float32)", "q = q.half()"],
    "pkg/attention.py": ["q = apply_rope(", "q = apply_rope(", "q = (lambda *a: a[0])("],
}


@pytest.mark.parametrize("seed", range(4))
def test_random_edit_sequences_match_a_cold_run(tmp_path: Path, seed: int) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    rng = random.Random(seed)
    current = {name: variants[0] for name, variants in XFILE_VARIANTS.items()}
    for _ in range(6):
        name = rng.choice(sorted(XFILE_VARIANTS))
        new = rng.choice(XFILE_VARIANTS[name])
        path = tree / name
        path.write_text(path.read_text().replace(current[name], new, 1))
        current[name] = new
        assert run(tree) == run(tree, "--no-cache"), (seed, current)


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json") if not p.name.startswith(".tmp"))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign", "empty", "directory"])
def test_a_damaged_cache_is_ignored_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(cache))
    tree = small_tree(tmp_path / "mpc101")
    cold = run(tree)
    for entry in entries(cache):
        data = entry.read_bytes()
        if damage == "truncate":
            entry.write_bytes(data[: len(data) // 2])
        elif damage == "garbage":
            entry.write_bytes(b"\x00\xff" * 10)
        elif damage == "foreign":
            entry.write_text(json.dumps({**json.loads(data), "format": 999}))
        elif damage == "empty":
            entry.write_bytes(b"")
        else:
            entry.unlink()
            entry.mkdir()
    status, out, _ = run(tree)  # an entry that is a directory cannot be rewritten: a warning
    assert (status, out) == cold[:2]
    if damage != "directory":
        assert all(json.loads(e.read_text())["format"] == FORMAT for e in entries(cache))


def test_an_entry_from_another_file_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files whose entries were swapped (a hash collision, a copied cache) are re-analysed."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(cache))
    tree = small_tree(tmp_path / "mpc101")
    cold = run(tree)
    first, second = entries(cache)[:2]
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    assert run(tree) == cold


def test_no_cache_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPCHECK_CACHE_DIR")
    tree = small_tree(tmp_path / "mpc101")
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    run(tree, "--no-cache")
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_default_location_is_tagged_and_ignored_by_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MPCHECK_CACHE_DIR")
    tree = small_tree(tmp_path / "mpc101")
    run(tree)
    cache = tree / ".mpcheck_cache"
    assert (
        (cache / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55")
    )
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert entries(cache)
    # the cache holds findings and summaries, never source code
    source_lines = {line.strip() for p in tree.rglob("*.py") for line in p.read_text().splitlines()}
    stored = "".join(e.read_text() for e in entries(cache))
    assert not any(len(line) > 30 and line in stored for line in source_lines)


def test_cache_dir_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPCHECK_CACHE_DIR")
    tree = small_tree(tmp_path / "mpc101")
    (tree / "mpcheck.toml").write_text('cache-dir = "build/lint-cache"\n')
    run(tree)
    assert entries(tree / "build" / "lint-cache")
    assert not (tree / ".mpcheck_cache").exists()


def test_a_read_only_cache_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can write anything")
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o500)
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(cache))
    tree = small_tree(tmp_path / "mpc101")
    status, out, err = run(tree)
    assert status == 1 and json.loads(out)
    assert "warning: cannot use the cache" in err


def test_an_unwritable_cache_path_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Works as root too: a regular file where the cache directory should be."""
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(blocker / "inside"))
    tree = small_tree(tmp_path / "mpc101")
    status, out, err = run(tree)
    assert status == 1 and out == run(tree, "--no-cache")[1]
    assert err.startswith("mpcheck: warning: cannot use the cache")


def test_clean_removes_only_a_tagged_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(cache))
    tree = small_tree(tmp_path / "mpc101")
    run(tree)
    assert cli.main(["clean"]) == 0 and not cache.exists()
    assert cli.main(["clean"]) == 0  # nothing to remove is fine
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(precious))
    assert cli.main(["clean"]) == 2
    assert (precious / "data.txt").is_file()


def test_parallel_runs_on_one_tree_share_the_cache_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    tree = copy_tree(FIXTURES, tmp_path / "fixtures")
    env = {**os.environ, "MPCHECK_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "mpcheck", "check", "--output-format", "json", "-j", "2", "."]
    procs = [
        subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    outputs = [p.communicate()[0] for p in procs]
    reference = subprocess.run([*cmd, "--no-cache"], cwd=tree, env=env, capture_output=True)
    assert all(out == reference.stdout for out in outputs)
    again = subprocess.run(cmd, cwd=tree, env=env, capture_output=True)
    assert again.stdout == reference.stdout
    assert not [p for p in cache.rglob(".tmp-*")]


def counts(err: str) -> dict[str, int]:
    """The engine's count of what a ``--verbose`` run did: ``N files: A analysed, C cached``."""
    line = next(line for line in err.splitlines() if " files: " in line)
    total, _, rest = line.removeprefix("mpcheck: ").partition(" files: ")
    found = {"files": int(total)}
    for part in rest.split(", "):
        number, name = part.split(" ")
        found[name] = int(number)
    return found


def test_verbose_counts_come_from_the_workers(tmp_path: Path) -> None:
    """With ``-j 2`` and enough files for a process pool, the workers' own counts reach the
    report: everything analysed cold, everything but notebooks (never cached) warm, and after
    an edit that changes a helper's summary, the helper and its one importer."""
    tree = copy_tree(FIXTURES, tmp_path / "fixtures")
    env = {**os.environ, "MPCHECK_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "mpcheck", "check", "-v", "-q", "--exit-zero", "-j", "2", "."]

    def verbose_run() -> dict[str, int]:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True)
        return counts(done.stderr)

    notebooks = len(list(tree.rglob("*.ipynb")))
    cold = verbose_run()
    total = cold["files"]
    assert total >= runner.POOL_THRESHOLD
    assert cold == {"files": total, "analysed": total}
    warm = {"files": total, "analysed": notebooks, "cached": total - notebooks}
    assert verbose_run() == {k: n for k, n in warm.items() if n}
    rope = tree / "xfile" / "bad_rope_helper" / "pkg" / "rope.py"
    rope.write_text(rope.read_text().replace(RETURNED, RETURNED_HALF))
    edited = {"files": total, "analysed": notebooks + 2, "cached": total - notebooks - 2}
    assert verbose_run() == edited


def age(tree: Path, seconds: float = 3600) -> None:
    """Make every file look modified ``seconds`` ago: old enough for its stamp to count."""
    then = os.stat(tree).st_mtime - seconds
    for path in tree.rglob("*"):
        os.utime(path, (then, then))


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The sizes of the byte strings each run hashes (reads it had to make)."""
    seen: list[int] = []
    real = incremental.content_hash

    def counting(data: bytes) -> str:
        seen.append(len(data))
        return real(data)

    monkeypatch.setattr(incremental, "content_hash", counting)
    yield seen


def test_a_warm_run_over_old_files_reads_and_hashes_nothing(
    tmp_path: Path, hashed: list[int], analysed: list[str]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    age(tree)
    cold = run(tree)
    assert hashed
    hashed.clear()
    analysed.clear()
    assert run(tree) == cold
    assert hashed == [] and analysed == []


def test_a_changed_stamp_falls_back_to_the_hash(
    tmp_path: Path, hashed: list[int], analysed: list[str]
) -> None:
    """Touched but not changed: hashed, found the same, not analysed. Changed and then given
    its old time back with another size: analysed."""
    tree = copy_tree(ROPE, tmp_path / "rope")
    age(tree)
    cold = run(tree)
    rope = tree / "pkg" / "rope.py"
    rope.touch()
    hashed.clear()
    analysed.clear()
    assert run(tree) == cold and analysed == [] and hashed
    old = os.stat(tree / "pkg" / "attention.py").st_mtime
    rope.write_text(rope.read_text().replace(RETURNED, RETURNED_HALF))
    os.utime(rope, (old, old))
    status, out, _ = run(tree)
    assert sorted(analysed) == ["attention.py", "rope.py"]
    assert (status, out) == run(tree, "--no-cache")[:2]


def test_a_file_modified_just_now_is_judged_by_its_hash(
    tmp_path: Path, hashed: list[int], analysed: list[str]
) -> None:
    """A stamp taken within two seconds of the file's change is not recorded: a rewrite of the
    same size in the same timestamp tick would look unchanged."""
    tree = copy_tree(ROPE, tmp_path / "rope")
    for path in tree.rglob("*.py"):
        os.utime(path)  # modified now
    cold = run(tree)
    hashed.clear()
    analysed.clear()
    assert run(tree) == cold and analysed == []
    assert len(hashed) >= 3  # each file hashed, its stamp not trusted


def test_a_file_with_a_noqa_directive_is_read_on_a_warm_run(
    tmp_path: Path, hashed: list[int]
) -> None:
    tree = small_tree(tmp_path / "mpc101")
    with_noqa = [p for p in tree.rglob("*.py") if b"noqa" in p.read_bytes().lower()]
    age(tree)
    cold = run(tree)
    hashed.clear()
    assert run(tree) == cold
    assert sorted(hashed) == sorted(len(p.read_bytes()) for p in with_noqa)


def test_a_module_checked_when_first_summarised_is_not_walked_again(
    tmp_path: Path, analysed: list[str]
) -> None:
    # attention.py comes first and needs rope.py summarised: rope.py is checked there and
    # then, and its own turn takes the entry that check wrote, in one cold run
    tree = copy_tree(ROPE, tmp_path / "rope")
    cold = run(tree, "-v")
    assert sorted(analysed) == ["__init__.py", "attention.py", "rope.py"]  # each once
    assert "3 files: 3 analysed" in cold[2]
    assert cold[:2] == run(tree, "--no-cache")[:2]


def test_a_one_file_check_does_not_check_what_its_file_imports(
    tmp_path: Path, analysed: list[str]
) -> None:
    tree = copy_tree(ROPE, tmp_path / "rope")
    status, out, _ = run(tree, "pkg/attention.py")
    assert analysed == ["attention.py"]  # rope.py was summarised, not checked
    assert status == 1 and "MPC103" in out
    analysed.clear()
    run(tree)
    assert sorted(analysed) == ["__init__.py", "rope.py"]


def test_cold_runs_over_every_fixture_match_the_uncached_run(tmp_path: Path) -> None:
    tree = copy_tree(FIXTURES, tmp_path / "fixtures")
    assert run(tree)[:2] == run(tree, "--no-cache")[:2]


def _summary_only(cache: Path, name: str, run_token: str) -> None:
    """Make ``name``'s entry what a ``-j`` worker of run ``run_token`` records for a walk
    nested in an import cycle its own check would not meet: its summary, no findings."""
    for entry in cache.rglob("*.json"):
        data = json.loads(entry.read_text())
        if data.get("path", "").endswith(name):
            data.update(checked=False, run=run_token, diagnostics=[])
            entry.write_text(json.dumps(data))
            return
    raise AssertionError(f"no entry for {name}")


def test_a_summary_only_entry_serves_the_lookups_of_its_own_run_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its file's own check walks the file again, and another run's lookups do not use it
    (the walk that wrote it saw an import cycle a check of its own would not see)."""
    walks: list[tuple[str, bool]] = []  # (file, walked inside another file's check)
    real = incremental.analyse_source

    def logged(data: bytes, filename: str, *args: object, **kwargs: object) -> object:
        walks.append((Path(filename).name, kwargs.get("link") is not None))
        return real(data, filename, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(incremental, "analyse_source", logged)
    monkeypatch.setattr(runner.os, "urandom", lambda n: b"\x01" * n)  # this run's token
    cache = tmp_path / "cache"
    monkeypatch.setenv("MPCHECK_CACHE_DIR", str(cache))
    tree = copy_tree(ROPE, tmp_path / "rope")
    attention = tree / "pkg" / "attention.py"
    cold = run(tree)
    assert cold[0] == 1

    _summary_only(cache, "rope.py", "another run")
    walks.clear()
    assert run(tree) == cold
    assert walks == [("rope.py", False)]  # its own check, not its summary from the entry

    _summary_only(cache, "rope.py", "another run")
    attention.write_text(attention.read_text() + "# edited\n")
    walks.clear()
    assert run(tree)[1] == cold[1]
    assert ("rope.py", True) in walks  # attention's lookup walked it: the entry was not used

    _summary_only(cache, "rope.py", (b"\x01" * 8).hex())  # written by this very run
    attention.write_text(attention.read_text() + "# again\n")
    walks.clear()
    assert run(tree)[1] == cold[1]
    assert sorted(walks) == [("attention.py", False), ("rope.py", False)]


def test_the_fingerprint_covers_the_whole_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of any engine module (an editable install) makes old results stale: the
    fingerprint stats every module of the package, not just the cache's own folder."""
    from mpcheck.pipeline import cache

    seen: list[str] = []
    real = os.stat

    def recording(path: str, *args: object, **kwargs: object) -> os.stat_result:
        seen.append(str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cache.os, "stat", recording)
    cache.fingerprint((), {})
    package = Path(cache.__file__).resolve().parents[1]
    for module in ("engine/facts.py", "knowledge/ops.py", "project/models.py", "cli/app.py"):
        assert str(package / module) in seen, module
