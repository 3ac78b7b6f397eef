"""Cold runs of two mpcheck installs on one tree, alternating, with their findings compared.

    python bench/cold_compare.py /tmp/corpora/transformers \\
        --before /work/wt/base/.venv/bin/mpcheck [--after .venv/bin/mpcheck] [--jobs 2] [--repeat 1]
        [--also a2403c4=/work/wt/old/.venv/bin/mpcheck ...] [--no-cache]

Each round runs ``before`` then ``after`` (then swaps the order next round, so a change of
load hits both) with an empty cache directory each, JSON output, ``-j``, bytecode caching on.
Prints wall seconds, CPU seconds of all processes (``wait4``: the workers are reaped by the
main process), the peak RSS of the largest process, the load average at the start, the
engine's file counts, and whether the two JSON reports hold the same findings
(``bench/compare_json.py``); ``--also`` adds installs run in the same rounds (an older
baseline), whose findings are not compared, and the CPU ratio of ``after`` to each install
ends the output. ``--no-cache`` runs each install with ``--no-cache`` instead (no cache
is read or written: the run issue 36's cost bar is measured on). On a shared machine, compare
CPU seconds first.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _here(exe: str) -> str:
    return str(Path(exe).resolve()) if os.sep in exe else exe


def cold(
    mpcheck: str, tree: Path, jobs: int, out: Path, no_cache: bool = False
) -> tuple[float, float, float, str]:
    """Wall s, CPU s, peak RSS MiB of the largest process, and the engine's file counts."""
    cache = Path(tempfile.mkdtemp(prefix="mpcheck-cold-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["MPCHECK_CACHE_DIR"] = str(cache)
    cmd = [mpcheck, "check", "-q", "-v", "--exit-zero", "--output-format", "json"]
    cmd += ["--no-cache"] if no_cache else []
    cmd += ["-j", str(jobs), "-o", str(out), "."]
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{mpcheck} failed:\n{err}")
    counts = re.search(r"mpcheck: (.*)", err)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, counts.group(1) if counts else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--before", required=True, help="the mpcheck executable to compare to")
    parser.add_argument("--after", default=str(Path(sys.executable).with_name("mpcheck")))
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="LABEL=EXE",
        help="another install run in the same rounds, for its CPU ratio only (repeatable)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-cache", action="store_true", help="run each with --no-cache")
    args = parser.parse_args()
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix="mpcheck-cold-json-"))
    same = True
    # (a relative path names an executable from here: the runs start in the tree)
    order = [("before", _here(args.before))]
    order += [(label, _here(exe)) for label, _, exe in (a.partition("=") for a in args.also)]
    order.append(("after", _here(args.after)))
    spent: dict[str, float] = dict.fromkeys((label for label, _ in order), 0.0)
    for round_ in range(args.repeat):
        reports = {}
        for label, exe in order if round_ % 2 == 0 else order[::-1]:
            load = os.getloadavg()[0]
            reports[label] = work / f"{label}-{round_}.json"
            wall, cpu, rss, counts = cold(exe, tree, args.jobs, reports[label], args.no_cache)
            spent[label] += cpu
            print(
                f"round {round_} {label:6}: wall {wall:7.1f} s  CPU {cpu:7.1f} s  "
                f"peak RSS {rss:6.1f} MiB  load {load:5.2f}  ({counts})",
                flush=True,
            )
        compare = [sys.executable, str(HERE / "compare_json.py")]
        result = subprocess.run([*compare, str(reports["before"]), str(reports["after"])])
        same = same and result.returncode == 0
    for label, cpu in spent.items():
        if label != "after" and cpu:
            print(f"CPU after / {label}: {spent['after'] / cpu:.2f}x")
    print("findings identical" if same else "FINDINGS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
