"""Cold, warm and incremental runs over one tree: what the persistent cache buys.

    python bench/cache_runs.py /work/corpus/precision/transformers [--jobs 2] [--repeat 3]

The tree is copied to a temporary directory (edits never touch the original), then, each
round with a fresh cache:

- cold: an empty cache;
- warm: nothing changed;
- leaf edit: one comment appended to a file no other file imports;
- helper edit: a function returning a float32 upcast added to the module that the most
  files consulted the summary of, so those files, and only those, are analysed again.

Each run is ``mpcheck check`` as a user starts it (``-j``, JSON to /dev/null); wall time and
the peak resident memory of the largest process are measured, medians over the rounds. The
re-analysed count is the number of cache entries each run rewrote.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

MPCHECK = str(Path(sys.executable).with_name("mpcheck"))


def run(tree: Path, cache: Path, jobs: int) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of the largest process of one run."""
    env = {**os.environ, "MPCHECK_CACHE_DIR": str(cache)}
    cmd = [MPCHECK, "check", "-q", "--exit-zero", "--output-format", "json", "-j", str(jobs), "."]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"mpcheck failed in {tree}")
    return wall, usage.ru_maxrss / 1024


def entries(cache: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in cache.rglob("*.json")}


def rewritten(before: dict[Path, int], cache: Path) -> int:
    return sum(1 for p, m in entries(cache).items() if before.get(p) != m)


def most_consulted(cache: Path) -> tuple[Path, int]:
    """The torch-using project file that the most checks depended on, and how many (a file
    without torch only re-exports: adding a function to it changes no summary)."""
    counts: Counter[str] = Counter()
    for entry in cache.rglob("*.json"):
        counts.update(list(json.loads(entry.read_text())["dependencies"]))
    for name, n in counts.most_common():
        if b"torch" in Path(name).read_bytes():
            return Path(name), n
    raise SystemExit("no helper file")


def leaf(tree: Path, cache: Path) -> Path:
    consulted: set[str] = set()
    for entry in cache.rglob("*.json"):
        consulted.update(json.loads(entry.read_text())["dependencies"])
    for path in sorted(tree.rglob("*.py")):
        if str(path.resolve()) not in consulted and b"torch" in path.read_bytes():
            return path
    raise SystemExit("no leaf file")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {k: [] for k in ("cold", "warm", "leaf", "helper")}
    peak: dict[str, float] = {}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            tree = Path(tmp) / "tree"
            cache = Path(tmp) / "cache"
            shutil.rmtree(tree, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(args.tree, tree / args.tree.name)
            for name in ("cold", "warm", "leaf", "helper"):
                before = entries(cache) if cache.exists() else {}
                if name == "leaf":
                    target = leaf(tree, cache)
                    target.write_text(target.read_text() + "\n# an edit\n")
                elif name == "helper":
                    target, counts["consulting the helper"] = most_consulted(cache)
                    with target.open("a") as out:
                        out.write("\n\ndef _bench_upcast(x):\n    return x.float()\n")
                wall, rss = run(tree, cache, args.jobs)
                times[name].append(wall)
                peak[name] = max(peak.get(name, 0.0), rss)
                counts[f"re-analysed ({name})"] = rewritten(before, cache)
    files = sum(1 for _ in args.tree.rglob("*.py"))
    print(f"{args.tree.name}: {files} files, -j {args.jobs}, median of {args.repeat} rounds")
    for name, values in times.items():
        print(f"{name:7} {statistics.median(values):7.2f} s wall   peak {peak[name]:6.0f} MiB")
    for name, n in counts.items():
        print(f"{name}: {n}")


if __name__ == "__main__":
    main()
