"""Time ``mpcheck check`` on a large corpus against libcst's own parse of the same files.

Usage::

    python bench/bench_check.py [CORPUS_DIR ...] [--fetch DIR] [--jobs N]

``--fetch DIR`` downloads the transformers, diffusers and timm wheels into DIR
(``pip download --no-deps``), unpacks them and benchmarks those. Reported:
lines, files, libcst parse time, mpcheck wall time (single process and with
``--jobs``), ms per 1,000 lines, the engine's overhead over the bare parse,
and peak memory (max RSS) of the mpcheck process.

Speed targets live here, not in unit tests: a timed unit test is either flaky
or too loose to mean anything. Targets (2-core machine, one process): at most
1.5x libcst's parse time per file overall (the prefilter skips files that
cannot matter, so this can be below 1x), and below 1 GiB peak memory.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import libcst as cst

PACKAGES = ("transformers", "diffusers", "timm")
TARGET_RATIO = 1.5
TARGET_RSS_MB = 1024


def fetch(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest)]
    subprocess.run([*cmd, *PACKAGES], check=True)
    roots = []
    for wheel in sorted(dest.glob("*.whl")):
        name = wheel.name.split("-")[0]
        target = dest / name
        if not target.exists():
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(target)
        roots.append(target)
    return roots


def python_files(roots: list[Path]) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if p.is_file())


def parse_all(files: list[Path]) -> tuple[float, int]:
    lines = 0
    start = time.perf_counter()
    for path in files:
        data = path.read_bytes()
        lines += data.count(b"\n")
        try:
            cst.parse_module(data)
        except Exception:  # noqa: BLE001 - a few files in any corpus do not parse
            pass
    return time.perf_counter() - start, lines


def run_mpcheck(roots: list[Path], jobs: int) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB, and the number of findings of one CLI run."""
    cmd = [sys.executable, "-m", "mpcheck", "check", "--no-cache", "--output-format", "json-lines"]
    cmd += ["--exit-zero", "--select", "ALL", "-j", str(jobs), *map(str, roots)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"mpcheck failed ({proc.returncode}):\n{proc.stderr}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return elapsed, peak, sum(1 for line in proc.stdout.splitlines() if line.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="*", type=Path)
    parser.add_argument("--fetch", type=Path, help="download and unpack the corpus here")
    parser.add_argument("--jobs", type=int, default=2, help="workers for the parallel run")
    args = parser.parse_args()
    roots = list(args.corpus) + (fetch(args.fetch) if args.fetch else [])
    if not roots:
        parser.error("give corpus directories or --fetch DIR")
    files = python_files(roots)
    parse_s, lines = parse_all(files)
    one_s, one_rss, findings = run_mpcheck(roots, 1)
    par_s, par_rss, _ = run_mpcheck(roots, args.jobs)
    per_k = 1000 / max(lines, 1) * 1000
    ratio = one_s / parse_s
    print(f"corpus      : {len(files)} files, {lines:,} lines ({', '.join(map(str, roots))})")
    print(f"libcst parse: {parse_s:7.1f} s  {parse_s * per_k:6.1f} ms/1k lines")
    print(
        f"mpcheck -j1 : {one_s:7.1f} s  {one_s * per_k:6.1f} ms/1k lines  peak {one_rss:6.0f} MiB"
    )
    print(f"mpcheck -j{args.jobs} : {par_s:7.1f} s  {par_s * per_k:6.1f} ms/1k lines")
    print(f"ratio       : {ratio:.2f}x the bare parse (target <= {TARGET_RATIO}x)")
    print(f"findings    : {findings}")
    ok = ratio <= TARGET_RATIO and one_rss <= TARGET_RSS_MB
    print("result      :", "within targets" if ok else "OUT OF TARGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
