"""Cold, warm and incremental runs over one tree: what the persistent cache buys.

    python bench/cache_runs.py /work/corpus/precision/transformers [--jobs 2] [--repeat 3]

The tree is copied to a temporary directory (edits never touch the original), then, each
round with a fresh cache:

- cold: an empty cache;
- warm: nothing changed;
- leaf edit: one comment appended to a file no other file imports;
- helper edit: a function returning a float32 upcast added to the module whose summary the
  number of files nearest ``--importers`` (50) consulted, so those files and the helper,
  and only those, are analysed again.

Each run is ``mpcheck check`` as a user starts it (``-j``, JSON to /dev/null, with bytecode
caching on as in a normal install: ``PYTHONDONTWRITEBYTECODE`` is dropped); wall time and the
peak resident memory of the largest process (``wait4``'s ``ru_maxrss``: the main process or a
worker) are measured, medians over the rounds. The re-analysed count is the engine's own
(``--verbose`` prints how many files were analysed and how many came from the cache); the
number of importers of the edited helper is read from the cache's dependency lists.

Do not edit mpcheck's sources while it runs: the cache is keyed by them, so every run after
an edit would be cold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

MPCHECK = str(Path(sys.executable).with_name("mpcheck"))


def run(tree: Path, cache: Path, jobs: int) -> tuple[float, float, float, dict[str, int]]:
    """Wall seconds, CPU seconds (all processes), peak RSS (MiB) of the largest process of one
    run, and the engine's count of files by outcome (analysed, cached)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["MPCHECK_CACHE_DIR"] = str(cache)
    cmd = [MPCHECK, "check", "-q", "-v", "--exit-zero", "--output-format", "json"]
    cmd += ["-j", str(jobs), "."]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"mpcheck failed in {tree}:\n{err}")
    line = re.search(r"mpcheck: (\d+) files: (.*)", err)
    if line is None:
        raise SystemExit(f"no file counts in mpcheck's output:\n{err}")
    counts = {"files": int(line.group(1))}
    counts.update({k: int(n) for n, k in re.findall(r"(\d+) (\w+)", line.group(2))})
    cpu = usage.ru_utime + usage.ru_stime  # the workers' too: the main process reaps them
    return wall, cpu, usage.ru_maxrss / 1024, counts


def helper(cache: Path, importers: int) -> tuple[Path, int]:
    """The torch-using project file whose summary a number of checks nearest ``importers``
    depended on, and that number (a file without torch only re-exports: adding a function
    to it changes no summary)."""
    counts: Counter[str] = Counter()
    for entry in cache.rglob("*.json"):
        counts.update(list(json.loads(entry.read_text())["dependencies"]))
    candidates = [(abs(n - importers), -n, name) for name, n in counts.items()]
    for _, minus_n, name in sorted(candidates):
        if b"torch" in Path(name).read_bytes():
            return Path(name), -minus_n
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
    parser.add_argument("--importers", type=int, default=50, help="of the edited helper")
    args = parser.parse_args()
    times: dict[str, list[float]] = {k: [] for k in ("cold", "warm", "leaf", "helper")}
    cpus: dict[str, list[float]] = {k: [] for k in times}
    peak: dict[str, float] = {}
    counts: dict[str, int] = {}
    print(f"load before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            tree = Path(tmp) / "tree"
            cache = Path(tmp) / "cache"
            shutil.rmtree(tree, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(args.tree, tree / args.tree.name)
            for name in ("cold", "warm", "leaf", "helper"):
                if name == "leaf":
                    target = leaf(tree, cache)
                    target.write_text(target.read_text() + "\n# an edit\n")
                elif name == "helper":
                    target, counts["files consulting the helper"] = helper(cache, args.importers)
                    with target.open("a") as out:
                        out.write("\n\ndef _bench_upcast(x):\n    return x.float()\n")
                wall, cpu, rss, outcome = run(tree, cache, args.jobs)
                times[name].append(wall)
                cpus[name].append(cpu)
                peak[name] = max(peak.get(name, 0.0), rss)
                counts[f"analysed ({name}, of {outcome['files']})"] = outcome.get("analysed", 0)
                print(f"  {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, {rss:.0f} MiB, {outcome}")
                print(f"    load: {os.getloadavg()}", flush=True)
    files = sum(1 for _ in args.tree.rglob("*.py"))
    print(f"{args.tree.name}: {files} files, -j {args.jobs}, median of {args.repeat} rounds")
    for name, values in times.items():
        wall, cpu = statistics.median(values), statistics.median(cpus[name])
        print(f"{name:7} {wall:7.2f} s wall {cpu:7.2f} s CPU   peak {peak[name]:6.0f} MiB")
    for name, n in counts.items():
        print(f"{name}: {n}")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
