"""CPU cost of whole-project analysis against checking each file alone, side by side.

    python bench/project_cost.py /path/to/a/package [--repeat 3]
    python bench/project_cost.py /path/to/a/package --cli [--jobs 2] [--repeat 2]

Checks every file of the tree in one process twice per round (alone, then with the project
phase), alternating so machine noise hits both, and prints CPU seconds and the ratio
(target: at most 1.3x). That path summarises a module and checks it in two walks; ``--cli``
runs ``mpcheck check`` itself as a user's first run does (an empty cache, ``-j``), with
``--follow-imports skip`` against the default, where a module the run checks is checked
while it is summarised, and adds wall time and the peak RSS of the largest process.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.project import summarise
from mpcheck.ruleset.rule import all_rules


def run(files: list[Path], root: str | None) -> tuple[float, int]:
    summarise._STORES.clear()  # a cold store, as in a fresh run
    rules = tuple(all_rules())
    options = Options(project_root=root)
    start = time.process_time()
    found = sum(len(check_source(p.read_bytes(), str(p), rules, options)) for p in files)
    return time.process_time() - start, found


# Runs the CLI as its only child and prints that child's peak RSS (KiB): the peak of one run.
_WRAP = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def cli(tree: Path, mode: str, jobs: int) -> tuple[float, float, float]:
    """CPU seconds (all processes), wall seconds and peak RSS (MiB) of a cold CLI run."""
    cache = Path(tempfile.mkdtemp(prefix="mpcheck-project-cost-"))
    cmd = [sys.executable, "-m", "mpcheck", "check", "-q", "--exit-zero", "-j", str(jobs)]
    cmd += ["--cache-dir", str(cache), "--follow-imports", mode, tree.name]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WRAP, *cmd], cwd=tree.parent, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(cache, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, int(done.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cli", action="store_true", help="time the CLI's cold runs")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if args.cli:
        runs: dict[str, list[tuple[float, float, float]]] = {"skip": [], "normal": []}
        for _ in range(args.repeat):
            for mode in runs:
                runs[mode].append(cli(args.tree.resolve(), mode, args.jobs))
        for mode, got in runs.items():
            cpu, wall, _ = min(got)
            peak = max(r[2] for r in got)
            print(f"{mode:6}: {cpu:.1f} s CPU, {wall:.1f} s wall, peak RSS {peak:.0f} MiB")
        print(f"ratio: {min(runs['normal'])[0] / min(runs['skip'])[0]:.2f}x (fastest of each)")
        return
    files = sorted(args.tree.rglob("*.py"))
    root = str(args.tree.resolve().parent)
    os.chdir(root)
    alone, project = [], []
    for _ in range(args.repeat):
        seconds, n_alone = run(files, None)
        alone.append(seconds)
        seconds, n_project = run(files, root)
        project.append(seconds)
    a, p = min(alone), min(project)
    print(f"{args.tree.name}: {len(files)} files")
    print(f"each file alone: {a:.1f} s CPU, {n_alone} findings")
    print(f"whole project:   {p:.1f} s CPU, {n_project} findings")
    print(f"ratio: {p / a:.2f}x")


if __name__ == "__main__":
    main()
