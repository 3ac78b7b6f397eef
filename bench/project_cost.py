"""CPU cost of whole-project analysis against checking each file alone, side by side.

    python bench/project_cost.py /path/to/a/package [--repeat 3]

Checks every file of the tree in one process twice per round (alone, then with the project
phase), alternating so machine noise hits both, and prints CPU seconds and the ratio
(target: at most 1.3x).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from mpcheck.engine import Options, check_source
from mpcheck.project import summarise
from mpcheck.rule import all_rules


def run(files: list[Path], root: str | None) -> tuple[float, int]:
    summarise._STORES.clear()  # a cold store, as in a fresh run
    rules = tuple(all_rules())
    options = Options(project_root=root)
    start = time.process_time()
    found = sum(len(check_source(p.read_bytes(), str(p), rules, options)) for p in files)
    return time.process_time() - start, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
