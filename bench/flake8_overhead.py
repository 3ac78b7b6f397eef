"""What installing mpcheck costs a flake8 run that does not select MPC.

    python bench/flake8_overhead.py [--dir DIR] [--runs 10] [--select E,F] [--jobs 1]

Runs ``flake8 --select E,F DIR`` twice per round, alternating (so machine noise hits both):
once as installed, with mpcheck's plugin registered, and once with mpcheck's distribution
hidden from flake8's plugin discovery, as if it were not installed. Both go through the same
wrapper, so the only difference is the plugin. Prints the median CPU seconds of each whole
process (user + system, worker processes included) and their ratio. Target: ratio <= 1.05.
DIR defaults to the installed torch's ``nn`` package (many files, no MPC selected); the issue's
reference is an unpacked diffusers wheel.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

# The same interpreter start for both variants; HIDE=1 drops mpcheck from plugin discovery.
WRAPPER = """
import importlib.metadata as metadata, os, sys
if os.environ.get("HIDE") == "1":
    found = metadata.distributions
    metadata.distributions = lambda **kw: [
        d for d in found(**kw) if (d.metadata["Name"] or "").lower() != "mpcheck"
    ]
from flake8.main.cli import main
main(sys.argv[1:])
"""


def cpu(cmd: list[str], hide: bool) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**_env(), "HIDE": "1" if hide else "0"}
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _env() -> dict[str, str]:
    return dict(os.environ)


def _default_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return Path(__file__).resolve().parents[1] / "mpcheck"
    return Path(next(iter(spec.submodule_search_locations))) / "nn"


def plugin_listed(hide: bool) -> bool:
    """Whether flake8 sees the plugin in that variant (so the comparison means something)."""
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, "--version"],
        capture_output=True,
        text=True,
        env={**_env(), "HIDE": "1" if hide else "0"},
        check=False,
    ).stdout
    return "mpcheck" in out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--select", default="E,F")
    parser.add_argument("--jobs", default="1", help="flake8 --jobs (1: no worker processes)")
    args = parser.parse_args()
    directory = args.dir or _default_dir()
    if not plugin_listed(hide=False) or plugin_listed(hide=True):
        sys.exit("flake8 does not see mpcheck installed (or cannot hide it): nothing to compare")
    cmd = [sys.executable, "-c", WRAPPER, "--select", args.select, "--jobs", args.jobs]
    cmd.append(str(directory))
    cpu(cmd, hide=False)  # warm the file system cache for both
    installed, bare = [], []
    for _ in range(args.runs):
        installed.append(cpu(cmd, hide=False))
        bare.append(cpu(cmd, hide=True))
    a, b = statistics.median(installed), statistics.median(bare)
    files = sum(1 for _ in directory.rglob("*.py"))
    print(f"flake8 --select {args.select} {directory} ({files} files), median of {args.runs}:")
    print(f"  with mpcheck installed:    {a:.3f} s CPU")
    print(f"  without mpcheck installed: {b:.3f} s CPU")
    print(f"  ratio: {a / b:.3f}x")


if __name__ == "__main__":
    main()
