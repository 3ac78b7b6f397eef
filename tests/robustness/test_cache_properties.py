"""Whatever the cache directory holds, a check reports what a run without the cache reports,
writes nothing outside the cache and never hangs (issue 34, item 3).

Mutations of a real cache: entries truncated, replaced by garbage, by deeply nested or
mistyped JSON, by a FIFO, a link out of the cache, a directory or a huge sparse file; its
directories replaced by links or files; its tag and ``.gitignore`` by links or garbage. The
seed is fixed and the count bounded (``budget.py``); ``bench/fuzz.py`` runs it for longer.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpcheck.cli import app as cli
from tests.robustness.budget import examples

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mpc101"
FILES = ("bad_rmsnorm_block.py", "bad_script_half_model.py", "good_upcast_idioms.py")
ENTRY_DAMAGE = (
    "truncate",
    "garbage",
    "nested",
    "mistyped",
    "fifo",
    "link-out",
    "directory",
    "huge",
    "empty",
)
DIR_DAMAGE = ("shard-link", "bucket-link", "shard-file", "tag-link", "tag-garbage", "ignore-link")

# (entry index, damage, bytes) for entries; (damage,) for the cache's directories and files
MUTATIONS = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 2), st.sampled_from(ENTRY_DAMAGE), st.binary(max_size=40)),
        st.tuples(st.sampled_from(DIR_DAMAGE)),
    ),
    min_size=1,
    max_size=5,
)


class Tree:
    """A small project, its findings without the cache and a pristine cache for it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mpcheck-cache-fuzz-"))
        atexit.register(shutil.rmtree, self.root, True)
        self.project = self.root / "project"
        self.project.mkdir()
        for name in FILES:
            shutil.copy2(FIXTURES / name, self.project / name)
        self.cache = self.root / "cache"
        self.pristine = self.root / "pristine"
        self.outside = self.root / "outside"
        self.reference = self.check("--no-cache")[1]
        self.check()
        self.cache.rename(self.pristine)

    def check(self, *args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(self.project)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                argv = ["check", "--output-format", "json", "-j", "1", "--cache-dir"]
                status = cli.main([*argv, str(self.cache), *args])
        finally:
            os.chdir(cwd)
        return status, out.getvalue(), err.getvalue()


@cache
def tree() -> Tree:
    return Tree()


def damage_entry(entry: Path, kind: str, data: bytes, outside: Path) -> None:
    if not entry.exists() and not entry.is_symlink():
        return
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()
    if kind == "truncate":
        entry.write_bytes(data[:3])
    elif kind == "garbage":
        entry.write_bytes(data)
    elif kind == "nested":
        entry.write_text("[" * 50_000 + "]" * 50_000)
    elif kind == "mistyped":
        entry.write_text(json.dumps({"format": 3, "path": 7, "diagnostics": "x"}))
    elif kind == "fifo":
        os.mkfifo(entry)
    elif kind == "link-out":
        entry.symlink_to(outside / "victim.json")
    elif kind == "directory":
        entry.mkdir()
    elif kind == "huge":
        with entry.open("wb") as f:
            f.truncate(1 << 32)  # sparse: four gigabytes that must not be read
    else:
        entry.write_bytes(b"")


def damage_dirs(cache: Path, kind: str, outside: Path) -> None:
    bucket = next((p for p in cache.iterdir() if p.is_dir() and not p.is_symlink()), None)
    if bucket is None:  # (an earlier mutation took it)
        return
    shards = [p for p in bucket.iterdir() if p.is_dir() and not p.is_symlink()]
    if kind == "shard-link" and shards:
        shutil.rmtree(shards[0])
        shards[0].symlink_to(outside)
    elif kind == "shard-file" and shards:
        shutil.rmtree(shards[0])
        shards[0].write_bytes(b"not a directory")
    elif kind == "bucket-link":
        shutil.rmtree(bucket)
        bucket.symlink_to(outside)
    elif kind in ("tag-link", "tag-garbage", "ignore-link"):
        target = cache / (".gitignore" if kind == "ignore-link" else "CACHEDIR.TAG")
        target.unlink(missing_ok=True)
        if kind == "tag-garbage":
            target.write_bytes(b"Signature: nope\n")
        else:
            target.symlink_to(outside / "victim.json")


def snapshot(root: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def cache_survives(mutations: list[tuple[object, ...]]) -> None:
    """The property: after ``mutations``, two runs report exactly the uncached findings."""
    t = tree()
    shutil.rmtree(t.cache, ignore_errors=True)
    if t.cache.is_symlink():
        t.cache.unlink()
    shutil.rmtree(t.outside, ignore_errors=True)
    t.outside.mkdir()
    (t.outside / "victim.json").write_text("precious")
    shutil.copytree(t.pristine, t.cache, symlinks=True)
    entries = sorted(t.cache.rglob("*.json"))
    for mutation in mutations:
        if len(mutation) == 3:
            index, kind, data = mutation
            assert isinstance(index, int) and isinstance(kind, str) and isinstance(data, bytes)
            damage_entry(entries[index % len(entries)], kind, data, t.outside)
        else:
            damage_dirs(t.cache, str(mutation[0]), t.outside)
    before = snapshot(t.outside)
    for _ in range(2):  # the first run meets the damage, the second what the first left
        status, out, err = t.check()
        assert status == 1 and out == t.reference, err
        assert "internal error" not in err
        assert snapshot(t.outside) == before


@settings(
    derandomize=True,
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(MUTATIONS)
def test_a_damaged_cache_never_changes_the_findings(mutations: list[tuple[object, ...]]) -> None:
    cache_survives(mutations)
